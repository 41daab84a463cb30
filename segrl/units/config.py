"""The config of a unit-model run: ``segrl units train`` and ``segrl units eval``.

A run's config is a ``UnitsConfig`` plus one table, ``arch``, whose type is the model's own
``config_class``. ``units_config_class("nvib")`` gives that dataclass; ``build_units_config`` reads a
TOML file and dotted overrides into it. A config file looks like::

    model = "nvib"
    device = "cuda"        # every job's run options (RunOptions): out, seed, device, threads, ...

    [arch]                 # the model's options (NVIBConfig here)
    dim = 512
    lambda_d = 1.0

    [train]
    steps = 8000
    batch_size = 512
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from segrl.config import (
    CadenceOptions,
    DataConfig,
    GoldConfig,
    RunOptions,
    TrackingConfig,
    build_config,
    read_toml,
    validate_config,
)
from segrl.errors import ConfigError
from segrl.units.noise import NOISE_KINDS, NoiseKind
from segrl.units.registry import model_class

Precision = Literal["fp32", "bf16", "fp16"]
Optimizer = Literal["radam", "adam", "adamw"]
Schedule = Literal["cosine", "constant"]


@dataclass
class UnitsTrainConfig:
    """How a unit model is trained (defaults: a CPU-sized run on the bundled corpus)."""

    steps: int = 3000
    """Updates in all (the schedule cools down over them)."""
    batch_size: int = 32
    """Sentences per update."""
    lr: float = 1e-3
    """Peak learning rate."""
    optimizer: Optimizer = "radam"
    """radam (the NVIB paper's), adam or adamw."""
    weight_decay: float = 0.0
    schedule: Schedule = "cosine"
    """cosine: cool down to 0 over all steps (after warm-up); constant."""
    warmup_steps: int = 0
    grad_clip: float = 0.1
    """Gradient-norm clipping (0 turns it off)."""
    deletion_prob: float = 0.1
    """Denoising: each input character is deleted with this probability, re-drawn every batch."""
    precision: Precision = "fp32"
    """fp32, bf16 or fp16 (autocast; fp16 with a gradient scaler)."""
    tf32: bool = True
    """On a GPU, fp32 matrix products in TensorFloat-32 (PyTorch's "high" float32 matmul precision;
    no effect on a CPU). The NVIB layers' projections run in fp32 even under bf16 autocast."""


@dataclass
class UnitsEvalConfig:
    """How a unit model is evaluated, during training and after."""

    batch_size: int = 128
    gold_words_during_training: int = 2000
    """Periodic evaluations score segments on this many gold words (the final one on all)."""
    figure_sentences: list[str] = field(
        default_factory=lambda: ["whatever you are, be a good one."]
    )
    """Sentences whose attention maps are drawn (the NVIB paper's figure); the first valid sentences
    are added to them."""
    figure_valid_sentences: int = 2
    figure_layers: int = 3
    """How many of the top layers' maps are drawn."""
    robustness: bool = True
    """After training, measure reconstruction under character noise (``segrl.units.robustness``)."""
    robustness_kinds: list[NoiseKind] = field(default_factory=lambda: list(NOISE_KINDS))
    robustness_rates: list[float] = field(default_factory=lambda: [0.0, 0.05, 0.1, 0.2, 0.3])
    robustness_sentences: int = 500
    samples: int = 25
    """Sentences whose segmentations are logged as text."""


@dataclass
class UnitsConfig(RunOptions, CadenceOptions):
    """``segrl units train``: one unit model, trained and evaluated, logged to MLflow. Its run
    options (``out``: ``runs/units/<run name or model>`` by default; ``seed``, ``device``,
    ``threads``) and cadences are every job's (``RunOptions``, ``CadenceOptions``), with cadences
    of its own by default; its budget is ``train.steps``."""

    model: str = "transformer"
    """The unit model, by its name in ``segrl.units.registry.UNIT_MODELS``."""
    log_every: int = 25
    eval_every: int = 500
    checkpoint_every: int = 250
    init_from: str | None = None
    """The trained model of ``segrl units train`` whose weights start this run (``segrl units
    finetune --from``): its folder, an MLflow model folder or URI (``runs:/RUN_ID/model``,
    ``models:/NAME/VERSION``); None (resolved: "") or "": random initialisation."""
    train: UnitsTrainConfig = field(default_factory=UnitsTrainConfig)
    eval: UnitsEvalConfig = field(default_factory=UnitsEvalConfig)
    data: DataConfig = field(default_factory=DataConfig)
    gold: GoldConfig = field(default_factory=GoldConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)

    RESUMABLE: ClassVar[frozenset[str]] = (
        RunOptions.RESUMABLE | CadenceOptions.RESUMABLE | {"eval.", "gold.", "tracking."}
    )
    """Options that may change when a run resumes (they do not change what is trained): every
    job's (``RunOptions.RESUMABLE``, ``CadenceOptions.RESUMABLE``), the evaluation's, the gold
    set, the whole tracking table."""

    OLD_NAMES: ClassVar[dict[str, str]] = {
        f"train.{name}": name
        for name in ("seed", "device", "threads", "log_every", "eval_every", "checkpoint_every")
    }
    """The run options under the names they had in the ``train`` table, read as the new ones:
    config files, run folders and saved models written before they were every job's still
    load."""

    def check(self, prefix: str) -> None:
        """Values that would only fail later, mid-run (``segrl.config.validate_config`` checks the
        choices and the model's ``arch`` and calls this)."""
        t, e = self.train, self.eval
        checks = [
            (t.steps >= 1, f"train.steps must be at least 1, got {t.steps}"),
            (t.batch_size >= 1, f"train.batch_size must be at least 1, got {t.batch_size}"),
            (e.batch_size >= 1, f"eval.batch_size must be at least 1, got {e.batch_size}"),
            (t.lr > 0, f"train.lr must be positive, got {t.lr}"),
            (
                0 <= t.deletion_prob < 1,
                f"train.deletion_prob must be in [0, 1), got {t.deletion_prob}",
            ),
            (t.warmup_steps >= 0, f"train.warmup_steps must be >= 0, got {t.warmup_steps}"),
            (
                all(0 <= r < 1 for r in e.robustness_rates),
                "eval.robustness_rates must be in [0, 1)",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(prefix + message)
        self.check_cadences(prefix)
        self.check_run_options()

    @property
    def run_folder(self) -> Path:
        return Path(self.out or Path("runs") / "units" / (self.tracking.run_name or self.model))


@functools.cache
def units_config_class(model: str) -> type[UnitsConfig]:
    """``UnitsConfig`` with an ``arch`` table of ``model``'s config class and its training defaults."""
    cls = model_class(model)
    train_defaults = dict(cls.train_defaults)
    unknown = set(train_defaults) - {f.name for f in dataclasses.fields(UnitsTrainConfig)}
    if unknown:
        raise TypeError(f"{cls.__name__}.train_defaults names unknown options {sorted(unknown)}")

    def train_factory() -> UnitsTrainConfig:
        return UnitsTrainConfig(**train_defaults)

    name = "".join(part.capitalize() for part in model.replace("-", "_").split("_"))
    return dataclasses.make_dataclass(
        f"{name}UnitsConfig",
        [
            ("model", str, field(default=model)),
            ("train", UnitsTrainConfig, field(default_factory=train_factory)),
            ("arch", cls.config_class, field(default_factory=cls.config_class)),
        ],
        bases=(UnitsConfig,),
    )


def build_units_config(
    model: str | None = None,
    path: str | Path | None = None,
    overrides: dict[str, Any] | None = None,
    overrides_from: str = "overrides",
) -> UnitsConfig:
    """The config of a run of ``model`` (else the file's ``model``, else ``transformer``): defaults,
    the model's training defaults, the TOML file at ``path``, then dotted ``overrides``. A value out
    of range names the file where every value came from it."""
    overrides = dict(overrides or {})
    from_file_only = path is not None and all(v is None for v in overrides.values())
    file_model = _model_in_file(Path(path)) if path is not None else None
    model = model or overrides.pop("model", None) or file_model or UnitsConfig.model
    overrides["model"] = model
    config = build_config(units_config_class(model), path, overrides, overrides_from)
    try:
        validate_config(config)
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}" if from_file_only else str(e)) from None
    return config


def _model_in_file(path: Path) -> str | None:
    model = read_toml(path).get("model")
    if model is not None and not isinstance(model, str):
        raise ConfigError(f"{path}: model must be a string, got {model!r}")
    return model
