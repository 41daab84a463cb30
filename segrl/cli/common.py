"""Arguments shared by several subcommands; each flag's ``dest`` is the dotted config key it sets."""

from __future__ import annotations

import argparse
import tomllib
from typing import Any, TypeVar

from segrl.config import build_config
from segrl.errors import ConfigError

C = TypeVar("C")


def add_config_args(parser: argparse.ArgumentParser, example: str) -> None:
    """``--config FILE`` and ``--set KEY=VALUE``, the two ways into a config-driven command's config
    besides its flags (``config_from_args`` reads them: defaults, the file, ``--set``, flags)."""
    parser.add_argument(
        "--config", metavar="FILE", help="a TOML config file; flags given here override it"
    )
    parser.add_argument(
        "--set",
        dest="_set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"any config option by its dotted key, e.g. --set {example} (VALUE is read as TOML: "
        "numbers, true/false, [lists]; otherwise a string)",
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


def add_data_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("data")
    group.add_argument(
        "--corpus",
        dest="data.corpus",
        metavar="PATH",
        help="UTF-8 text file or folder, word-count list, or wordfreq:LANG (default: the bundled "
        "WikiText-2 slice)",
    )
    group.add_argument(
        "--corpus-format",
        dest="data.corpus_format",
        choices=("auto", "text", "counts", "words"),
        help="text, counts ('count word' or 'word<TAB>count' lines), words (one per line), or auto "
        "(default: told apart by the first lines)",
    )
    group.add_argument(
        "--max-words",
        dest="data.max_words",
        type=int,
        metavar="N",
        help="word lists: keep the N most frequent words (wordfreq:LANG default 60000)",
    )
    group.add_argument(
        "--min-char-count",
        dest="data.min_char_count",
        type=int,
        metavar="N",
        help="map characters seen fewer than N times to a placeholder (default 25)",
    )
    group.add_argument(
        "--dampening",
        dest="data.dampening",
        choices=("none", "log", "ones"),
        help="word lists: how counts weight the words episodes and the LM draw (default log)",
    )
    group.add_argument(
        "--max-len",
        dest="data.max_len",
        type=int,
        metavar="N",
        help="leave out sentences longer than N characters (default 128)",
    )
    group.add_argument(
        "--max-sentences",
        dest="data.max_sentences",
        type=int,
        metavar="N",
        help="use only the first N sentences",
    )
    group.add_argument(
        "--seed",
        dest="data.seed",
        type=int,
        metavar="N",
        help="seed of the train/valid/test split (default 0)",
    )


def add_gold_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("gold segmentation")
    group.add_argument(
        "--gold",
        dest="gold.path",
        metavar="PATH",
        help="Morpho Challenge or SIGMORPHON 2022 file (default: the bundled English set)",
    )
    group.add_argument(
        "--gold-max-words",
        dest="gold.max_words",
        type=int,
        metavar="N",
        help="score on a fixed sample of N gold words",
    )


def add_tracking_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("tracking (store: MLFLOW_TRACKING_URI, else ./mlflow.db)")
    group.add_argument(
        "--experiment",
        dest="tracking.experiment",
        metavar="NAME",
        help="MLflow experiment (default: segrl)",
    )
    group.add_argument("--run-name", dest="tracking.run_name", metavar="NAME")
    group.add_argument(
        "--register",
        dest="tracking.register",
        metavar="NAME",
        help="also add the trained segmenter to the MLflow model registry as a new version of NAME",
    )


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
    from segrl.tracking.store import tracking_uri
    from segrl.tracking.ui import runs_table_url

    uri = tracking_uri()
    view = "segrl ui   (it prints the link to this experiment's runs table)"
    if uri.startswith(("http://", "https://")):
        view = f"open {runs_table_url(uri.rstrip('/'), experiment)}"
    return f"Runs are in MLflow: store {uri}, experiment '{experiment}'.\nView them: {view}"
