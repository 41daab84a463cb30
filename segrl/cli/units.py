"""``segrl units``: continuous-unit models (character autoencoders whose units are read off attention).

    segrl units train --model NAME [--config FILE] [--set arch.dim=256 ...] [flags]
    segrl units finetune --from MODEL --model NAME [--config FILE] [--set ...] [flags]
    segrl units eval FOLDER [FOLDER ...] [--no-robustness] [flags]
    segrl units probe FOLDER [FOLDER ...] [--targets bpe,morfessor] [--epochs N] [flags]

``train`` builds the model registered as NAME in ``segrl.units.registry.UNIT_MODELS``, trains it with
the shared loop (``segrl.experiments.units_train``), evaluates it and logs it to MLflow as a
segmenter of kind ``units``; re-running an interrupted command resumes from its checkpoint. ``eval`` evaluates saved
model folders again (and compares their robustness when given several). ``probe`` trains forward and
reverse probes on saved models' unit vectors against BPE and Morfessor units
(``segrl.experiments.units_probe``).

Extending:

- a model: one line in ``UNIT_MODELS`` plus its module (a ``UnitModel`` subclass with a
  ``config_class``); ``--model`` and ``--set arch.OPTION=VALUE`` then work with no change here;
- a subcommand (``segrl units probe``): a module with ``register(units_subparsers)`` that adds its
  parser and sets ``func``; add the module's name to ``SUBCOMMAND_MODULES``. ``add_run_args`` and
  ``units_config_from_args`` give it the same flags and config handling as ``train``.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any

from segrl.cli.common import (
    COMMAND_LINE,
    add_data_args,
    add_gold_args,
    add_job_args,
    add_set_arg,
    parse_set,
    where_to_look,
)
from segrl.cli.flags import Flag, FlagTable

SUBCOMMAND_MODULES: tuple[str, ...] = ()
"""Modules adding further ``segrl units`` subcommands (each has ``register(units_subparsers)``)."""

REPORTED = ("segment_f1", "boundary_f1", "units_per_char", "reconstruction", "kept_per_char")


def register(subparsers: argparse._SubParsersAction) -> None:
    from segrl.units.registry import available_models

    parser = subparsers.add_parser(
        "units",
        help="continuous-unit models: train, evaluate, probe",
        description="Character autoencoders whose units are read off attention maps "
        f"(models: {', '.join(available_models())}).",
    )
    units = parser.add_subparsers(dest="units_command", required=True, metavar="SUBCOMMAND")

    train = units.add_parser(
        "train",
        help="train a unit model, evaluate it, log it to MLflow",
        description="Train a unit model on the corpus (deletion-noise denoising autoencoder), "
        "evaluate the segments read off its attention against the gold set and the words of "
        "held-out sentences, and log everything to MLflow. Re-running an interrupted command "
        "resumes from its last checkpoint.",
    )
    add_model_args(
        train,
        f"{', '.join(available_models())} (default: the config file's, else transformer)",
        "runs/units/<run name or model>",
    )
    add_run_args(train)
    train.set_defaults(func=run_train, _config_of=units_config_from_args)

    finetune = units.add_parser(
        "finetune",
        help="turn a trained unit model into another (e.g. a Transformer into NVIB) and train on",
        description="Start a unit model from the weights of a trained one (--from, a folder "
        "`segrl units train` wrote) and train it further on the same corpus: for --model nvib "
        "from a Transformer, the NVIB fine-tuning paper's model (NVIB layers that start as the "
        "identity, proportional clipping, a learned prior mean, the simplified test-time "
        "attention). The trained model's options are kept; the budget is a quarter of its steps "
        "unless --steps says otherwise. Re-running an interrupted command resumes.",
    )
    finetune.add_argument(
        "--from",
        dest="init_from",
        required=True,
        metavar="MODEL",
        help="the trained model: its folder, an MLflow model folder, or an MLflow URI "
        "(runs:/RUN_ID/model, models:/NAME/VERSION)",
    )
    add_model_args(
        finetune,
        f"the model to fine-tune into: {', '.join(available_models())}",
        "runs/units/<FROM's run name>-<NAME>-finetune",
        required=True,
    )
    add_run_args(finetune)
    finetune.set_defaults(func=run_finetune)

    evaluate = units.add_parser(
        "eval",
        help="evaluate saved unit models (and compare their robustness)",
        description="Evaluate model folders written by `segrl units train` on the test split of "
        "their corpus, each in its own MLflow run; with several folders, one more run compares "
        "their robustness to character noise in one figure.",
    )
    evaluate.add_argument("folders", nargs="+", metavar="FOLDER")
    FlagTable(UNITS, (Flag("--no-robustness", "eval.robustness", bool, const=False),)).add_to(
        evaluate
    )
    add_runtime_args(evaluate)
    add_data_args(evaluate)
    add_gold_args(evaluate)
    FlagTable(UNITS, (Flag("--experiment", "tracking.experiment", str, "NAME"),)).add_to(evaluate)
    add_set_arg(
        evaluate,
        "change a saved model's config option by its dotted key before evaluating, e.g. --set "
        "arch.eval_log_variance_weight=1.0 (test-time options only: the weights stay the model's)",
    )
    evaluate.set_defaults(func=run_eval)

    probe = units.add_parser(
        "probe",
        help="probe saved unit models' vectors against BPE and Morfessor units",
        description="Forward probing (a shared MLP classifies each kept vector as a target unit "
        "or empty, matched to the sentence's units by the Hungarian algorithm; P/R/F1) and "
        "reverse probing (a Gaussian over the matched vector given the unit; negative "
        "log-density, lower is better) of model folders written by `segrl units train`, and of "
        "untrained models of the same configs as the control. Logged to MLflow (run 'probe').",
    )
    probe.add_argument("folders", nargs="+", metavar="FOLDER")
    PROBE_FLAGS.add_to(probe)
    probe.add_argument("--threads", type=int, metavar="N", help="PyTorch CPU threads")
    probe.add_argument("--experiment", default="segrl", metavar="NAME", help="MLflow experiment")
    probe.set_defaults(func=run_probe)

    for name in SUBCOMMAND_MODULES:
        importlib.import_module(name).register(units)


def add_model_args(
    parser: argparse.ArgumentParser, model_help: str, out_default: str, required: bool = False
) -> None:
    """``--model NAME`` and ``--out DIR`` of a command that trains a unit model."""
    FlagTable(
        UNITS,
        (
            Flag("--model", "model", str, "NAME", model_help, required=required),
            Flag("--out", "out", str, "DIR", f"here: {out_default}"),
        ),
        show_defaults=False,
    ).add_to(parser)


UNITS = "segrl.units.config:UnitsConfig"
RUNTIME_FLAGS = FlagTable(
    UNITS,
    (
        Flag("--device", "device", str, "NAME"),
        Flag("--precision", "train.precision", str, "{fp32,bf16,fp16}"),
        Flag("--threads", "threads", int, "N"),
    ),
)
TRAINING_FLAGS = FlagTable(
    UNITS,
    (
        Flag("--steps", "train.steps", int, "N"),
        Flag("--batch-size", "train.batch_size", int, "N"),
        Flag("--lr", "train.lr", float, "X"),
        Flag("--train-seed", "seed", int, "N"),
    ),
    show_defaults=False,  # each model has its own (``UnitModel.train_defaults``)
)
PROBE_FLAGS = FlagTable(
    "segrl.units.probing:ProbeConfig",
    (
        Flag("--targets", "targets", list, "LIST", "comma-separated"),
        Flag("--epochs", "epochs", int, "N"),
        Flag("--reverse-epochs", "reverse_epochs", int, "N"),
        Flag("--train-sentences", "train_sentences", int, "N"),
        Flag("--test-sentences", "test_sentences", int, "N"),
        Flag("--bpe-vocab-size", "bpe_vocab_size", int, "N"),
        Flag("--no-untrained", "untrained", bool, const=False),
    ),
)
"""``segrl units probe``'s flags, options of ``ProbeConfig``."""


