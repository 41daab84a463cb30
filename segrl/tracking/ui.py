"""The MLflow UI on segrl's store: the view of an experiment's runs it opens with (what each run
trained on and was scored against beside the standard metrics, runs grouped by corpus, gold set
and the part of it scored, best boundary F1 first, MLflow's classic model-training pages), the link to that view, and the server
``segrl ui`` starts and stops.

MLflow keeps a person's view of a runs table (its columns, its grouping) in the browser's local
storage, and opens a view kept on the server (an experiment tag) only with a "shared view" banner.
So ``segrl ui`` serves MLflow with segrl's MLflow app (``mlflow server --app-name segrl``), which adds
one page: it gives the browser segrl's view the first time it opens an experiment's runs from it
(later changes are the person's own), then goes on to MLflow's runs table. The same view is a
saved view of every experiment (MLflow's *Views* menu) for those who open the UI another way."""

from __future__ import annotations

import contextlib
import hashlib
import html
import importlib.metadata
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import Any

from mlflow.entities import RunTag
from mlflow.tracking import MlflowClient

from segrl.metrics import BOUNDARY_F1, COMPARE_COLUMNS, COVERED_FRACTION
from segrl.processes import handling, python_command, python_environment, raise_interrupt
from segrl.tracking.store import (
    DEFAULT_EXPERIMENT,
    absolute_tracking_uri,
    ensure_reachable,
    tracking_uri,
)
from segrl.tracking.tags import (
    CORPUS_LABEL_TAG,
    CORPUS_LANGUAGE_TAG,
    DATA_TAG,
    GOLD_COVERAGE_TAG,
    GOLD_LABEL_TAG,
    GOLD_LANGUAGE_TAG,
    KIND_TAG,
    label_tags,
)

EXPERIMENT_KIND_TAG, RUNS_KIND = "mlflow.experimentKind", "custom_model_development"
"""The experiment tag that marks an experiment as model development (runs, not GenAI traces)."""
VIEW_KEY, VIEW_NAME = "segrl", "segrl: by corpus and gold"
VIEW_TAG = f"mlflow.sharedViewState.{VIEW_KEY}"
"""segrl's view as a saved view of the experiment: MLflow's *Views* menu lists it by its name."""
VIEW_COLUMNS = (
    f"tags.`{CORPUS_LABEL_TAG}`",
    f"tags.`{CORPUS_LANGUAGE_TAG}`",
    f"tags.`{GOLD_LABEL_TAG}`",
    f"tags.`{GOLD_LANGUAGE_TAG}`",
    f"tags.`{GOLD_COVERAGE_TAG}`",
    f"metrics.`{BOUNDARY_F1}`",  # the sort key, first: on screen in a window 1600 px wide
    *(f"metrics.`{name}`" for name in COMPARE_COLUMNS if name != BOUNDARY_F1),
    f"tags.`{KIND_TAG}`",
)
"""The runs table's columns: the corpus (its short label; the run's page has its whole source) and
its language, the gold set (the same), its language and the part of it scored (``all 2000 words``;
a predictions file's share, ``segrl evaluate --predictions``), boundary F1 (the order), the other
metrics ``segrl compare`` shows (MLflow shows those some run logged), the kind."""
VIEW_GROUPS = (DATA_TAG,)
"""The runs are grouped by corpus, gold set and the part of it scored: scores on different data,
a few words a predictions file shares with the gold set among them, are never ranked together (as
``segrl compare`` tabulates them apart). A group's row shows the best of each metric in it. One tag
holds the three: MLflow names a group of several tags by each tag's name and value, a label too
long for its column; of one tag, by its value alone (``wordfreq:en | eng.word.dev.tsv | all 2000
words``)."""
RUN_NAME_COLUMN = "attributes.`Run Name`"
COLUMN_WIDTHS = {
    RUN_NAME_COLUMN: 460,  # a group's name (its DATA_TAG) and an agent's run name
    f"tags.`{CORPUS_LABEL_TAG}`": 130,
    f"tags.`{GOLD_LABEL_TAG}`": 130,
    f"tags.`{CORPUS_LANGUAGE_TAG}`": 70,  # "eng"
    f"tags.`{GOLD_LANGUAGE_TAG}`": 70,
    f"tags.`{GOLD_COVERAGE_TAG}`": 130,  # "all 40298 words"
    f"metrics.`{BOUNDARY_F1}`": 120,  # a group's "0.3683 (max)"
}
"""In pixels: all of these, MLflow's checkbox and *Created* columns fit a window 1600 px wide."""
ORDER = {"orderByKey": f"metrics.`{BOUNDARY_F1}`", "orderByAsc": "false"}
CLASSIC = {"workflowType": "machine_learning"}
"""MLflow's model-training pages (its sidebar and tabs) rather than its GenAI ones."""
APP_NAME = "segrl"
"""segrl's MLflow app (the ``mlflow.app`` entry point): MLflow's server plus the page below."""
VIEW_ROUTE = "/segrl/runs/<experiment_id>"
_EXPERIMENT_ID = re.compile(r"[0-9A-Za-z_-]{1,64}")
_STORAGE_VERSION = "1.1"
"""MLflow's local-storage format of a runs table's view (``MLflowLocalStorage-1.1-...``)."""


