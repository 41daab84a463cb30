"""MLflow set-up and logging helpers; the only module that imports mlflow.

The store is ``MLFLOW_TRACKING_URI`` when set, else ``sqlite:///<cwd>/mlflow.db`` with artifacts in
``<cwd>/mlruns``. ``start_run`` checks the store is reachable before anything trains, logs the run's
full config (as params and as ``config.toml``), and marks the run FAILED if the job raises.

Runs of anything that finds units are tagged ``segrl.segmenter=<name>`` and log the standard metric
names of ``segrl.metrics``; ``segmenter_runs`` reads them back for ``segrl compare``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import is_dataclass
from pathlib import Path
from typing import Any

import mlflow.pyfunc
from mlflow.tracking import MlflowClient

import mlflow
from segrl.config import flatten_config, save_config
from segrl.errors import TrackingError
from segrl.files import folder_problem
from segrl.metrics import BOUNDARY_F1, COMPARE_COLUMNS, F1_BY_LENGTH
from segrl.model_files import MODEL_ARTIFACT, SEGMENTER_ARTIFACT
from segrl.version import __version__

SEGMENTER_TAG = "segrl.segmenter"
KIND_TAG = "segrl.kind"
"""What produced a segmenter run: ``baseline``, ``agent``, ``units``."""
DEFAULT_EXPERIMENT = "segrl"
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
REACH_TIMEOUT_S = 5.0
_project_run_id: str | None = None
os.environ.setdefault(
    "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false"
)  # segrl shows its own progress

for _name in ("mlflow", "alembic"):
    logging.getLogger(_name).setLevel(logging.WARNING)


def tracking_uri() -> str:
    """The store in use: ``MLFLOW_TRACKING_URI`` if set, else ``sqlite:///<cwd>/mlflow.db``."""
    uri = os.environ.get("MLFLOW_TRACKING_URI", "").strip()
    return uri or f"sqlite:///{Path.cwd() / 'mlflow.db'}"


def ensure_reachable(uri: str | None = None) -> str:
    """Raise ``TrackingError`` unless the store at ``uri`` answers; returns the uri.

    HTTP servers get one quick health request (MLflow's own client would retry for minutes); a
    sqlite store must be a database file, or creatable, in a writable folder.
    """
    uri = uri or tracking_uri()
    if uri.startswith(("http://", "https://")):
        url = uri.rstrip("/") + "/health"
        try:
            with urllib.request.urlopen(url, timeout=REACH_TIMEOUT_S) as response:
                if response.status != 200:
                    raise TrackingError(
                        f"tracking server {uri} answered {response.status} to {url}"
                    )
        except (urllib.error.URLError, OSError, ValueError) as e:
            raise TrackingError(
                f"cannot reach the MLflow tracking server at {uri} ({_reason(e)}). Start it, fix "
                "MLFLOW_TRACKING_URI, or unset MLFLOW_TRACKING_URI to log to ./mlflow.db."
            ) from None
    elif uri.startswith("sqlite:///"):
        db = Path(uri.removeprefix("sqlite:///"))
        folder = db.parent if db.parent != Path("") else Path.cwd()
        if not folder.is_dir():
            raise TrackingError(f"tracking store {uri}: folder {folder} does not exist")
        if not os.access(folder, os.W_OK):
            raise TrackingError(f"tracking store {uri}: folder {folder} is not writable")
        if db.exists():
            try:
                with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
                    conn.execute("select name from sqlite_master limit 1").fetchall()
            except sqlite3.DatabaseError as e:
                raise TrackingError(
                    f"tracking store {db} is not a readable sqlite database ({e}); move it aside "
                    "or point MLFLOW_TRACKING_URI elsewhere"
                ) from None
            if not os.access(db, os.W_OK):
                raise TrackingError(
                    f"tracking store {db} is read-only; make it writable (chmod u+w) or point "
                    "MLFLOW_TRACKING_URI elsewhere"
                )
        _create_store_once(uri, db)
    elif uri.split(":", 1)[0].split("+", 1)[0] in DATABASE_SCHEMES and uri not in _created:
        try:  # a database server: reachable, with its driver installed (MLflow creates its tables)
            MlflowClient(uri).search_experiments(max_results=1)
        except ImportError as e:
            raise TrackingError(
                f"tracking store {uri}: its database driver is not installed ({e}); for PostgreSQL "
                "pip install psycopg2-binary (segrl's server extra) and use postgresql+psycopg2://"
            ) from None
        except Exception as e:  # SQLAlchemy's and MLflow's errors: the server or its database
            raise TrackingError(f"tracking store {uri}: cannot open it ({_reason(e)})") from None
        _created.add(uri)
    return uri


