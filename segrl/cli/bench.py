"""``segrl bench``: train and score a suite of segmenters on several languages with several seeds."""

from __future__ import annotations

import argparse
from pathlib import Path

from segrl.errors import ConfigError

BUILT_IN = "quick, sigmorphon, transfer, words, units, synthetic"
"""The built-in suites, as the help names them (``segrl.benchmark.builtin_suites`` lists the files;
a test keeps the two the same), without importing the benchmark at start-up."""


def _names(text: str) -> list[str]:
    return [v.strip() for v in text.split(",") if v.strip()]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="train and score a suite of segmenters on several languages and seeds: one table",
        description=f"Run a benchmark suite (a TOML file, or a built-in one: {BUILT_IN}): "
        "every system on every language with every seed, each cell an MLflow child run of one "
        "parent run; print a table per language (mean ± sd over seeds, best F1 marked) and write "
        "it as CSV, Markdown and a bar chart. A re-run skips the finished cells.",
    )
    parser.add_argument(
        "--suite", default="quick", metavar="NAME|FILE", help="built-in suite or TOML file"
    )
    parser.add_argument(
        "--data-dir",
        metavar="DIR",
        help="what {data_dir} in the suite's paths stands for (default ../shared/data)",
    )
    parser.add_argument(
        "--out", metavar="DIR", help="the bench's folder (default runs/bench/<suite>)"
    )
    parser.add_argument(
        "--workers", type=int, default=1, metavar="N", help="cells run at once (default 1)"
    )
    parser.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="run the cells on this Ray cluster instead (needs segrl[cluster]); 'local' starts one "
        "on this machine",
    )
    parser.add_argument("--experiment", default="segrl-bench", metavar="NAME")
    parser.add_argument("--languages", type=_names, metavar="A,B", help="only these languages")
    parser.add_argument("--systems", type=_names, metavar="A,B", help="only these systems")
    parser.add_argument(
        "--seeds",
        type=lambda text: [int(v) for v in _names(text)],
        metavar="0,1",
        help="these seeds instead of the suite's",
    )
    parser.set_defaults(func=run_bench_command)


def run_bench_command(args: argparse.Namespace) -> int:
    from segrl.benchmark import load_suite, run_bench
    from segrl.cli.common import where_to_look

    suite = load_suite(args.suite, args.data_dir).select(args.languages, args.systems, args.seeds)
    n_cells = len(suite.languages) * len(suite.systems) * len(suite.seeds)
    print(
        f"bench {suite.name} ({suite.source}): {len(suite.languages)} languages x "
        f"{len(suite.systems)} systems x {len(suite.seeds)} seeds = {n_cells} cells"
    )
    _check_commands(suite, args.experiment)
    outcome = run_bench(suite, args.out, args.workers, args.ray, args.experiment)
    print()
    print(outcome.table)
    print(f"wall time {outcome.wall_seconds / 60:.1f} minutes; results in {outcome.folder}/")
    print(where_to_look(args.experiment))
    for failed in outcome.failed:
        print(f"FAILED {failed['cell']}: {failed.get('tail', '')} (log: {failed['log']})")
    return 1 if outcome.failed else 0


def _check_commands(suite, experiment: str) -> None:
    """Every cell's command line parses, before any cell starts: a flag misspelt in a system's
    command is a ``ConfigError`` naming the system and argparse's message, not a failed cell."""
    import contextlib
    import io

    from segrl.benchmark.runner import cells_of
    from segrl.cli import build_parser

    parser = build_parser()
    checked: set[tuple[str, str]] = set()
    for cell in cells_of(suite):
        key = (cell.language.name, cell.system.name)
        if key in checked:  # seeds change only the seed's value
            continue
        checked.add(key)
        said = io.StringIO()
        where = f"suite {suite.name}, system {cell.system.name!r} on {cell.language.name!r}"
        try:
            with contextlib.redirect_stderr(said):
                args = parser.parse_args(cell.argv(Path("runs"), experiment))
        except SystemExit:
            lines = [line for line in said.getvalue().splitlines() if line.strip()]
            message = lines[-1] if lines else "it does not parse"
            raise ConfigError(
                f"{where}: {message.removeprefix('segrl: ')}; fix the system's command in the suite"
            ) from None
        try:
            _check_values(args)
        except ConfigError as e:
            raise ConfigError(f"{where}: {e}; fix the system's command in the suite") from None


def _check_values(args: argparse.Namespace) -> None:
    """The config a cell's parsed command would train with, built by its command's own
    ``_config_of`` and checked as its job checks it (unknown ``--set`` options, values of the wrong
    type, out of range or not among the choices), without loading data or starting anything."""
    from segrl.config import validate_config

    config_of = getattr(args, "_config_of", None)
    if config_of is not None:
        validate_config(config_of(args))
