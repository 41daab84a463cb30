"""``segrl baseline`` and ``segrl compare``."""

from __future__ import annotations

import argparse
from pathlib import Path

from segrl.cli.common import (
    add_job_args,
    config_from_args,
    where_to_look,
)
from segrl.cli.flags import Flag, FlagTable

ALL = "all"
BASELINE_FLAGS = FlagTable(
    "segrl.config:BaselineConfig",
    (
        Flag("--method", "method", str, "NAME", "or all: every one, and the comparison"),
        Flag("--vocab-size", "vocab_size", int, "N"),
        Flag("--morfessor-dampening", "morfessor_dampening", str, "{ones,log,none}"),
        Flag("--corpus-weight", "morfessor_corpus_weight", float, "ALPHA"),
        Flag("--morfessor-epochs", "morfessor_max_epochs", int, "N"),
        Flag("--viterbi-smoothing", "morfessor_viterbi_smoothing", float, "S"),
        Flag("--morfessor-annotations", "morfessor_annotations", str, "FILE"),
        Flag("--annotation-weight", "morfessor_annotation_weight", float, "W"),
        Flag("--perplexity-threshold", "flatcat_perplexity_threshold", float, "P"),
        Flag("--flatcat-corpus-weight", "flatcat_corpus_weight", float, "W"),
        Flag("--flatcat-epochs", "flatcat_max_epochs", int, "N"),
        Flag("--character-coverage", "character_coverage", float, "F"),
        Flag("--out", "out", str, "DIR"),
        Flag("--train-seed", "seed", int, "N"),
    ),
)
"""``segrl baseline``'s own flags, options of ``BaselineConfig``."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "baseline",
        help="train a classic segmenter, score it against the gold set, log it to MLflow",
        description="Train a classic segmenter (Morfessor, Morfessor FlatCat, SentencePiece "
        "BPE/unigram, youtokentome BPE, characters, words) on the corpus, score it against the gold segmentation, log it "
        "to MLflow and print its metrics. --method all runs every one and prints the comparison.",
    )
    BASELINE_FLAGS.add_to(parser)
    add_job_args(parser, "vocab_size=8000 --set morfessor_corpus_weight=0.5")
    parser.set_defaults(func=run_baseline_command, _config_of=baseline_config)

    compare = subparsers.add_parser(
        "compare",
        help="one table of every segmenter in an MLflow experiment",
        description="Print the segmenter runs of an MLflow experiment with the same metric columns "
        "for all: one table per corpus and gold set (runs trained on different corpora or scored "
        "on different gold sets are not comparable; --mixed puts them in one table anyway).",
    )
    compare.add_argument("--experiment", default="segrl", metavar="NAME")
    compare.add_argument(
        "--latest", action="store_true", help="only each segmenter's newest run (per table)"
    )
    compare.add_argument("--name", metavar="TEXT", help="only segmenters whose name contains TEXT")
    compare.add_argument(
        "--kind", metavar="KIND", help="only one kind: baseline, agent, lm, units, evaluated"
    )
    compare.add_argument(
        "--mixed", action="store_true", help="one table for all, with corpus and gold columns"
    )
    compare.set_defaults(func=run_compare_command)


def baseline_config(args: argparse.Namespace):
    """The config ``segrl baseline`` trains with, from its parsed command line, its method checked
    against the segmenters segrl knows."""
    from segrl.baselines.registry import segmenter_class
    from segrl.config import BaselineConfig

    config = config_from_args(BaselineConfig, args)
    if config.method != ALL:
        segmenter_class(config.method)  # the error that names the methods
    return config


def run_baseline_command(args: argparse.Namespace) -> int:
    from segrl.baselines.registry import available_methods
    from segrl.data import load_corpus, load_gold, refuse_gold_file
    from segrl.experiments.baseline import run_baseline
    from segrl.metrics import metrics_summary
    from segrl.tracking.store import ensure_reachable

    config = baseline_config(args)
    methods = available_methods() if config.method == ALL else [config.method]
    ensure_reachable()
    corpus = load_corpus(config.data)
    if corpus.gold_from_spaces:  # word discovery: the corpus's spaces are the gold
        refuse_gold_file(config.gold.path)
        gold, gold_line = None, f"gold: the spaces of {len(corpus.test)} test utterances"
    else:
        gold = load_gold(config.gold.path, config.gold.max_words)
        gold_line = f"gold: {len(gold)} words"
    print(
        f"corpus: {corpus.settings['source']}: {len(corpus.train)} training sentences; {gold_line}"
    )
    out = config.out
    for method in methods:
        config.method = method
        if out is not None and len(methods) > 1:
            config.out = str(Path(out) / method)
        print(f"[{method}] training ...", flush=True)
        metrics = run_baseline(config, corpus, gold)
        if config.out is not None:
            print(f"[{method}] saved in {config.out}")
        print(f"[{method}] {metrics_summary(metrics)} ({metrics['train_seconds']:.1f}s)")
    if len(methods) > 1:
        print()
        print_comparison(config.tracking.experiment)
    print()
    print(where_to_look(config.tracking.experiment))
    return 0


def run_compare_command(args: argparse.Namespace) -> int:
    from segrl.errors import ConfigError
    from segrl.tracking.tags import RUN_KINDS

    if args.kind is not None and args.kind not in RUN_KINDS:
        raise ConfigError(f"--kind must be one of: {', '.join(RUN_KINDS)}; got {args.kind!r}")
    print_comparison(args.experiment, args.latest, args.name, args.kind, args.mixed)
    return 0


def print_comparison(
    experiment: str,
    latest_only: bool = True,
    name: str | None = None,
    kind: str | None = None,
    mixed: bool = False,
) -> None:
    """The runs of ``experiment`` (filtered by ``name`` and ``kind``), best boundary F1 first, one
    table per (corpus, gold) unless ``mixed``."""
    from segrl.metrics import BOUNDARY_F1, COMPARE_COLUMNS
    from segrl.tables import format_table
    from segrl.tracking.queries import segmenter_runs

    rows = [
        r
        for r in segmenter_runs(experiment, latest_only=latest_only)
        if (name is None or name in r["segmenter"]) and (kind is None or r["kind"] == kind)
    ]
    if not rows:
        chosen = "" if name is None and kind is None else " that match"
        print(f"no segmenter runs{chosen} in experiment {experiment!r} yet")
        return
    rows.sort(key=lambda r: r.get(BOUNDARY_F1, -1.0), reverse=True)
    groups: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        groups.setdefault(("", "") if mixed else (row["corpus"], row["gold"]), []).append(row)
    for k, ((corpus, gold), group) in enumerate(sorted(groups.items(), key=lambda g: -len(g[1]))):
        metric_columns = [c for c in COMPARE_COLUMNS if any(c in r for r in group)]
        columns = ["segmenter", "kind", *metric_columns, "run_id"]
        if mixed:
            columns[2:2] = ["corpus", "gold"]
            print(f"Segmenters in experiment '{experiment}' (corpora and gold sets mixed):")
        else:
            print(f"{chr(10) if k else ''}Experiment '{experiment}', corpus {corpus}, gold {gold}:")
        print(format_table(group, columns))
