"""How a trained segmenter policy is measured: greedy decisions on held-out text, against a reference
evaluator's decisions (Morfessor, gold) and against the gold set with the metrics every segmenter uses.

- Agreement with a reference (``reference_agreement``): boundary precision/recall/F1 micro-averaged
  over the agent's free positions where the reference is known (with known spaces: word-internal
  positions, as ``segrl.metrics.boundary_prf`` counts them per word), plus the study's counts per
  sentence: wrong decisions and missed splits (its "wrong splits").
- Against the gold set: ``segrl.metrics.evaluate_sentence_segmenter``: each gold word is segmented
  as a one-word text; units per character and segment/word-boundary F1 on held-out sentences.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from segrl.agents.segmenter import EVAL_BATCH, AgentSegmenter
from segrl.data import GoldWord
from segrl.evaluators import Evaluator, ReferenceEvaluator, SegmentationBatch
from segrl.metrics import (
    despace,
    evaluate_sentence_segmenter,
    prf_from_counts,
    word_discovery_metrics,
)
from segrl.segmentation import render

N_SAMPLES = 20


def decide_in_batches(
    segmenter: AgentSegmenter, sentences: Sequence[str]
) -> list[SegmentationBatch]:
    """Greedy decisions for ``sentences``, in batches of ``EVAL_BATCH`` (in order)."""
    return [
        segmenter.decide_sentences(list(sentences[start : start + EVAL_BATCH]))
        for start in range(0, len(sentences), EVAL_BATCH)
    ]


def reference_agreement(
    batches: Sequence[SegmentationBatch], reference: ReferenceEvaluator, prefix: str
) -> dict[str, float]:
    """Agreement of decided batches with ``reference``'s decisions, as ``{prefix}_...`` metrics."""
    hits = predicted = wanted = wrong = missed = decisions = sentences = 0
    for batch in batches:
        splits, known = reference.reference(batch)
        scored = batch.free_mask & known
        agent = batch.splits & scored
        wanted_here = splits & scored
        hits += int((agent & wanted_here).sum())
        predicted += int(agent.sum())
        wanted += int(wanted_here.sum())
        wrong += int((agent != wanted_here).sum())
        missed += int((wanted_here & ~agent).sum())
        decisions += int(scored.sum())
        sentences += len(batch)
    prf = prf_from_counts(hits, predicted, wanted)
    per_sentence = max(sentences, 1)
    return {
        f"{prefix}_boundary_precision": prf.precision,
        f"{prefix}_boundary_recall": prf.recall,
        f"{prefix}_boundary_f1": prf.f1,
        f"{prefix}_decision_accuracy": 1.0 - wrong / max(decisions, 1),
        f"{prefix}_wrong_decisions": wrong / per_sentence,
        f"{prefix}_missed_splits": missed / per_sentence,
    }


def samples_beside_references(
    batches: Sequence[SegmentationBatch],
    references: Mapping[str, ReferenceEvaluator],
    n: int = N_SAMPLES,
) -> str:
    """The first ``n`` texts as the agent segments them, each followed by the references' segmentations
    (segments joined by ``-``, words by spaces)."""
    lines: list[str] = []
    for batch in batches:
        reference_batches = {
            name: batch.with_decisions(ref.reference(batch)[0].astype(np.int64))
            for name, ref in references.items()
        }
        for row in range(len(batch)):
            if len(lines) >= n * (1 + len(references)):
                return "\n".join(lines) + "\n"
            lines.append(f"agent     {_render(batch, row)}")
            for name, ref_batch in reference_batches.items():
                lines.append(f"{name:<9} {_render(ref_batch, row)}")
    return "\n".join(lines) + "\n"


def _render(batch: SegmentationBatch, row: int) -> str:
    segments = batch.segments(row)
    if batch.hide_spaces:
        return "-".join(segments)
    words: list[list[str]] = [[]]
    for segment in segments:
        if segment.isspace():
            words.append([])
        else:
            words[-1].append(segment)
    return render([w for w in words if w])


def evaluate_agent(
    segmenter: AgentSegmenter,
    heldout: Sequence[str],
    references: Mapping[str, ReferenceEvaluator],
    gold: Sequence[GoldWord] | None = None,
    text: Sequence[str] | None = None,
    evaluator: Evaluator | None = None,
    utterances: Sequence[str] | None = None,
) -> tuple[dict[str, float], str]:
    """Metrics and sample segmentations of ``segmenter``.

    ``heldout``: the texts on which agreement with each of ``references`` is measured (``{name}_...``
    metrics); ``gold``: gold words for the standard metrics of ``segrl.metrics`` (boundary P/R/F1,
    units per character on ``text``, default ``heldout``); ``evaluator``: its own metrics on the
    agent's ``heldout`` segmentations (``Evaluator.heldout_metrics``, e.g. LM bits per character);
    ``utterances``: texts whose spaces are the gold, for word discovery's metrics
    (``segrl.metrics.word_discovery_metrics``) of the agent's segmentations with spaces hidden.
    """
    batches = decide_in_batches(segmenter, heldout)
    metrics: dict[str, float] = {}
    if evaluator is not None:
        metrics.update(evaluator.heldout_metrics(batches))
    for name, reference in references.items():
        metrics.update(reference_agreement(batches, reference, name))
    if gold:
        metrics.update(
            evaluate_sentence_segmenter(
                segmenter.segment_sentences, gold, list(text if text is not None else heldout)
            )
        )
    if utterances:
        found = segmenter.segment_sentences(list(utterances))
        metrics.update(word_discovery_metrics([despace(s) for s in found], utterances))
    return metrics, samples_beside_references(batches, references)
