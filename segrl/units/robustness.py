"""Robustness of a unit model: how well it rebuilds clean text from perturbed input.

For each perturbation kind (swap, delete, insert, substitute; ``segrl.units.noise.perturb``) and rate,
the model reconstructs held-out sentences from their perturbed form; the teacher-forced
reconstruction cross-entropy and next-character accuracy of the clean text are recorded. The NVIB
paper plots the relative change against clean input, one line per model (``plots.robustness_figure``).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from segrl.data.vocab import CharVocab
from segrl.tracking.runs import log_figure, log_metrics, log_table
from segrl.units.base import RECONSTRUCTION, UnitModel
from segrl.units.config import UnitsConfig
from segrl.units.evaluation import ACCURACY, reconstruction_metrics
from segrl.units.noise import noise_alphabet, perturb
from segrl.units.plots import robustness_figure


def robustness_curves(
    model: UnitModel, vocab: CharVocab, sentences: Sequence[str], config: UnitsConfig
) -> list[dict[str, float | str]]:
    """Rows ``{kind, rate, reconstruction, accuracy}`` for every kind and rate of ``config.eval``, on
    the first ``config.eval.robustness_sentences`` of ``sentences``. Perturbed texts longer than the
    model's ``max_len`` are cut to it."""
    e = config.eval
    sentences = [s for s in sentences[: e.robustness_sentences] if s]
    alphabet = noise_alphabet(vocab.symbols)
    max_len = getattr(config.arch, "max_len", None)
    rows: list[dict[str, float | str]] = []
    for kind in e.robustness_kinds:
        for rate in e.robustness_rates:
            rng = random.Random(f"robustness:{kind}:{rate}:{config.train.seed}")
            noisy = [perturb(s, kind, rate, rng, alphabet)[:max_len] for s in sentences]
            losses, _ = reconstruction_metrics(
                model, vocab, sentences, noisy, e.batch_size, config.train.precision
            )
            rows.append(
                {
                    "kind": kind,
                    "rate": float(rate),
                    RECONSTRUCTION: losses[RECONSTRUCTION],
                    ACCURACY: losses[ACCURACY],
                }
            )
    return rows


def log_robustness(results: Mapping[str, Sequence[Mapping[str, float | str]]]) -> None:
    """Log robustness rows of one or more models to the active MLflow run: a table, the relative
    change of accuracy and of cross-entropy as figures, and per-kind metrics whose step is the rate
    in percent (so MLflow draws them as curves)."""
    table = [{"model": model, **row} for model, rows in results.items() for row in rows]
    log_table(table, "robustness/robustness.json")
    for metric in (ACCURACY, RECONSTRUCTION):
        log_figure(robustness_figure(results, metric), f"robustness/{metric}.png")
    if len(results) == 1:
        [rows] = results.values()
        for row in rows:
            step = round(float(row["rate"]) * 100)
            log_metrics(
                {
                    f"robustness/{row['kind']}/{m}": float(row[m])
                    for m in (ACCURACY, RECONSTRUCTION)
                },
                step=step,
            )