_created: set[str] = set()
DATABASE_SCHEMES = ("postgresql", "mysql", "mssql")
"""Database servers MLflow stores runs in (``postgresql+psycopg2://user@host/db``)."""


def _create_store_once(uri: str, db: Path) -> None:
    """Create the tables of a new sqlite store under a file lock: two commands starting at once on a
    new store would otherwise both create them, and one would fail (``table ... already exists``)."""
    if uri in _created:
        return
    import fcntl

    lock_path = db.with_name(f".{db.name}.lock")
    with open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            MlflowClient(uri).search_experiments(max_results=1)  # creates and migrates the tables
        except mlflow.exceptions.MlflowException as e:
            raise TrackingError(f"tracking store {uri}: cannot open it ({e})") from None
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    _created.add(uri)


@contextlib.contextmanager
def start_run(
    config: Any,
    experiment: str = DEFAULT_EXPERIMENT,
    run_name: str | None = None,
    tags: Mapping[str, str] | None = None,
    resume_run_id: str | None = None,
    nested: bool = False,
) -> Iterator[mlflow.ActiveRun]:
    """Start an MLflow run that logs ``config`` (a config dataclass or a flat dict).

    Inside ``mlflow run`` (``MLFLOW_RUN_ID`` set) every run becomes a child of the project's run, in
    its experiment, so a job that trains several segmenters logs one child run for each.

    With ``nested`` the run is a child of the active run (its segmenter is logged beside the
    active run's). With ``resume_run_id`` the run of that id continues (an interrupted job resuming from its
    checkpoint), wherever it was started; its config was logged then and is not logged again.
    """
    uri = ensure_reachable()
    mlflow.set_tracking_uri(uri)
    extra = extra_run_tags()
    if nested:  # another segmenter of the same job: not the one the job's own tags name
        extra = {k: v for k, v in extra.items() if not k.endswith(JOB_IDENTITY_SUFFIXES)}
    tags = {**version_tags(), **extra, **(tags or {})}
    if resume_run_id is not None:
        try:
            check_artifact_folder(MlflowClient(uri).get_run(resume_run_id).info.artifact_uri, uri)
            run = mlflow.start_run(run_id=resume_run_id, tags=dict(tags or {}))
        except mlflow.exceptions.MlflowException as e:
            raise TrackingError(
                f"tracking store {uri}: cannot continue run {resume_run_id} ({e}); resume with the store "
                "the run started in (MLFLOW_TRACKING_URI and the folder you run in)"
            ) from None
        with run:
            yield run
        return
    parent = project_run_id()
    if nested:  # a child of the active run, in its experiment (a teacher beside its student)
        active = mlflow.active_run()
        if active is None:
            raise TrackingError("a nested run needs an active run to nest in")
        parent, experiment_id = active.info.run_id, active.info.experiment_id
    try:
        if nested:
            found = mlflow.set_experiment(experiment_id=experiment_id)
        elif parent:
            parent_experiment = MlflowClient(uri).get_run(parent).info.experiment_id
            found = mlflow.set_experiment(experiment_id=parent_experiment)
        else:
            found = mlflow.set_experiment(experiment)
        prepare_experiment_view(MlflowClient(uri), found)
        check_artifact_folder(found.artifact_location, uri)
        run = mlflow.start_run(
            run_name=run_name, tags=dict(tags or {}), parent_run_id=parent, nested=nested
        )
    except mlflow.exceptions.MlflowException as e:
        raise TrackingError(f"tracking store {uri}: cannot start a run ({e})") from None
    with run:
        params = flatten_config(config) if is_dataclass(config) else dict(config)
        log_params(params)
        if is_dataclass(config):
            with tempfile.TemporaryDirectory() as tmp:
                mlflow.log_artifact(str(save_config(config, Path(tmp) / "config.toml")))
        yield run


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


def check_artifact_folder(location: str, uri: str) -> None:
    """Raise ``TrackingError`` if ``location`` (an experiment's or a run's artifact URI) is a local
    folder that cannot be written: checked before a run starts, so that no run is left FAILED."""
    folder = local_folder(location)
    if folder is None:
        return  # a remote artifact store (s3://, mlflow-artifacts:, ...) answers for itself
    problem = folder_problem(folder)
    if problem is not None:
        raise TrackingError(
            f"tracking store {uri}: cannot write its artifact folder {folder}: {problem}; make it "
            "writable or point MLFLOW_TRACKING_URI elsewhere"
        )