def runs_view() -> dict[str, Any]:
    """segrl's view of a runs table as MLflow's UI keeps it: columns, grouping and order."""
    group_by = {
        "aggregateFunction": "max",
        "groupByKeys": [{"mode": "tag", "groupByData": tag} for tag in VIEW_GROUPS],
    }
    return {
        "selectedColumns": list(VIEW_COLUMNS),
        "columnOrder": [RUN_NAME_COLUMN, *VIEW_COLUMNS],
        "columnWidths": dict(COLUMN_WIDTHS),
        "groupBy": group_by,
        "orderByKey": ORDER["orderByKey"],
        "orderByAsc": False,
    }


def view_group(run: Any) -> str | None:
    """The group of segrl's view an MLflow run is in: its ``DATA_TAG``, as ``label_runs`` gives it
    to a run logged without it."""
    return run.data.tags.get(DATA_TAG) or label_tags(run.data.tags).get(DATA_TAG)


def label_runs(client: MlflowClient, experiment_id: str) -> int:
    """Give the runs of an experiment logged before segrl labelled their data (``label_tags``) those
    labels, so that segrl's view groups them with the others; returns how many it labelled."""
    runs, token = [], None
    while True:  # every page before the first tag is set: a labelled run leaves the search
        page = client.search_runs(
            [experiment_id], f"tags.`{DATA_TAG}` IS NULL", max_results=1000, page_token=token
        )
        runs += page
        token = page.token
        if not token:
            break
    labelled = 0
    for run in runs:
        tags = label_tags(run.data.tags)
        if tags:
            client.log_batch(run.info.run_id, tags=[RunTag(k, v) for k, v in tags.items()])
            labelled += 1
    return labelled


def scored_on_part(run: Any) -> bool:
    """Whether an MLflow run was scored on a part of its gold set (a predictions file's words): by
    its ``GOLD_COVERAGE_TAG``, or its ``covered_fraction`` where it was logged before that tag."""
    coverage = run.data.tags.get(GOLD_COVERAGE_TAG)
    if coverage is not None:
        return not coverage.startswith("all ")
    return run.data.metrics.get(COVERED_FRACTION, 1.0) < 1.0


def prepare_experiment_view(client: MlflowClient, experiment: Any) -> None:
    """Tag ``experiment`` as model development (MLflow opens it on its runs, not its traces) and give
    it segrl's view as a saved view; tags already there are kept, an older segrl view is replaced."""
    tags = experiment.tags or {}
    if EXPERIMENT_KIND_TAG not in tags:
        client.set_experiment_tag(experiment.experiment_id, EXPERIMENT_KIND_TAG, RUNS_KIND)
    try:
        saved = json.loads(json.loads(tags[VIEW_TAG])["state"])
    except (KeyError, TypeError, ValueError):
        saved = None
    if saved != runs_view():
        now = int(time.time() * 1000)
        envelope = {
            "name": VIEW_NAME,
            "createdAt": now,
            "updatedAt": now,
            "state": json.dumps(runs_view()),
        }
        client.set_experiment_tag(experiment.experiment_id, VIEW_TAG, json.dumps(envelope))


def runs_table_url(
    base: str, experiment: str = DEFAULT_EXPERIMENT, uri: str | None = None, app: bool = False
) -> str:
    """The link to ``experiment``'s runs in segrl's view (``base`` alone where the experiment does
    not exist yet; its runs logged without the labels the view groups by are given them,
    ``label_runs``): with ``app`` (a server with segrl's MLflow app) its page that opens the view,
    else MLflow's runs table in the classic pages, best boundary F1 first."""
    client = MlflowClient(uri or tracking_uri())
    found = client.get_experiment_by_name(experiment)
    if found is None:
        return base
    prepare_experiment_view(client, found)
    label_runs(client, found.experiment_id)
    if app:
        return base + VIEW_ROUTE.replace("<experiment_id>", found.experiment_id)
    return base + _runs_table_path(found.experiment_id)


def _runs_table_path(experiment_id: str) -> str:
    return f"/#/experiments/{experiment_id}/runs?{urllib.parse.urlencode({**CLASSIC, **ORDER})}"