def add_runtime_args(parser: argparse.ArgumentParser) -> None:
    RUNTIME_FLAGS.add_to(parser, "runtime")


def add_run_args(parser: argparse.ArgumentParser) -> None:
    """The flags of a unit-model run: config file, ``--set``, training, data, gold, tracking."""
    TRAINING_FLAGS.add_to(parser, "training")
    add_runtime_args(parser)
    add_job_args(parser, "arch.dim=256 --set train.lr=3e-4")


TOP_KEYS = ("model", "out", "seed", "device", "threads")
"""The options at the top of ``UnitsConfig`` that flags set (every job's run options among them);
every other flag's dest is a dotted key."""


def flag_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """Config keys given as flags (dests that are dotted keys, plus ``TOP_KEYS``)."""
    keys = {k: v for k, v in vars(args).items() if "." in k or k in TOP_KEYS}
    return {k: v for k, v in keys.items() if v is not None}


def units_config_from_args(args: argparse.Namespace):
    """The run's config: defaults, the model's training defaults, ``--config``, ``--set``, flags."""
    from segrl.units.config import build_units_config

    overrides = {**parse_set(args._set), **flag_overrides(args)}
    return build_units_config(
        overrides.pop("model", None), args.config, overrides, overrides_from=COMMAND_LINE
    )