def local_folder(location: str) -> str | None:
    """The local folder an artifact URI (``file:`` or a path) stands for; None for a remote one."""
    parsed = urllib.parse.urlparse(location)
    if parsed.scheme not in ("", "file"):
        return None
    return urllib.parse.unquote(parsed.path) if parsed.scheme == "file" else location


def active_artifact_folder() -> str | None:
    """The local folder of the active run's artifacts; None without one, or for a remote store."""
    run = mlflow.active_run()
    return None if run is None else local_folder(run.info.artifact_uri)


@functools.cache
def version_tags() -> dict[str, str]:
    """``segrl.version``, and ``segrl.git_commit`` where segrl runs from a git checkout (with
    ``-dirty`` when it has uncommitted changes)."""
    tags = {"segrl.version": __version__}
    root = Path(__file__).resolve().parents[1]
    if (root / ".git").exists():
        try:
            commit = subprocess.run(
                ["git", "-C", str(root), "rev-parse", "HEAD"],
                capture_output=True, text=True, timeout=10, check=True,
            ).stdout.strip()  # fmt: skip
            dirty = subprocess.run(
                ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                capture_output=True, text=True, timeout=10, check=True,
            ).stdout.strip()  # fmt: skip
            tags["segrl.git_commit"] = commit + ("-dirty" if dirty else "")
        except (OSError, subprocess.SubprocessError):
            pass
    return tags


RUN_TAGS_VARIABLE = "SEGRL_RUN_TAGS"
"""A JSON object of tags that every run this process starts gets too (``segrl bench`` sets it for
its cells: language, system, seed, corpus and gold hashes)."""


JOB_IDENTITY_SUFFIXES = (".system", ".cell")
"""Tags of ``$SEGRL_RUN_TAGS`` that name the job's own segmenter (``segrl.bench.system``): a
nested run, another segmenter of the same job, does not take them."""


def extra_run_tags() -> dict[str, str]:
    """The tags of ``$SEGRL_RUN_TAGS`` (a JSON object), as strings; none when unset."""
    text = os.environ.get(RUN_TAGS_VARIABLE, "").strip()
    if not text:
        return {}
    try:
        tags = json.loads(text)
    except json.JSONDecodeError as e:
        raise TrackingError(f"${RUN_TAGS_VARIABLE} is not a JSON object of tags ({e})") from None
    if not isinstance(tags, dict):
        raise TrackingError(f"${RUN_TAGS_VARIABLE} must be a JSON object of tags")
    return {str(k): str(v) for k, v in tags.items()}


def end_run_killed() -> None:
    """End the active run as KILLED (a job stopped by Ctrl-C, resumable), not FAILED."""
    if mlflow.active_run() is not None:
        mlflow.end_run(status="KILLED")


def project_run_id() -> str | None:
    """The run ``mlflow run`` started for this process (from ``MLFLOW_RUN_ID``), if any.

    The variable is taken out of the environment: MLflow would otherwise resume that run instead of
    starting a child.
    """
    global _project_run_id
    run_id = os.environ.pop("MLFLOW_RUN_ID", None)
    if run_id:
        _project_run_id = run_id
    return _project_run_id


def log_params(params: Mapping[str, Any]) -> None:
    """Log params (unset options, None, are left out; long values truncated to MLflow's limit)."""
    items = {k: str(v)[:6000] for k, v in params.items() if v is not None}
    keys = list(items)
    for i in range(0, len(keys), 100):
        mlflow.log_params({k: items[k] for k in keys[i : i + 100]})


_logged: dict[str, int] = {}
"""The last step each metric of a resumed run was logged at before it was interrupted."""


def log_metrics(metrics: Mapping[str, float], step: int | None = None) -> None:
    """Log numeric metrics at ``step`` (non-finite values are logged as they are). In a resumed run,
    a metric is not logged again at a step it was logged at before the interruption (the steps
    between the last checkpoint and a crash are trained twice, and logged once)."""
    values = {k: float(v) for k, v in metrics.items() if step is None or step > _logged.get(k, -1)}
    if values:
        mlflow.log_metrics(values, step=step)


