"""``segrl ui``: the MLflow UI on the store segrl logs to."""

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
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from segrl.tracking import run_ui

    return run_ui(args.host, args.port)
