"""Evaluating a unit model: reconstruction, kept vectors, and the segments read off its attention.

Segments are scored by ``segrl.metrics.evaluate_sentence_segmenter``, like every sentence segmenter:
boundary P/R/F1 on the gold words (each encoded alone), segment-matching P/R/F1 against the words of
held-out sentences, units per character and word-boundary F1. The model sees clean text here; the
reconstruction is measured on both noised (as in training) and clean input.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

from segrl.data.vocab import CharVocab
from segrl.metrics import evaluate_sentence_segmenter
from segrl.runtime import autocast, eval_mode
from segrl.units.base import RECONSTRUCTION, Encoding, UnitModel, make_autoencoder_batch
from segrl.units.noise import delete_characters
from segrl.units.segments import segments_from_attention

ACCURACY = "accuracy"
"""Teacher-forced next-character accuracy of the reconstruction."""
RECONSTRUCTION_CLEAN = "reconstruction_clean"
KEPT_PER_CHAR = "kept_per_char"
"""Vectors (units) the decoder may read, per input character."""


def _length_batches(texts: Sequence[str], batch_size: int) -> Iterator[list[int]]:
    """Indices of ``texts`` in batches of similar length (less padding), longest first."""
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    for start in range(0, len(order), batch_size):
        yield order[start : start + batch_size]


def encode_texts(
    model: UnitModel,
    vocab: CharVocab,
    texts: Sequence[str],
    batch_size: int = 128,
    precision: str = "fp32",
) -> Iterator[tuple[list[int], Encoding]]:
    """Encode non-empty ``texts`` in eval mode: yields (indices into ``texts``, their encoding)."""
    device = model.device
    with eval_mode(model):
        for indices in _length_batches(texts, batch_size):
            chunk = [texts[i] for i in indices]
            ids = make_autoencoder_batch(vocab, chunk, device=device)
            with autocast(device, precision):
                encoding = model.encode(ids.source, ids.source_mask)
            yield indices, encoding


def segment_texts(
    model: UnitModel,
    vocab: CharVocab,
    texts: Sequence[str],
    batch_size: int = 128,
    precision: str = "fp32",
) -> list[list[str]]:
    """Segments of each text read off the model's attention map (empty texts get no segments)."""
    out: list[list[str]] = [[] for _ in texts]
    present = [i for i, t in enumerate(texts) if t]
    chosen = [texts[i] for i in present]
    for indices, encoding in encode_texts(model, vocab, chosen, batch_size, precision):
        attention = encoding.attention.float().cpu()  # [B, L, S]
        for row, index in enumerate(indices):
            out[present[index]] = segments_from_attention(attention[row], chosen[index])
    return out


def reconstruction_metrics(
    model: UnitModel,
    vocab: CharVocab,
    texts: Sequence[str],
    noisy_texts: Sequence[str] | None = None,
    batch_size: int = 128,
    precision: str = "fp32",
) -> tuple[dict[str, float], dict[str, float]]:
    """How well ``texts`` are rebuilt from ``noisy_texts`` (``texts`` themselves when None).

    Returns ``(losses, diagnostics)``: the loss terms (reconstruction in nats per character, the
    penalties at full weight) and next-character ``accuracy``; the model's diagnostics and kept
    vectors per character. All are averages over the texts.
    """
    noisy = list(texts if noisy_texts is None else noisy_texts)
    device = model.device
    sums: dict[str, float] = {}
    weights: dict[str, float] = {}
    diagnostics: set[str] = set()

    def add(name: str, value: float, weight: float) -> None:
        sums[name] = sums.get(name, 0.0) + value * weight
        weights[name] = weights.get(name, 0.0) + weight

    with eval_mode(model):
        for indices in _length_batches(noisy, batch_size):
            batch = make_autoencoder_batch(
                vocab, [texts[i] for i in indices], [noisy[i] for i in indices], device
            )
            with autocast(device, precision):
                out = model.loss(batch, progress=1.0)
            n_targets = float(batch.target_mask.sum())
            correct = (out.logits.argmax(-1) == batch.target) & batch.target_mask
            add(ACCURACY, float(correct.sum()) / n_targets, n_targets)
            for name, value in out.terms.items():
                add(name, float(value), n_targets if name == RECONSTRUCTION else len(batch))
            for name, value in out.stats.items():
                add(name, float(value), len(batch))
                diagnostics.add(name)
            if out.encoding.kept is not None:
                n_chars = float(batch.source_mask.sum())
                add(KEPT_PER_CHAR, float(out.encoding.kept.sum()) / n_chars, n_chars)
                diagnostics.add(KEPT_PER_CHAR)
    means = {name: sums[name] / weights[name] for name in sums}
    losses = {k: v for k, v in means.items() if k not in diagnostics}
    return losses, {k: v for k, v in means.items() if k in diagnostics}


def evaluate_unit_model(
    model: UnitModel,
    vocab: CharVocab,
    sentences: Sequence[str],
    gold: Sequence,
    batch_size: int = 128,
    precision: str = "fp32",
    deletion_prob: float = 0.1,
    seed: int = 0,
) -> dict[str, float]:
    """Every metric of a unit model on held-out ``sentences`` and the ``gold`` words.

    Loss terms and accuracy on noised input (deletion at ``deletion_prob``, a fixed seed), as in
    training; ``reconstruction_clean``, the diagnostics (e.g. kept fractions) and ``kept_per_char`` on
    clean input; then the standard segmentation metrics of ``segrl.metrics``.
    """
    sentences = [s for s in sentences if s]
    rng = random.Random(f"eval:{seed}")
    noisy = [delete_characters(s, deletion_prob, rng) for s in sentences]
    metrics, _ = reconstruction_metrics(model, vocab, sentences, noisy, batch_size, precision)
    clean_losses, clean_diagnostics = reconstruction_metrics(
        model, vocab, sentences, None, batch_size, precision
    )
    metrics[RECONSTRUCTION_CLEAN] = clean_losses[RECONSTRUCTION]
    metrics.update(clean_diagnostics)

    def segment_sentences(texts: list[str]) -> list[list[str]]:
        return segment_texts(model, vocab, texts, batch_size, precision)

    metrics.update(evaluate_sentence_segmenter(segment_sentences, gold, sentences))
    return metrics


def unit_samples(
    model: UnitModel,
    vocab: CharVocab,
    sentences: Sequence[str],
    batch_size: int = 128,
    precision: str = "fp32",
) -> str:
    """Each sentence's segments joined by ``|``, one sentence a line."""
    segmented = segment_texts(model, vocab, list(sentences), batch_size, precision)
    return "\n".join("|".join(segments) for segments in segmented) + "\n"