@contextlib.contextmanager
def resuming(run_id: str) -> Iterator[None]:
    """Inside it, ``log_metrics`` skips the steps the run ``run_id`` logged before it was interrupted."""
    client = MlflowClient(mlflow.get_tracking_uri())
    _logged.clear()
    for key in client.get_run(run_id).data.metrics:
        history = client.get_metric_history(run_id, key)
        _logged[key] = max((m.step for m in history), default=-1)
    try:
        yield
    finally:
        _logged.clear()


def set_tags(tags: Mapping[str, str]) -> None:
    mlflow.set_tags(dict(tags))


def log_text(text: str, artifact_file: str) -> None:
    mlflow.log_text(text, artifact_file)


def log_dict(data: Mapping[str, Any], artifact_file: str) -> None:
    mlflow.log_dict(dict(data), artifact_file)


def log_table(rows: Sequence[Mapping[str, Any]], artifact_file: str) -> None:
    """Log rows (dicts with the same keys) as an MLflow table artifact (``.json``), viewable in the UI."""
    columns = list(rows[0]) if rows else []
    mlflow.log_table({c: [row.get(c) for row in rows] for c in columns}, artifact_file)


def log_figure(figure: Any, artifact_file: str) -> None:
    """Log a matplotlib figure as an image and close it."""
    import matplotlib.pyplot as plt

    mlflow.log_figure(figure, artifact_file)
    plt.close(figure)


def log_artifact(path: str | Path, artifact_path: str | None = None) -> None:
    """Log a file or folder (checkpoints, saved models)."""
    path = Path(path)
    if path.is_dir():
        mlflow.log_artifacts(str(path), artifact_path)
    else:
        mlflow.log_artifact(str(path), artifact_path)


def log_segmenter(name: str, kind: str, metrics: Mapping[str, float], samples: str = "") -> None:
    """Register the active run as a segmenter for ``segrl compare``: its tag, its standard metrics
    (from ``segrl.metrics``) and sample segmentations as text."""
    set_tags({SEGMENTER_TAG: name, KIND_TAG: kind})
    log_metrics(metrics)
    if samples:
        log_text(samples, "samples.txt")
    by_length = {
        k.removeprefix(F1_BY_LENGTH): v for k, v in metrics.items() if k.startswith(F1_BY_LENGTH)
    }
    if by_length:
        log_figure(
            length_figure(name, by_length, metrics.get(BOUNDARY_F1)), "boundary_f1_by_length.png"
        )


