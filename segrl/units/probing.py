"""Probing the unit vectors of a trained unit model against classic segmentations (the DCSA study).

Forward probing asks whether the vectors hold at least a target unit's information: a 2-layer MLP
shared across vectors (``dim -> hidden -> S + 2``: the ``S`` target units seen in training, *unknown*
and *empty*) classifies each kept vector of a sentence (frozen model). The sentence's target units
(e.g. its BPE pieces) are padded with *empty*, the vectors with zero vectors (closed slots), to the
same number ``n``; the Hungarian algorithm matches vectors to targets minimising the summed
cross-entropy, and the probe is trained on the matched pairs (the same matching at test time).
Scored with *empty* as the negative class, per matched pair ``(target y, prediction p)``:

- true positive: ``y`` non-empty, known, and ``p == y``;
- false positive: ``p`` non-empty and ``p != y``;
- false negative: ``y`` non-empty and not a true positive (unknown targets always are).

Reverse probing asks whether the vectors hold no more than the unit: from the unit (a learned
128-dim embedding, then two ReLU layers) it predicts a diagonal Gaussian over the vector matched to
it, loss ``sum_h (m_h - mu_h)^2 / (2 sigma_h^2) + log sigma_h`` (lower is better; can be negative).
It uses the forward probe's final matching, pairs of a kept vector and a non-empty target only, and
reports the best mean test loss over its epochs.
"""

from __future__ import annotations

import random
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F
from scipy.optimize import linear_sum_assignment
from torch import nn
from tqdm import tqdm

from segrl.data.vocab import CharVocab
from segrl.errors import ConfigError
from segrl.metrics import prf_from_counts
from segrl.units.base import UnitModel
from segrl.units.evaluation import encode_texts

EMPTY = 0
"""Label of the *empty* unit (a vector that holds no target unit)."""
UNKNOWN = 1
"""Label of target units not seen in the probe's training sentences."""


ProbeTarget = Literal["bpe", "morfessor"]
"""The segmenters a probe may target, in the order of ``TARGETS``."""


@dataclass
class ProbeConfig:
    """How the probes are trained (defaults: a CPU-sized run)."""

    targets: list[ProbeTarget] = field(default_factory=lambda: ["bpe", "morfessor"])
    """bpe (SentencePiece BPE) and/or morfessor (Morfessor Baseline), trained on the training split."""
    bpe_vocab_size: int = 5000
    """Vocabulary of the BPE target."""
    train_sentences: int | None = 1000
    """Probe-training sentences (the first of the training split); None: all."""
    test_sentences: int | None = 500
    """Probe-test sentences (the first of the test split); None: all."""
    hidden: int = 128
    epochs: int = 20
    """Epochs of the forward probe."""
    batch_size: int = 16
    lr: float = 1e-3
    reverse_epochs: int = 20
    """Epochs of the reverse probe."""
    reverse_lr: float = 1e-3
    untrained: bool = True
    """Also probe an untrained model of each config (the control for the probe's own capacity)."""
    seed: int = 0

    def check(self, prefix: str) -> None:
        if not self.targets:
            names = ", ".join(typing.get_args(ProbeTarget))
            raise ConfigError(f"{prefix}targets must name at least one of: {names}")
        if min(self.epochs, self.reverse_epochs, self.batch_size, self.hidden) < 1:
            raise ConfigError("probe epochs, reverse_epochs, batch_size and hidden must be >= 1")
        if min(self.lr, self.reverse_lr) <= 0:
            raise ConfigError("probe lr and reverse_lr must be positive")


def _bpe(config: ProbeConfig):
    from segrl.baselines.sentencepiece import SentencePieceBPE

    return SentencePieceBPE(vocab_size=config.bpe_vocab_size)


def _morfessor(config: ProbeConfig):
    from segrl.baselines.morfessor import MorfessorSegmenter

    return MorfessorSegmenter(seed=config.seed)


TARGETS: dict[str, Callable] = {"bpe": _bpe, "morfessor": _morfessor}
"""Target segmenters by name: ``config -> untrained segrl.baselines Segmenter``."""


def target_units(segmenter, texts: Sequence[str]) -> list[list[str]]:
    """Each text's units under a trained segmenter, in order (words segmented one by one)."""
    return [[unit for word in segmenter.segment_sentence(t) for unit in word] for t in texts]


def unit_vectors(
    model: UnitModel, vocab: CharVocab, texts: Sequence[str], batch_size: int = 128
) -> list[torch.Tensor]:
    """Each text's kept unit vectors ``[n_i, D]`` (eval mode; the vectors the decoder may read)."""
    out: list[torch.Tensor] = [torch.empty(0)] * len(texts)
    for indices, encoding in encode_texts(model, vocab, list(texts), batch_size):
        memory = encoding.memory.float().cpu()  # [B, K, D]
        kept = encoding.memory_mask.cpu()  # [B, K]
        for row, index in enumerate(indices):
            out[index] = memory[row][kept[row]]
    return out


