"""Character batches as padded tensors: what every neural model in segrl reads."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

from segrl.data.vocab import CharVocab


@dataclass
class CharBatch:
    """A batch of texts as character ids, padded on the right with ``vocab.pad_id``."""

    ids: torch.Tensor  # [B, L] long
    lengths: torch.Tensor  # [B] long, characters per text
    mask: torch.Tensor  # [B, L] bool, True at real characters
    texts: list[str]

    def to(self, device: torch.device | str) -> CharBatch:
        return CharBatch(
            self.ids.to(device), self.lengths.to(device), self.mask.to(device), self.texts
        )

    def __len__(self) -> int:
        return len(self.texts)


def encode_batch(
    vocab: CharVocab,
    texts: Sequence[str],
    max_len: int | None = None,
    device: torch.device | str | None = None,
) -> CharBatch:
    """Encode ``texts`` into a ``CharBatch``; width is the longest text, or ``max_len`` when given
    (fixed-shape batches; texts longer than ``max_len`` are an error, not silently cut)."""
    encoded = [vocab.encode(t) for t in texts]
    longest = max((len(e) for e in encoded), default=0)
    width = longest if max_len is None else max_len
    if longest > width:
        raise ValueError(f"a text of {longest} characters does not fit max_len={width}")
    ids = torch.full((len(texts), width), vocab.pad_id, dtype=torch.long)
    for row, e in enumerate(encoded):
        ids[row, : len(e)] = torch.tensor(e, dtype=torch.long)
    lengths = torch.tensor([len(e) for e in encoded], dtype=torch.long)
    mask = torch.arange(width).unsqueeze(0) < lengths.unsqueeze(1)  # [B, L]
    batch = CharBatch(ids, lengths, mask, list(texts))
    return batch.to(device) if device is not None else batch


def iterate_batches(
    texts: Sequence[str], batch_size: int, shuffle: bool = False, seed: int = 0
) -> Iterator[list[str]]:
    """Batches of ``batch_size`` texts (the last one may be smaller); a seeded shuffle when asked."""
    order = list(range(len(texts)))
    if shuffle:
        random.Random(seed).shuffle(order)
    for start in range(0, len(order), batch_size):
        yield [texts[i] for i in order[start : start + batch_size]]


def training_batches(
    texts: Sequence[str], batch_size: int, seed: int, start_step: int = 0
) -> Iterator[list[str]]:
    """Shuffled batches, epoch after epoch (epoch ``e`` shuffled with ``seed + e``), from ``start_step``
    on: the same sequence whether or not a run was interrupted."""
    per_epoch = math.ceil(len(texts) / batch_size)
    epoch, offset = divmod(start_step, per_epoch)
    while True:
        batches = iterate_batches(texts, batch_size, shuffle=True, seed=seed + epoch)
        for i, batch in enumerate(batches):
            if i >= offset:
                yield batch
        epoch, offset = epoch + 1, 0
