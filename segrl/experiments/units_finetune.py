"""Fine-tuning a trained unit model: ``segrl units finetune --from MODEL --model NAME``.

The run's config is, from lowest to highest: the defaults of ``NAME``; the trained model's own options
(its corpus, gold set, training options, and every ``arch`` option the new model also has, so the
shapes agree); no learning-rate warm-up (the model is trained already); ``NAME``'s
``finetune_options`` (for NVIB, the fine-tuning paper's modifications, and no more NVIB layers than
the trained encoder has); a quarter of the trained model's steps; then a config file and
command-line flags. Fine-tuning into the same model (``--model transformer`` from a Transformer) is
the control: the same further training without NVIB. ``init_from`` names the trained model (its
folder, an MLflow model folder or URI: ``segrl.experiments.units_train.trained_model_folder``), so
the training loop (``segrl.experiments.units_train``) starts from its weights through the new
model's ``init_from_pretrained``, and a re-run resumes from the run's own checkpoint.

    config = finetune_config("runs/units/transformer-cpu", "nvib")
    train_unit_model(config)
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from segrl.config import current_key, flatten_config, read_config_keys
from segrl.experiments.units_train import trained_model_folder
from segrl.units.config import UnitsConfig, build_units_config, units_config_class
from segrl.units.registry import model_class
from segrl.units.saving import model_config_file

BUDGET_FRACTION = 0.25
"""Fine-tuning steps as a fraction of the trained model's, unless given."""
NOT_INHERITED = ("model", "out", "init_from", "tracking.run_name")


def finetune_config(
    source: str | Path,
    model: str,
    path: str | Path | None = None,
    overrides: dict[str, Any] | None = None,
    overrides_from: str = "overrides",
) -> UnitsConfig:
    """The config of fine-tuning the trained model in ``source`` into a ``model`` (see the module
    docstring); ``path`` and ``overrides`` as in ``build_units_config``."""
    with trained_model_folder(source) as folder:
        trained = build_units_config(path=model_config_file(folder))  # its options as asked
    cls = model_class(model)
    arch_fields = {f.name for f in dataclasses.fields(cls.config_class)}
    inherited = {
        key: value
        for key, value in flatten_config(trained).items()
        if key not in NOT_INHERITED
        and (not key.startswith("arch.") or key.split(".", 1)[1] in arch_fields)
    }
    name = f"{trained.tracking.run_name or trained.model}-{model}-finetune"
    inherited.update(
        {
            "train.warmup_steps": 0,
            **cls.finetune_options(trained),
            "train.steps": max(1, round(trained.train.steps * BUDGET_FRACTION)),
            "init_from": str(source),
            "tracking.run_name": name,
        }
    )
    given = set()  # the options the file sets, under their current names
    if path is not None:
        given = {current_key(units_config_class(model), k) for k in read_config_keys(path)}
    values = {k: v for k, v in inherited.items() if k not in given}
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    return build_units_config(model, path, values, overrides_from)
