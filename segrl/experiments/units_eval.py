"""Evaluating trained unit models into MLflow: after training, and ``segrl units eval`` on saved
model folders (several at once compare their robustness in one figure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from segrl.config import build_config, flatten_config, validate_config
from segrl.data import Corpus, GoldWord, load_corpus, load_gold
from segrl.data.vocab import CharVocab
from segrl.errors import ConfigError
from segrl.runtime import resolve_device
from segrl.tracking.runs import (
    log_figure,
    log_metrics,
    log_segmenter,
    log_table,
    set_tags,
    start_run,
)
from segrl.tracking.tags import KIND_TAG
from segrl.units.base import RECONSTRUCTION, UnitModel
from segrl.units.config import UnitsConfig
from segrl.units.evaluation import ACCURACY, evaluate_unit_model, unit_samples
from segrl.units.plots import attention_figure, attention_maps, robustness_figure
from segrl.units.robustness import robustness_curves
from segrl.units.saving import build_model, load_unit_model

UNITS_KIND = "units"
"""The ``segrl.kind`` of unit-model runs in ``segrl compare``."""


def final_evaluation(
    model: UnitModel,
    vocab: CharVocab,
    corpus: Corpus,
    gold: list[GoldWord],
    config: UnitsConfig,
    name: str | None = None,
) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """Test-set evaluation of a trained model inside the active MLflow run: the standard metrics (the
    run becomes segmenter ``name``, by default the run name or the model's name, of kind ``units``),
    sample segmentations, attention maps as images, and the robustness curves when
    ``config.eval.robustness``. Returns the metrics and the robustness rows."""
    e, precision = config.eval, config.train.precision
    name = name or config.tracking.run_name or config.model
    metrics = evaluate_unit_model(
        model, vocab, corpus.test, gold, e.batch_size, precision,
        config.train.deletion_prob, config.seed,
    )  # fmt: skip
    samples = unit_samples(model, vocab, corpus.test[: e.samples], e.batch_size, precision)
    log_segmenter(name, UNITS_KIND, metrics, samples)
    figure_texts = [*e.figure_sentences, *corpus.valid[: e.figure_valid_sentences]]
    for i, text in enumerate(figure_texts):
        maps = attention_maps(model, vocab, text, e.figure_layers, precision)
        figure = attention_figure(maps, text, f"{name}: {text}", model.unit_key_maps)
        log_figure(figure, f"attention/sentence_{i}.png")
    rows: list[dict[str, Any]] = []
    if e.robustness:
        rows = robustness_curves(model, vocab, corpus.test, config)
        log_robustness({name: rows})
    return metrics, rows


@dataclass
class SavedModelEvaluation:
    folder: Path
    name: str
    metrics: dict[str, float]
    robustness: list[dict[str, Any]]
    run_id: str | None


def evaluate_saved_models(
    folders: Sequence[str | Path],
    overrides: dict[str, Any] | None = None,
    experiment: str | None = None,
) -> list[SavedModelEvaluation]:
    """Evaluate each saved model folder in its own MLflow run (``eval-<name>``), on the test split of
    the corpus it was trained on unless ``overrides`` (dotted keys of its config: ``data.corpus``,
    ``gold.path``, ``device``, ``eval.robustness``, ...) say otherwise. With two or more
    models and robustness on, one more run (``robustness-comparison``) holds their curves together."""
    loaded = []
    for folder in folders:  # read every folder and input before anything is logged
        model, vocab, saved = load_unit_model(folder)
        config = _with_overrides(saved, overrides or {})
        if config.arch != saved.arch:
            model = _rebuilt(model, config, len(vocab), folder)
        if experiment:
            config.tracking.experiment = experiment
        corpus = load_corpus(config.data)
        gold = load_gold(config.gold.path, config.gold.max_words)
        model.to(resolve_device(config.device))
        loaded.append((Path(folder), model, vocab, config, corpus, gold))
    results = []
    for folder, model, vocab, config, corpus, gold in loaded:
        name = config.tracking.run_name or config.model
        tags = {KIND_TAG: UNITS_KIND}
        with start_run(config, config.tracking.experiment, name, tags) as run:
            set_tags({"segrl.model_folder": str(folder.resolve())})
            metrics, rows = final_evaluation(model, vocab, corpus, gold, config, name)
            results.append(SavedModelEvaluation(folder, name, metrics, rows, run.info.run_id))
    with_rows = [r for r in results if r.robustness]
    if len(with_rows) >= 2:
        experiment_name = loaded[0][3].tracking.experiment
        names = {r.name: r.folder for r in with_rows}
        with start_run(
            {"models": ", ".join(names), "folders": ", ".join(str(f) for f in names.values())},
            experiment_name,
            "robustness-comparison",
        ):
            log_robustness({r.name: r.robustness for r in with_rows})
    return results


def _rebuilt(model: UnitModel, config: UnitsConfig, vocab_size: int, folder) -> UnitModel:
    """``model``'s weights in a model built with ``config.arch`` (options that change no weight,
    e.g. the test-time attention's); a ``ConfigError`` if the weights do not fit it."""
    rebuilt = build_model(config, vocab_size)
    try:
        rebuilt.load_state_dict(model.state_dict())
    except RuntimeError:
        raise ConfigError(
            f"{folder}: the arch options given change the model's weights; at evaluation only "
            "options that leave the weights as they are (test-time ones) can be changed"
        ) from None
    return rebuilt.eval()


def _with_overrides(config: UnitsConfig, overrides: dict[str, Any]) -> UnitsConfig:
    """``config`` with dotted ``overrides`` applied (None values skipped), checked as a file's are."""
    values = {**flatten_config(config), **overrides}
    updated = build_config(type(config), None, values)
    validate_config(updated)
    return updated


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