def run_train(args: argparse.Namespace) -> int:
    from segrl.experiments.units_train import train_unit_model

    config = units_config_from_args(args)
    print(f"units {config.model}: run folder {config.run_folder}", flush=True)
    return report_training(config, train_unit_model(config))


def report_training(config, result) -> int:
    if result.resumed_from:
        print(f"resumed from step {result.resumed_from}")
    print(format_metrics(config.tracking.run_name or config.model, result.metrics))
    print(f"model: {result.run_dir}  (segrl units eval {result.run_dir})")
    print(where_to_look(config.tracking.experiment))
    return 0


def run_finetune(args: argparse.Namespace) -> int:
    from segrl.experiments.units_finetune import finetune_config
    from segrl.experiments.units_train import train_unit_model

    overrides = {**parse_set(args._set), **flag_overrides(args)}
    model = overrides.pop("model")
    config = finetune_config(
        args.init_from, model, args.config, overrides, overrides_from=COMMAND_LINE
    )
    print(
        f"units {config.model}: fine-tuning {config.init_from} for {config.train.steps} steps, "
        f"run folder {config.run_folder}",
        flush=True,
    )
    return report_training(config, train_unit_model(config))


def run_eval(args: argparse.Namespace) -> int:
    from segrl.experiments.units_eval import evaluate_saved_models

    overrides = {**parse_set(args._set), **flag_overrides(args)}
    experiment = overrides.pop("tracking.experiment", None)
    results = evaluate_saved_models(args.folders, overrides, experiment)
    for result in results:
        print(format_metrics(result.name, result.metrics))
    print(where_to_look(experiment or "segrl"))
    return 0


def run_probe(args: argparse.Namespace) -> int:
    from segrl.experiments.units_probe import format_probe_table, run_probes
    from segrl.units.probing import ProbeConfig

    options = ("targets", "epochs", "reverse_epochs", "train_sentences", "test_sentences")
    options += ("bpe_vocab_size", "untrained")
    values = {k: getattr(args, k) for k in options if getattr(args, k) is not None}
    rows = run_probes(args.folders, ProbeConfig(**values), args.experiment, args.threads)
    print(format_probe_table(rows))
    print(where_to_look(args.experiment))
    return 0


def format_metrics(name: str, metrics: dict[str, float]) -> str:
    shown = ", ".join(f"{k} {metrics[k]:.3f}" for k in REPORTED if k in metrics)
    kept = ", ".join(
        f"{k.split('/', 1)[1]} {v:.2f}"
        for k, v in metrics.items()
        if k.startswith("kept_fraction/")
    )
    return f"[{name}] {shown}" + (f"; kept fraction {kept}" if kept else "")