def length_figure(name: str, by_length: Mapping[str, float], overall: float | None) -> Any:
    """Bars of boundary F1 by gold word length, with the overall F1 as a line."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(5, 3.2), dpi=100)
    axes = figure.subplots()
    axes.bar(list(by_length), list(by_length.values()), color="#4477aa")
    if overall is not None:
        axes.axhline(overall, color="#cc6677", linestyle="--", label=f"all words: {overall:.3f}")
        axes.legend(loc="upper left", frameon=False)
    axes.set_ylim(0, 1)
    axes.set_xlabel("gold word length (characters)")
    axes.set_ylabel("boundary F1")
    axes.set_title(name)
    figure.tight_layout()
    return figure


def log_segmenter_model(folder: str | Path, register: str | None = None) -> str:
    """Log the saved segmenter in ``folder`` as the active run's MLflow model (artifact path
    ``model``, with an input example and its signature; ``register``: also a new version of that
    registered model). Returns its URI, ``runs:/RUN_ID/model``."""
    folder = Path(folder)
    with tempfile.TemporaryDirectory() as tmp:
        if folder.name != SEGMENTER_ARTIFACT:  # MLflow keeps an artifact folder's own name
            folder = Path(shutil.copytree(folder, Path(tmp) / SEGMENTER_ARTIFACT))
        _log_pyfunc(folder, register)
    return f"runs:/{active_run_id()}/{MODEL_ARTIFACT}"


def _log_pyfunc(folder: Path, register: str | None) -> None:
    mlflow.pyfunc.log_model(
        name=MODEL_ARTIFACT,
        python_model=str(Path(__file__).with_name("pyfunc_model.py")),
        artifacts={SEGMENTER_ARTIFACT: str(folder)},
        input_example=["unexpectedly", "the cats sat"],  # the signature comes from predict's hints
        pip_requirements=[f"segrl=={__version__}"],
        registered_model_name=register,
    )


def download_artifacts(uri: str) -> Path:
    """The local copy of an MLflow artifact (``runs:/``, ``models:/``, ...) of the store in use."""
    mlflow.set_tracking_uri(ensure_reachable())
    try:
        return Path(mlflow.artifacts.download_artifacts(artifact_uri=uri))
    except (mlflow.exceptions.MlflowException, OSError) as e:
        raise TrackingError(
            f"{uri}: cannot fetch it from {tracking_uri()} ({_reason(e)})"
        ) from None


CORPUS_TAG, CORPUS_FINGERPRINT_TAG = "segrl.corpus", "segrl.corpus_fingerprint"
GOLD_TAG, GOLD_FINGERPRINT_TAG = "segrl.gold", "segrl.gold_fingerprint"


def log_data(
    corpus: Any, gold_source: str | None = None, gold: Sequence[Any] | None = None
) -> None:
    """Record what the active run trained on and was scored against: the corpus's settings
    (``corpus.json``), and its source and the gold set's as tags with their fingerprints (hashes of
    the normalised text and of the gold analyses) and as MLflow dataset inputs."""
    log_dict(corpus.settings, "corpus.json")
    source = str(corpus.settings.get("source", "bundled"))
    tags = {CORPUS_TAG: source, CORPUS_FINGERPRINT_TAG: corpus.fingerprint}
    inputs = [("corpus", source, corpus.fingerprint, "training")]
    if gold is not None:
        from segrl.data.gold import BUNDLED_GOLD, gold_fingerprint

        label, digest = gold_source or f"bundled:{BUNDLED_GOLD}", gold_fingerprint(gold)
        tags.update({GOLD_TAG: label, GOLD_FINGERPRINT_TAG: digest})
        inputs.append(("gold", label, digest, "evaluation"))
    set_tags(tags)
    for name, where, digest, context in inputs:
        path = Path(where)
        if where.startswith("bundled:"):
            path = Path(__file__).with_name("data") / "bundled" / where.removeprefix("bundled:")
        if path.exists():  # a file or folder (not wordfreq:LANG): an MLflow dataset input too
            import warnings

            from mlflow.data.dataset_source_registry import resolve_dataset_source
            from mlflow.data.meta_dataset import MetaDataset

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                found = resolve_dataset_source(str(path.resolve()))
            mlflow.log_input(MetaDataset(found, name=name, digest=digest), context=context)


def active_run_id() -> str | None:
    run = mlflow.active_run()
    return run.info.run_id if run else None


def segmenter_runs(experiment: str = DEFAULT_EXPERIMENT, latest_only: bool = True) -> list[dict]:
    """Finished segmenter runs of ``experiment``, newest first: one dict per run with ``segmenter``,
    ``kind``, ``corpus`` and ``gold`` (what it was trained on and scored against), ``run_name``,
    ``run_id``, ``start_time`` and every metric of ``COMPARE_COLUMNS`` it logged. With
    ``latest_only`` only the newest run of each segmenter on each (corpus, gold) is kept."""
    uri = ensure_reachable()
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        raise TrackingError(
            f"no experiment named {experiment!r} in {uri}; run `segrl baseline` first, or pass "
            "--experiment (and check MLFLOW_TRACKING_URI and the folder you run in)"
        )
    rows: list[dict] = []
    seen: set[tuple[str, str, str]] = set()
    runs = client.search_runs(
        [exp.experiment_id],
        filter_string="attributes.status = 'FINISHED'",
        order_by=["attributes.start_time DESC"],
        max_results=10_000,
    )
    for run in runs:
        name = run.data.tags.get(SEGMENTER_TAG)
        corpus, gold = run_data_labels(run.data.params, run.data.tags.get(KIND_TAG, ""))
        if not name or (latest_only and (name, corpus, gold) in seen):
            continue
        seen.add((name, corpus, gold))
        metrics = {k: run.data.metrics[k] for k in COMPARE_COLUMNS if k in run.data.metrics}
        rows.append(
            {
                "segmenter": name,
                "corpus": corpus,
                "gold": gold,
                "kind": run.data.tags.get(KIND_TAG, ""),
                "run_name": run.info.run_name,
                "run_id": run.info.run_id,
                "start_time": run.info.start_time,
                **metrics,
            }
        )
    return rows


def run_data_labels(params: Mapping[str, str], kind: str) -> tuple[str, str]:
    """(corpus, gold) of a run, from the options it logged: the corpus (with its size and format
    options where they are not the defaults) and the gold file (with its sample size)."""
    if kind == "evaluated":  # scored after the fact: its training corpus is not known here
        corpus = "(scored by segrl evaluate)"
    else:
        corpus = _unset(params.get("data.corpus")) or "bundled"
        for key, label in (("data.max_sentences", "sentences"), ("data.max_words", "words")):
            if _unset(params.get(key)):
                corpus += f" ({label} {params[key]})"
    gold = _unset(params.get("gold.path")) or "bundled"
    if _unset(params.get("gold.max_words")):
        gold += f" ({params['gold.max_words']} words)"
    return corpus, gold


def _unset(value: str | None) -> str | None:
    """A logged option's value; None for one left unset (older runs logged the string "None")."""
    return None if value in (None, "", "None") else value