class LabelVocab:
    """Target units as labels: ``EMPTY``, ``UNKNOWN``, then the units of the training targets."""

    def __init__(self, units: Sequence[Sequence[str]]):
        self.units = sorted({u for sentence in units for u in sentence})
        self.index = {u: i + 2 for i, u in enumerate(self.units)}

    def __len__(self) -> int:
        return len(self.units) + 2

    def encode(self, units: Sequence[str]) -> list[int]:
        return [self.index.get(u, UNKNOWN) for u in units]


def pad_example(vectors: torch.Tensor, labels: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Vectors ``[n, D]`` (zero vectors added) and labels ``[n]`` (``EMPTY`` added), ``n`` the larger
    of the two counts."""
    n = max(len(vectors), len(labels), 1)
    padded = torch.zeros(n, vectors.shape[-1])
    padded[: len(vectors)] = vectors
    targets = torch.full((n,), EMPTY, dtype=torch.long)
    targets[: len(labels)] = torch.as_tensor(list(labels), dtype=torch.long)
    return padded, targets


def hungarian_match(log_probs: torch.Tensor, labels: torch.Tensor) -> np.ndarray:
    """``match[j]``: the vector (row of ``log_probs [n, C]``) assigned to target ``labels[j]``, the
    one-to-one assignment of least total cross-entropy."""
    cost = -log_probs.detach()[:, labels].cpu().numpy()  # [n vectors, n targets]
    rows, cols = linear_sum_assignment(cost)
    match = np.empty(len(labels), dtype=np.int64)
    match[cols] = rows
    return match


def count_outcomes(predictions: torch.Tensor, labels: torch.Tensor) -> tuple[int, int, int]:
    """(TP, FP, FN) of matched ``predictions`` against ``labels`` (see the module docstring)."""
    target = labels != EMPTY
    predicted = predictions != EMPTY
    hit = target & (labels != UNKNOWN) & (predictions == labels)
    tp = int(hit.sum())
    fp = int((predicted & (predictions != labels)).sum())
    fn = int((target & ~hit).sum())
    return tp, fp, fn


def prf(tp: int, fp: int, fn: int) -> dict[str, float]:
    """Probe P/R/F1 from counts, by ``segrl.metrics.prf_from_counts`` as every segmenter's."""
    scores = prf_from_counts(tp, tp + fp, tp + fn)
    return {"precision": scores.precision, "recall": scores.recall, "f1": scores.f1}


class ForwardProbe(nn.Module):
    """Shared 2-layer MLP: ``[..., dim] -> [..., classes]`` logits."""

    def __init__(self, dim: int, hidden: int, classes: int):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, classes))

    def forward(self, vectors: torch.Tensor) -> torch.Tensor:
        return self.net(vectors)


