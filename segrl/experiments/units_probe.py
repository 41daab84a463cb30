"""``segrl units probe``: forward and reverse probing of saved unit models, logged to MLflow.

The target segmenters (``segrl.units.probing.TARGETS``) are trained on the training split of the
first model's corpus; every model is probed on the same sentences (the first
``train_sentences`` of the training split, the first ``test_sentences`` of the test split), and,
with ``untrained``, so is a randomly initialised model of each config (the control). One MLflow run
(``probe``) holds the table (``probing.json``) and one metric per cell,
``probe/<model>/<target>/<precision|recall|f1|reverse>``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from segrl.config import DataConfig, validate_config
from segrl.data import load_corpus
from segrl.errors import ConfigError
from segrl.runtime import seed_everything
from segrl.tables import format_table
from segrl.tracking.runs import log_metrics, log_table, log_text, start_run
from segrl.tracking.store import ensure_reachable
from segrl.units.probing import TARGETS, ProbeConfig, probe_model, target_units
from segrl.units.saving import build_model, load_unit_model

METRICS = ("precision", "recall", "f1", "reverse")
COLUMNS = ("model", "target", *METRICS, "units_per_sentence", "targets_per_sentence")


def run_probes(
    folders: Sequence[str | Path],
    config: ProbeConfig,
    experiment: str = "segrl",
    threads: int | None = None,
) -> list[dict[str, Any]]:
    """Probe each saved model folder (and its untrained control); returns the table's rows."""
    validate_config(config)
    if not folders:
        raise ConfigError("give at least one model folder written by `segrl units train`")
    if threads:
        torch.set_num_threads(threads)
    loaded = [(Path(f), *load_unit_model(f)) for f in folders]
    data: DataConfig = loaded[0][3].data
    for folder, _, _, model_config in loaded[1:]:
        if model_config.data != data:
            raise ConfigError(
                f"{folder} was trained on other data than {loaded[0][0]}; probe models of one "
                "corpus together"
            )
    ensure_reachable()
    corpus = load_corpus(data)
    train_texts = corpus.train[: config.train_sentences]
    test_texts = corpus.test[: config.test_sentences]
    targets = {}
    for name in config.targets:
        segmenter = TARGETS[name](config).train(corpus)
        targets[name] = (target_units(segmenter, train_texts), target_units(segmenter, test_texts))
    rows: list[dict[str, Any]] = []
    run_config = {**asdict(config), "folders": ", ".join(str(f) for f, *_ in loaded)}
    with start_run(run_config, experiment, "probe"):
        for _, model, vocab, model_config in loaded:
            name = model_config.tracking.run_name or model_config.model
            models = [(name, model)]
            if config.untrained:
                seed_everything(config.seed)
                models.append((f"{name} untrained", build_model(model_config, len(vocab)).eval()))
            for label, probed in models:
                for row in probe_model(
                    probed, vocab, targets, train_texts, test_texts, config, label
                ):
                    rows.append(row)
                    log_metrics({f"probe/{label}/{row['target']}/{m}": row[m] for m in METRICS})
        log_table(rows, "probing.json")
        log_text(format_probe_table(rows), "probing.txt")
    return rows


def format_probe_table(rows: Sequence[dict[str, Any]]) -> str:
    return format_table(
        [{k: (f"{v:.3f}" if isinstance(v, float) else v) for k, v in r.items()} for r in rows],
        COLUMNS,
    )
