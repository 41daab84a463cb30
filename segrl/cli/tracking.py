"""``segrl ui``: the MLflow UI on the store segrl logs to; ``segrl curves``: runs' training curves."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "ui",
        help="open the MLflow UI on the same store",
        description="Serve the MLflow UI on the store segrl logs to (MLFLOW_TRACKING_URI, else "
        "./mlflow.db). Ctrl-C stops it.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=5000)
    parser.add_argument(
        "--experiment",
        default=None,
        metavar="NAME",
        help="the experiment whose runs it links (default: segrl; `segrl bench` logs to segrl-bench)",
    )
    parser.set_defaults(func=run)
    curves = subparsers.add_parser(
        "curves",
        help="print (and plot) training curves of runs side by side",
        description="Print the history of each metric of the runs named (run names or IDs; a name "
        "means the newest run of that name) as one table per metric, a row per step and a column "
        "per run, from the store segrl logs to; --plot also draws them into a PNG.",
    )
    curves.add_argument("runs", nargs="+", metavar="RUN", help="run name or run ID")
    curves.add_argument(
        "--metrics",
        default="eval/boundary_f1,eval/units_per_char,train/split_rate",
        metavar="A,B",
        help="metrics to show (default: eval/boundary_f1,eval/units_per_char,train/split_rate)",
    )
    curves.add_argument(
        "--every", type=int, default=1, metavar="N", help="only steps divisible by N"
    )
    curves.add_argument("--experiment", metavar="NAME", help="look for the runs only here")
    curves.add_argument("--plot", metavar="FILE.png", help="also draw the curves into this PNG")
    curves.set_defaults(func=run_curves)


def run(args: argparse.Namespace) -> int:
    from segrl.tracking.store import DEFAULT_EXPERIMENT
    from segrl.tracking.ui import run_ui

    return run_ui(args.host, args.port, args.experiment or DEFAULT_EXPERIMENT)


def run_curves(args: argparse.Namespace) -> int:
    from segrl.curves import format_curves, plot_curves
    from segrl.errors import ConfigError
    from segrl.tracking.queries import metric_histories

    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
    if not metrics or args.every < 1:
        raise ConfigError("--metrics needs at least one metric name and --every a positive step")
    histories = metric_histories(args.runs, metrics, args.experiment)
    print(format_curves(histories, metrics, args.every))
    if args.plot:
        print(f"chart: {plot_curves(histories, metrics, args.plot)}")
    return 0