class ReverseProbe(nn.Module):
    """Unit label -> diagonal Gaussian over a vector: ``labels [P]`` -> ``(mu, log_sigma) [P, dim]``."""

    def __init__(self, classes: int, dim: int, hidden: int):
        super().__init__()
        self.embed = nn.Embedding(classes, hidden)
        self.net = nn.Sequential(
            nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU()
        )
        self.head = nn.Linear(hidden, 2 * dim)

    def forward(self, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mu, log_sigma = self.head(self.net(self.embed(labels))).chunk(2, dim=-1)
        return mu, log_sigma.clamp(-10.0, 10.0)


def gaussian_nll(vectors: torch.Tensor, mu: torch.Tensor, log_sigma: torch.Tensor) -> torch.Tensor:
    """Negative log-density (constant dropped) per row: ``sum_h (m - mu)^2 / (2 s^2) + log s``."""
    return (0.5 * ((vectors - mu) / log_sigma.exp()) ** 2 + log_sigma).sum(-1)


def _forward_pass(
    probe: ForwardProbe, examples: Sequence[tuple[torch.Tensor, torch.Tensor]]
) -> tuple[torch.Tensor, list[np.ndarray], list[torch.Tensor]]:
    """Logits of each example's vectors, each example's matching, and the matched log-probabilities."""
    sizes = [len(v) for v, _ in examples]
    logits = probe(torch.cat([v for v, _ in examples]))  # [sum n, C]
    log_probs = F.log_softmax(logits, dim=-1)
    matches, chosen = [], []
    for (_, labels), lp in zip(examples, log_probs.split(sizes), strict=True):
        match = hungarian_match(lp, labels)
        matches.append(match)
        chosen.append(lp[torch.as_tensor(match), labels])  # [n]
    return logits, matches, chosen


def forward_probe(
    train: Sequence[tuple[torch.Tensor, torch.Tensor]],
    test: Sequence[tuple[torch.Tensor, torch.Tensor]],
    classes: int,
    config: ProbeConfig,
    desc: str = "probe",
) -> tuple[ForwardProbe, dict[str, float]]:
    """Train a forward probe on padded ``(vectors, labels)`` examples; P/R/F1 on ``test``."""
    torch.manual_seed(config.seed)
    probe = ForwardProbe(train[0][0].shape[-1], config.hidden, classes)
    optimizer = torch.optim.Adam(probe.parameters(), lr=config.lr)
    rng = random.Random(config.seed)
    order = list(range(len(train)))
    # disable=None: no bar where stderr is not a terminal
    for _ in tqdm(range(config.epochs), desc=desc, mininterval=2.0, disable=None):
        rng.shuffle(order)
        for start in range(0, len(order), config.batch_size):
            batch = [train[i] for i in order[start : start + config.batch_size]]
            _, _, chosen = _forward_pass(probe, batch)
            loss = -torch.cat(chosen).sum() / len(batch)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
    return probe, score_forward_probe(probe, test)


def score_forward_probe(
    probe: ForwardProbe, examples: Sequence[tuple[torch.Tensor, torch.Tensor]]
) -> dict[str, float]:
    tp = fp = fn = 0
    with torch.no_grad():
        for start in range(0, len(examples), 256):
            batch = examples[start : start + 256]
            logits, matches, _ = _forward_pass(probe, batch)
            sizes = [len(v) for v, _ in batch]
            for (_, labels), lg, match in zip(batch, logits.split(sizes), matches, strict=True):
                counts = count_outcomes(lg[torch.as_tensor(match)].argmax(-1), labels)
                tp, fp, fn = tp + counts[0], fp + counts[1], fn + counts[2]
    return prf(tp, fp, fn)


def aligned_pairs(
    probe: ForwardProbe,
    examples: Sequence[tuple[torch.Tensor, torch.Tensor]],
    kept: Sequence[int],
) -> tuple[torch.Tensor, torch.Tensor]:
    """(vectors ``[P, D]``, labels ``[P]``): the forward probe's matched pairs of a kept vector (the
    first ``kept[i]`` of example ``i``) and a non-empty target."""
    vectors, labels = [], []
    with torch.no_grad():
        for start in range(0, len(examples), 256):
            batch = examples[start : start + 256]
            _, matches, _ = _forward_pass(probe, batch)
            for (v, y), match, n_kept in zip(
                batch, matches, kept[start : start + 256], strict=True
            ):
                use = (y != EMPTY) & (torch.as_tensor(match) < n_kept)
                vectors.append(v[torch.as_tensor(match)][use])
                labels.append(y[use])
    return torch.cat(vectors), torch.cat(labels)


def reverse_probe(
    train: tuple[torch.Tensor, torch.Tensor],
    test: tuple[torch.Tensor, torch.Tensor],
    classes: int,
    config: ProbeConfig,
) -> float:
    """Train a reverse probe on aligned (vectors, labels); its best mean test negative log-density."""
    torch.manual_seed(config.seed)
    vectors, labels = train
    probe = ReverseProbe(classes, vectors.shape[-1], config.hidden)
    optimizer = torch.optim.Adam(probe.parameters(), lr=config.reverse_lr)
    generator = torch.Generator().manual_seed(config.seed)
    batch = 64 * config.batch_size
    best = float("inf")
    for _ in range(config.reverse_epochs):
        order = torch.randperm(len(labels), generator=generator)
        for start in range(0, len(order), batch):
            index = order[start : start + batch]
            mu, log_sigma = probe(labels[index])
            loss = gaussian_nll(vectors[index], mu, log_sigma).mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            mu, log_sigma = probe(test[1])
            best = min(best, float(gaussian_nll(test[0], mu, log_sigma).mean()))
    return best


def probe_model(
    model: UnitModel,
    vocab: CharVocab,
    targets: dict[str, tuple[list[list[str]], list[list[str]]]],
    train_texts: Sequence[str],
    test_texts: Sequence[str],
    config: ProbeConfig,
    name: str = "model",
) -> list[dict[str, float | str]]:
    """Forward and reverse probing of ``model``'s kept vectors, one row per target:
    ``targets[name] = (units of train_texts, units of test_texts)``."""
    train_vectors = unit_vectors(model, vocab, train_texts)
    test_vectors = unit_vectors(model, vocab, test_texts)
    rows = []
    for target, (train_units, test_units) in targets.items():
        labels = LabelVocab(train_units)
        pairs = zip(train_vectors, train_units, strict=True)
        train = [pad_example(v, labels.encode(u)) for v, u in pairs]
        test = [
            pad_example(v, labels.encode(u)) for v, u in zip(test_vectors, test_units, strict=True)
        ]
        probe, scores = forward_probe(train, test, len(labels), config, f"{name} {target}")
        reverse = reverse_probe(
            aligned_pairs(probe, train, [len(v) for v in train_vectors]),
            aligned_pairs(probe, test, [len(v) for v in test_vectors]),
            len(labels),
            config,
        )
        rows.append(
            {
                "model": name,
                "target": target,
                **scores,
                "reverse": reverse,
                "units_per_sentence": float(np.mean([len(v) for v in test_vectors])),
                "targets_per_sentence": float(np.mean([len(u) for u in test_units])),
            }
        )
    return rows
