"""The MLflow UI on segrl's store: the view of an experiment's runs it opens with (the standard
metrics as columns, best boundary F1 first), the link to that view, and the server ``segrl ui``
starts and stops."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from typing import Any

from mlflow.tracking import MlflowClient

from segrl.tracking.store import DEFAULT_EXPERIMENT, ensure_reachable, tracking_uri
from segrl.tracking.tags import KIND_TAG

EXPERIMENT_KIND_TAG, RUNS_KIND = "mlflow.experimentKind", "custom_model_development"
"""The experiment tag that marks an experiment as model development (runs, not GenAI traces)."""
VIEW_KEY = "segrl"
VIEW_TAG = f"mlflow.sharedViewState.{VIEW_KEY}"
"""A view of the runs table that the MLflow UI opens with ``?viewStateShareKey=segrl``."""
VIEW_COLUMNS = (
    "boundary_f1",
    "boundary_precision",
    "boundary_recall",
    "units_per_char",
    "morph_f1",
)


def prepare_experiment_view(client: MlflowClient, experiment: Any) -> None:
    """Tag ``experiment`` so that the MLflow UI shows its runs with the standard metrics as columns,
    best boundary F1 first (``runs_table_url`` links that view); tags already there are kept."""
    tags = experiment.tags or {}
    if EXPERIMENT_KIND_TAG not in tags:
        client.set_experiment_tag(experiment.experiment_id, EXPERIMENT_KIND_TAG, RUNS_KIND)
    if VIEW_TAG not in tags:
        columns = [f"metrics.`{name}`" for name in VIEW_COLUMNS]
        view = {
            "selectedColumns": [*columns, f"tags.`{KIND_TAG}`"],
            "orderByKey": "metrics.`boundary_f1`",
            "orderByAsc": False,
        }
        client.set_experiment_tag(experiment.experiment_id, VIEW_TAG, json.dumps(view))


def runs_table_url(base: str, experiment: str = DEFAULT_EXPERIMENT, uri: str | None = None) -> str:
    """The MLflow UI's page of ``experiment``'s runs in segrl's view (``base`` alone where the
    experiment does not exist yet)."""
    client = MlflowClient(uri or tracking_uri())
    found = client.get_experiment_by_name(experiment)
    if found is None:
        return base
    prepare_experiment_view(client, found)
    return f"{base}/#/experiments/{found.experiment_id}/runs?viewStateShareKey={VIEW_KEY}"


def ui_command(host: str = "127.0.0.1", port: int = 5000, uri: str | None = None) -> list[str]:
    """The command that serves the MLflow UI on the same store as ``segrl``'s runs."""
    uri = uri or tracking_uri()
    return [
        sys.executable,
        "-m",
        "mlflow",
        "ui",
        "--backend-store-uri",
        uri,
        "--host",
        host,
        "--port",
        str(port),
    ]


def run_ui(host: str = "127.0.0.1", port: int = 5000) -> int:
    """Serve the MLflow UI until interrupted (the same store ``segrl`` logs to)."""
    uri = tracking_uri()
    if uri.startswith(("http://", "https://")):
        print(f"MLFLOW_TRACKING_URI points at a server already: open {uri} in a browser.")
        return 0
    ensure_reachable(uri)
    url = runs_table_url(f"http://{host}:{port}", uri=uri)
    print(f"MLflow UI for {uri} (Ctrl-C stops it); the segrl runs: {url}", flush=True)
    # its own process group: the server and every worker it starts stop together
    server = subprocess.Popen(ui_command(host, port, uri), start_new_session=True)

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        return server.wait()
    except KeyboardInterrupt:
        stop_process_group(server)
        return 0
    finally:
        signal.signal(signal.SIGTERM, previous)


def stop_process_group(process: subprocess.Popen, timeout: float = 10.0) -> None:
    """Stop ``process`` and everything in its process group: SIGTERM, then SIGKILL for whatever is
    left after ``timeout`` seconds (workers that outlive their server included)."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
