"""Arguments shared by several subcommands; each flag's ``dest`` is the dotted config key it sets."""

from __future__ import annotations

import argparse
import shlex
import tomllib
from typing import Any, TypeVar

from segrl.cli.flags import Flag, FlagTable
from segrl.config import build_config
from segrl.errors import ConfigError

C = TypeVar("C")


def add_config_args(parser: argparse.ArgumentParser, example: str) -> None:
    """``--config FILE`` and ``--set KEY=VALUE``, the two ways into a config-driven command's config
    besides its flags (``config_from_args`` reads them: defaults, the file, ``--set``, flags)."""
    parser.add_argument(
        "--config", metavar="FILE", help="a TOML config file; flags given here override it"
    )
    add_set_arg(
        parser,
        f"any config option by its dotted key, e.g. --set {example} (VALUE is read as TOML: "
        "numbers, true/false, [lists]; otherwise a string)",
    )


def add_set_arg(parser: argparse.ArgumentParser, help: str) -> None:
    """``--set KEY=VALUE``, repeatable, into ``args._set`` (``parse_set`` reads it)."""
    parser.add_argument(
        "--set", dest="_set", action="append", default=[], metavar="KEY=VALUE", help=help
    )


def parse_set(items: list[str]) -> dict[str, Any]:
    """``["arch.dim=256", "model=nvib"]`` -> ``{"arch.dim": 256, "model": "nvib"}`` (TOML values)."""
    out = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {item!r}: write KEY=VALUE, e.g. --set reinforce.lr=3e-4")
        try:
            value = tomllib.loads(f"v = {raw}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw
        out[key.strip()] = value
    return out


DATA_FLAGS = FlagTable(
    "segrl.config:DataConfig",
    (
        Flag("--corpus", "corpus", str, "PATH"),
        Flag("--corpus-format", "corpus_format", str, "{auto,text,counts,words}"),
        Flag("--max-words", "max_words", int, "N"),
        Flag("--min-char-count", "min_char_count", int, "N"),
        Flag("--dampening", "dampening", str, "{none,log,ones}"),
        Flag("--max-len", "max_len", int, "N"),
        Flag("--max-sentences", "max_sentences", int, "N"),
        Flag("--seed", "seed", int, "N"),
    ),
    prefix="data.",
)
GOLD_FLAGS = FlagTable(
    "segrl.config:GoldConfig",
    (Flag("--gold", "path", str, "PATH"), Flag("--gold-max-words", "max_words", int, "N")),
    prefix="gold.",
)
TRACKING_FLAGS = FlagTable(
    "segrl.config:TrackingConfig",
    (
        Flag("--experiment", "experiment", str, "NAME"),
        Flag("--run-name", "run_name", str, "NAME"),
        Flag("--register", "register", str, "NAME"),
    ),
    prefix="tracking.",
)


def add_data_args(parser: argparse.ArgumentParser) -> None:
    DATA_FLAGS.add_to(parser, "data")


def add_gold_args(parser: argparse.ArgumentParser) -> None:
    GOLD_FLAGS.add_to(parser, "gold segmentation")


def add_tracking_args(parser: argparse.ArgumentParser) -> None:
    TRACKING_FLAGS.add_to(parser, "tracking (store: MLFLOW_TRACKING_URI, else ./mlflow.db)")


def add_job_args(
    parser: argparse.ArgumentParser, example: str, gold: bool = True, tracking: bool = True
) -> None:
    """What a config-driven command takes besides its own flags: ``--config`` and ``--set``
    (``example``: a ``--set`` of its own config), then the data, gold and tracking flags."""
    add_config_args(parser, example)
    add_data_args(parser)
    if gold:
        add_gold_args(parser)
    if tracking:
        add_tracking_args(parser)


COMMAND_LINE = "command line"
"""Where an error says a bad value came from when a flag or ``--set`` gave it."""


def config_from_args(cls: type[C], args: argparse.Namespace, **extra: Any) -> C:
    """Defaults, then ``--config``, then ``--set`` (where the command has it), then every flag whose
    dest is a config key (given ones only)."""
    flags = {k: v for k, v in vars(args).items() if k not in ("command", "func", "config")}
    overrides = parse_set(getattr(args, "_set", []))
    overrides.update({k: v for k, v in flags.items() if v is not None})
    overrides.update(extra)
    known = {k: v for k, v in overrides.items() if not k.startswith("_")}
    return build_config(cls, getattr(args, "config", None), known, overrides_from=COMMAND_LINE)


def where_to_look(experiment: str) -> str:
    from segrl.tracking.store import DEFAULT_EXPERIMENT, tracking_uri
    from segrl.tracking.ui import runs_table_url

    uri = tracking_uri()
    named = "" if experiment == DEFAULT_EXPERIMENT else f" --experiment {shlex.quote(experiment)}"
    view = f"segrl ui{named}   (it prints the link to this experiment's runs table)"
    if uri.startswith(("http://", "https://")):
        view = f"open {runs_table_url(uri.rstrip('/'), experiment)}"
    return f"Runs are in MLflow: store {uri}, experiment '{experiment}'.\nView them: {view}"
