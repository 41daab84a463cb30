"""Texts with a segmentation, as the language models read them.

A segmentation of a text is stored as ``ends [B, L]``: True at the last character of every segment.
Spaces are never inside a segment: a space always closes the segment before it and is itself no
segment (the language models spell it as the terminator of that segment, see ``segrl.lm``). So for
``"the cats"`` split as ``the | cat s``::

    text   t h e _ c a t s
    ends   0 0 1 0 0 0 1 1

Decisions are the agent's view: ``decisions[b, i]`` true means "split after character i". Only
decisions at word-internal positions (``flippable``: neither character ``i`` nor ``i + 1`` is a space,
and ``i + 1`` is inside the text) matter; the others are forced (a space is always a boundary, the end of
the text always closes a segment) and ignored, whatever their value.

For word discovery (hidden spaces) give the texts without spaces: then every position is a decision.

    >>> from segrl.data.vocab import CharVocab
    >>> vocab = CharVocab.from_texts(["the cats"], "?")
    >>> batch = SegmentedBatch.from_segments(vocab, [["the", " ", "cat", "s"]])
    >>> batch.ends.int().tolist()
    [[0, 0, 1, 0, 0, 0, 1, 1]]
    >>> batch.segments()
    [['the', 'cat', 's']]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from segrl.data.batching import CharBatch, encode_batch
from segrl.data.vocab import CharVocab
from segrl.errors import ModelError

SPACE = " "


@dataclass
class SegmentedBatch:
    """Texts as character ids with a segmentation of each."""

    chars: CharBatch  # ids [B, L], lengths [B], mask [B, L] True at characters
    ends: torch.Tensor  # [B, L] bool, True at the last character of every segment
    space: torch.Tensor  # [B, L] bool, True at space characters

    # --- construction ------------------------------------------------------------------------------
    @classmethod
    def from_decisions(
        cls,
        vocab: CharVocab,
        texts: Sequence[str],
        decisions: torch.Tensor | np.ndarray | Sequence[Sequence[int]],
        device: torch.device | str | None = None,
    ) -> SegmentedBatch:
        """Texts segmented by ``decisions [B, W]`` (``W >= len(text) - 1`` for every text; entries
        past a text's last decision and at forced positions are ignored)."""
        chars = encode_batch(vocab, texts)
        width = chars.ids.shape[1]
        split = _as_bool_matrix(decisions, len(texts))
        if width > 1 and split.shape[1] < width - 1:
            raise ModelError(
                f"decisions have {split.shape[1]} columns, but a text of {width} characters "
                f"needs {width - 1}"
            )
        ends = torch.zeros(len(texts), width, dtype=torch.bool)
        columns = min(split.shape[1], width)
        ends[:, :columns] = split[:, :columns]
        return cls._with_forced_boundaries(vocab, chars, ends, device)

    @classmethod
    def from_segments(
        cls,
        vocab: CharVocab,
        segmentations: Sequence[Sequence[str]],
        device: torch.device | str | None = None,
        prefixes: bool = False,
    ) -> SegmentedBatch:
        """Texts given as their segments (each text is the concatenation of its segments; a space
        inside a segment still splits it, spaces may be separate segments or attached). With
        ``prefixes`` the texts are beginnings of texts and may end with a space."""
        texts = ["".join(segments) for segments in segmentations]
        chars = encode_batch(vocab, texts)
        ends = torch.zeros(chars.ids.shape, dtype=torch.bool)
        for row, segments in enumerate(segmentations):
            offset = 0
            for segment in segments:
                offset += len(segment)
                if segment:
                    ends[row, offset - 1] = True
        return cls._with_forced_boundaries(vocab, chars, ends, device, prefixes)

    @classmethod
    def from_ends(cls, vocab: CharVocab, chars: CharBatch, ends: torch.Tensor) -> SegmentedBatch:
        """Encoded texts with segment ends ``[B, L]`` (forced boundaries are added)."""
        return cls._with_forced_boundaries(vocab, chars, ends.to(chars.ids.device), None)

    @classmethod
    def _with_forced_boundaries(
        cls,
        vocab: CharVocab,
        chars: CharBatch,
        ends: torch.Tensor,
        device: torch.device | str | None,
        prefixes: bool = False,
    ) -> SegmentedBatch:
        space = space_mask(vocab, chars, prefixes)
        if device is not None:
            chars, ends, space = chars.to(device), ends.to(device), space.to(device)
        return cls(chars, _forced(chars, space, ends), space)

    # --- views -----------------------------------------------------------------------------------
    @property
    def texts(self) -> list[str]:
        return self.chars.texts

    @property
    def device(self) -> torch.device:
        return self.chars.ids.device

    def __len__(self) -> int:
        return len(self.chars)

    def to(self, device: torch.device | str) -> SegmentedBatch:
        return SegmentedBatch(self.chars.to(device), self.ends.to(device), self.space.to(device))

    @property
    def starts(self) -> torch.Tensor:
        """[B, L] bool, True at the first character of every segment."""
        after_end = torch.zeros_like(self.ends)
        after_end[:, 1:] = self.ends[:, :-1] | self.space[:, :-1]
        after_end[:, 0] = True
        return after_end & self.chars.mask & ~self.space

    @property
    def flippable(self) -> torch.Tensor:
        """[B, L] bool, True at character ``i`` where the decision "split after i" is free."""
        return flippable_mask(self.chars, self.space)

    def n_segments(self) -> torch.Tensor:
        """[B] segments per text."""
        return self.ends.sum(1)

    def segments(self) -> list[list[str]]:
        """The segments of each text (spaces left out)."""
        out = []
        for text, row in zip(self.texts, self.ends.cpu().tolist(), strict=True):
            segments, start = [], 0
            for i, char in enumerate(text):
                if char == SPACE:
                    start = i + 1
                elif row[i]:
                    segments.append(text[start : i + 1])
                    start = i + 1
            out.append(segments)
        return out

    def decisions(self) -> torch.Tensor:
        """[B, L - 1] long, the decisions (forced ones included) that give this segmentation."""
        split = self.ends | self.space
        return (split[:, :-1] & self.chars.mask[:, 1:]).long()

    def with_ends(self, ends: torch.Tensor) -> SegmentedBatch:
        """The same texts with other segment ends (forced boundaries are added)."""
        return SegmentedBatch(self.chars, _forced(self.chars, self.space, ends), self.space)

    def segment_spans(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Every segment as ``(row, start, length)``, three [N] long tensors in text order."""
        starts = self.starts
        rows, start = starts.nonzero(as_tuple=True)
        end_rows, end = self.ends.nonzero(as_tuple=True)
        if not torch.equal(rows, end_rows):  # pragma: no cover - guaranteed by construction
            raise ModelError("segment starts and ends do not pair up")
        return rows, start, end - start + 1


def check_texts(texts: Sequence[str], prefixes: bool = False) -> None:
    """Raise ``ModelError`` for texts no segmental model generates: empty ones, and ones that start or
    end with a space or have two spaces in a row (a space only ever comes between two segments).
    ``prefixes``: beginnings of texts, which may end with a space."""
    for number, text in enumerate(texts):
        if not text:
            raise ModelError(f"text {number} of the batch is empty; leave empty texts out")
        if text[0] == SPACE or (text[-1] == SPACE and not prefixes) or SPACE * 2 in text:
            raise ModelError(
                f"text {number} of the batch ({text[:40]!r}) starts or ends with a space or has two "
                "spaces in a row; normalise white space first (segrl.data.load_corpus does)"
            )


def space_mask(vocab: CharVocab, chars: CharBatch, prefixes: bool = False) -> torch.Tensor:
    """[B, L] bool, True at spaces; checks the texts (``check_texts``). Texts with spaces need a
    vocabulary with the space character."""
    check_texts(chars.texts, prefixes)
    if SPACE in vocab:
        return (chars.ids == vocab.encode(SPACE)[0]) & chars.mask
    if any(SPACE in text for text in chars.texts):
        raise ModelError(
            "the texts contain spaces but the model's vocabulary has no space character; train the "
            "model on text with spaces, or remove the spaces (word discovery)"
        )
    return torch.zeros_like(chars.mask)


def space_at(space: torch.Tensor, rows: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """``space[rows, positions]`` (index tensors of one shape, or broadcasting), False for positions
    outside the texts' width (before the first character or past the last): whether a space is at
    each of them."""
    width = space.shape[1]
    inside = (positions >= 0) & (positions < width)
    return space[rows, positions.clamp(0, width - 1)] & inside


def flippable_mask(chars: CharBatch, space: torch.Tensor) -> torch.Tensor:
    """[B, L] bool, True at word-internal decisions: character i and i + 1 exist and are not spaces."""
    word_char = chars.mask & ~space
    out = torch.zeros_like(word_char)
    out[:, :-1] = word_char[:, :-1] & word_char[:, 1:]
    return out


def segment_bounds(batch: SegmentedBatch) -> tuple[torch.Tensor, torch.Tensor]:
    """For every character, the first and the last index of its segment: two [B, L] long tensors
    (meaningless at spaces and padding)."""
    width = batch.chars.ids.shape[1]
    positions = torch.arange(width, device=batch.device).expand_as(batch.ends)
    start_marks = torch.where(batch.starts, positions, torch.full_like(positions, -1))
    first = torch.cummax(start_marks, dim=1).values.clamp(min=0)
    end_marks = torch.where(batch.ends, positions, torch.full_like(positions, width))
    last = torch.flip(torch.cummin(torch.flip(end_marks, [1]), dim=1).values, [1])
    return first, last.clamp(max=width - 1)


def _forced(chars: CharBatch, space: torch.Tensor, ends: torch.Tensor) -> torch.Tensor:
    """``ends`` with the forced boundaries: before every space and at the end of every text; never at
    a space or padding."""
    shifted_space = torch.zeros_like(space)
    shifted_space[:, :-1] = space[:, 1:]
    shifted_mask = torch.zeros_like(chars.mask)
    shifted_mask[:, :-1] = chars.mask[:, 1:]
    last = chars.mask & ~shifted_mask
    return (ends.bool() | shifted_space | last) & ~space & chars.mask


def _as_bool_matrix(decisions, rows: int) -> torch.Tensor:
    if isinstance(decisions, torch.Tensor):
        matrix = decisions.detach().cpu()
    elif isinstance(decisions, np.ndarray):
        matrix = torch.from_numpy(decisions)
    else:
        longest = max((len(d) for d in decisions), default=0)
        matrix = torch.zeros(len(decisions), longest, dtype=torch.bool)
        for row, values in enumerate(decisions):
            matrix[row, : len(values)] = torch.as_tensor(list(values), dtype=torch.bool)
    if matrix.dim() != 2 or matrix.shape[0] != rows:
        raise ModelError(
            f"decisions must be a [B, W] matrix for {rows} texts, got {tuple(matrix.shape)}"
        )
    return matrix.bool()