def view_page(experiment_id: str) -> str:
    """The page ``VIEW_ROUTE`` serves: in the browser's local storage it sets segrl's view of the
    experiment's runs, unless this page set this view there before (a person's own changes stay;
    a view segrl has changed since replaces the older one, once), and the classic pages unless a
    choice is there; then it opens the runs table."""
    if not _EXPERIMENT_ID.fullmatch(experiment_id):
        raise ValueError(f"not an experiment ID: {experiment_id!r}")
    view = runs_view()
    table = {k: v for k, v in view.items() if not k.startswith("orderBy")}  # the order: in the link
    scope = json.dumps([experiment_id])
    settings = {
        "view": [
            f"MLflowLocalStorage-{_STORAGE_VERSION}-ExperimentPage-{scope}-ReactComponentState",
            table,
        ],
        "given": f"segrl.view_given.{_digest(table)}.{experiment_id}",
        "defaults": {
            "mlflow.workflowType_v1": CLASSIC["workflowType"],
            "mlflow.assistant.fab.autoOpenedOnFirstLoad_v1": True,
        },
        "next": _runs_table_path(experiment_id),
    }
    data = json.dumps(settings).replace("<", "\\u003c")
    return (
        "<!doctype html><meta charset=utf-8><title>segrl runs</title>"
        f"<p>Opening the runs of experiment {html.escape(experiment_id)}&hellip;</p>"
        "<script>const s = " + data + ";\n"
        "const store = window.localStorage;\n"
        "if (store.getItem(s.given) === null) {\n"
        "  const [key, view] = s.view;\n"
        "  const kept = JSON.parse(store.getItem(key) || '{}');\n"
        "  store.setItem(key, JSON.stringify({...kept, ...view}));\n"
        "  store.setItem(s.given, 'true');\n"
        "}\n"
        "for (const [key, value] of Object.entries(s.defaults)) {\n"
        "  if (store.getItem(key) === null) store.setItem(key, JSON.stringify(value));\n"
        "}\n"
        "window.location.replace(s.next);</script>"
    )


def _digest(view: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(view, sort_keys=True).encode()).hexdigest()[:12]


def create_app() -> Any:
    """segrl's MLflow app (``mlflow server --app-name segrl``): MLflow's own server with
    ``VIEW_ROUTE`` added; the ASGI app under uvicorn (MLflow's default), else the Flask app."""
    from flask import Response, abort
    from mlflow.environment_variables import _MLFLOW_SGI_NAME
    from mlflow.server import app as flask_app

    def page(experiment_id: str) -> Response:
        try:
            return Response(view_page(experiment_id), mimetype="text/html")
        except ValueError:
            abort(404)

    if "segrl_view" not in flask_app.view_functions:
        flask_app.add_url_rule(VIEW_ROUTE, "segrl_view", page)
    if _MLFLOW_SGI_NAME.get() == "uvicorn":
        from mlflow.server.fastapi_app import app

        return app
    return flask_app


def app_installed() -> bool:
    """Whether MLflow finds segrl's app (segrl installed with its entry points)."""
    return any(e.name == APP_NAME for e in importlib.metadata.entry_points(group="mlflow.app"))


def ui_command(
    host: str = "127.0.0.1", port: int = 5000, uri: str | None = None, app: bool = False
) -> list[str]:
    """The command that serves the MLflow UI on the same store as ``segrl``'s runs (``app``: with
    segrl's MLflow app), whatever folder it runs in: the store's path and the folder of artifacts
    uploaded through the UI (MLflow's ``./mlartifacts``) made absolute, from this working folder."""
    uri = uri or absolute_tracking_uri()
    command = python_command("-m", "mlflow", "ui", "--backend-store-uri", uri)
    command += ["--artifacts-destination", str(Path.cwd() / "mlartifacts")]
    command += ["--host", host, "--port", str(port)]
    return command + (["--app-name", APP_NAME] if app else [])


def run_ui(host: str = "127.0.0.1", port: int = 5000, experiment: str = DEFAULT_EXPERIMENT) -> int:
    """Serve the MLflow UI until interrupted (the same store ``segrl`` logs to), printing the link
    to ``experiment``'s runs."""
    uri = tracking_uri()
    if uri.startswith(("http://", "https://")):
        url = runs_table_url(uri.rstrip("/"), experiment, uri=uri)
        print(
            f"MLFLOW_TRACKING_URI points at a server already: open {url} (segrl's view of the "
            f"runs is '{VIEW_NAME}' in the runs table's Views menu)."
        )
        return 0
    ensure_reachable(uri)
    app = app_installed()
    if not app:
        print(
            "segrl's MLflow app is not installed, so the runs table opens with MLflow's own columns "
            f"(pick '{VIEW_NAME}' in its Views menu); reinstall segrl (pip install -e .) to open "
            "segrl's view directly.",
            file=sys.stderr,
        )
    base = f"http://{host}:{port}"
    url = runs_table_url(base, experiment, uri=uri, app=app)
    if url == base:
        print(
            f"no experiment '{experiment}' in {uri} yet: the link opens MLflow's list of "
            "experiments (name one with --experiment)",
            file=sys.stderr,
        )
    print(f"MLflow UI for {uri} (Ctrl-C stops it); the segrl runs: {url}", flush=True)
    # its own process group: the server and every worker it starts stop together. It runs in an
    # empty folder, so that nothing in the working folder is imported: not by the server (-P,
    # PYTHONSAFEPATH: segrl.processes), nor by its uvicorn workers, which put their own working
    # folder on their import path
    with tempfile.TemporaryDirectory(prefix="segrl-ui-") as empty:
        server = subprocess.Popen(
            ui_command(host, port, absolute_tracking_uri(), app),
            start_new_session=True,
            env=python_environment(),
            cwd=empty,
        )
        try:
            with handling(raise_interrupt, [signal.SIGTERM]):  # SIGTERM stops it as Ctrl-C does
                return server.wait()
        except KeyboardInterrupt:
            stop_process_group(server)
            return 0


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
