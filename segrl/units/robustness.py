"""Robustness of a unit model: how well it rebuilds clean text from perturbed input.

For each perturbation kind (swap, delete, insert, substitute; ``segrl.units.noise.perturb``) and rate,
the model reconstructs held-out sentences from their perturbed form; the teacher-forced
reconstruction cross-entropy and next-character accuracy of the clean text are recorded. The NVIB
paper plots the relative change against clean input, one line per model (``plots.robustness_figure``;
the curves go to MLflow by ``segrl.experiments.units_eval.log_robustness``).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from segrl.data.vocab import CharVocab
from segrl.units.base import RECONSTRUCTION, UnitModel
from segrl.units.config import UnitsConfig
from segrl.units.evaluation import ACCURACY, reconstruction_metrics
from segrl.units.noise import noise_alphabet, perturb


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
            rng = random.Random(f"robustness:{kind}:{rate}:{config.seed}")
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