def finished_run_with_tag(
    parent_run_id: str, key: str, value: str, metrics: Sequence[str], uri: str | None = None
) -> dict[str, Any] | None:
    """The newest finished child run of ``parent_run_id`` whose tag ``key`` is ``value``, in the
    store at ``uri`` (default: the one in use): its ``run_id`` and the named ``metrics`` it logged;
    None where there is none."""
    client = MlflowClient(ensure_reachable(uri))
    experiment = client.get_run(parent_run_id).info.experiment_id
    runs = client.search_runs(
        [experiment],
        filter_string=(
            f"tags.`mlflow.parentRunId` = '{parent_run_id}' and tags.`{key}` = '{value}' "
            "and attributes.status = 'FINISHED'"
        ),
        order_by=["attributes.start_time DESC"],
        max_results=1,
    )
    if not runs:
        return None
    logged = runs[0].data.metrics
    return {"run_id": runs[0].info.run_id, **{m: logged[m] for m in metrics if m in logged}}


def absolute_tracking_uri() -> str:
    """The store's URI with a relative SQLite path made absolute (for processes started elsewhere)."""
    uri = tracking_uri()
    prefix = "sqlite:///"
    if uri.startswith(prefix) and not uri.startswith(prefix + "/"):
        return prefix + str(Path(uri[len(prefix) :]).resolve())
    return uri


def format_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """A plain-text table; floats with 3 decimals, missing values as ``-``."""

    def cell(value: Any) -> str:
        if value is None:
            return "-"
        if isinstance(value, float):
            return f"{value:.3f}"
        return str(value)

    table = [list(columns)] + [[cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(columns))]
    lines = [
        "  ".join(
            v.ljust(w) if i == 0 else v.rjust(w)
            for i, (v, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in table
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def metric_histories(
    runs: Sequence[str], metrics: Sequence[str], experiment: str | None = None
) -> dict[str, dict[str, dict[int, float]]]:
    """``{run: {metric: {step: value}}}`` for each of ``runs`` (a run ID, or a run name: the newest run
    of that name, in ``experiment`` or in any experiment) and each of ``metrics`` it logged (a metric
    it never logged maps to ``{}``). A run that is not in the store is a ``TrackingError``."""
    uri = ensure_reachable()
    client = MlflowClient(uri)
    if experiment is None:
        experiments = [e.experiment_id for e in client.search_experiments()]
    else:
        found = client.get_experiment_by_name(experiment)
        if found is None:
            raise TrackingError(f"no experiment named {experiment!r} in {uri}")
        experiments = [found.experiment_id]
    histories: dict[str, dict[str, dict[int, float]]] = {}
    for run in runs:
        run_id = _find_run(client, run, experiments)
        if run_id is None:
            raise TrackingError(
                f"no run named {run!r} (nor with that ID) in {uri}"
                + (f", experiment {experiment!r}" if experiment else "")
                + "; `segrl compare` lists the runs (its run_id column), the MLflow UI their names"
            )
        histories[run] = {
            m: {point.step: point.value for point in client.get_metric_history(run_id, m)}
            for m in metrics
        }
    return histories


def _find_run(client: MlflowClient, run: str, experiments: Sequence[str]) -> str | None:
    """The ID of the newest run named ``run`` in ``experiments``, else of the run with ID ``run``."""
    quoted = run.replace("'", "\\'")
    named = client.search_runs(
        list(experiments),
        filter_string=f"attributes.run_name = '{quoted}'",
        order_by=["attributes.start_time DESC"],
        max_results=1,
    )
    if named:
        return named[0].info.run_id
    try:
        found = client.get_run(run)
    except mlflow.exceptions.MlflowException:
        return None
    return found.info.run_id if found.info.experiment_id in experiments else None


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


def _reason(error: BaseException) -> str:
    reason = getattr(error, "reason", None)
    return str(reason or error)
