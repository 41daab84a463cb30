"""The tracking store: which one is in use, whether it answers, and its artifact folders.

The store is ``MLFLOW_TRACKING_URI`` when set, else ``sqlite:///<cwd>/mlflow.db`` with artifacts in
``<cwd>/mlruns``. ``ensure_reachable`` checks it answers (and creates a new sqlite store's tables
once) before anything trains; ``check_artifact_folder`` checks a local artifact folder can be
written before a run starts; ``download_artifacts`` fetches an artifact of it, ``download_model`` a
logged model.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import sqlite3
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from mlflow.tracking import MlflowClient

import mlflow
from segrl.errors import ModelError, TrackingError
from segrl.files import folder_problem
from segrl.model_files import MODEL_ARTIFACT

DEFAULT_EXPERIMENT = "segrl"
REACH_TIMEOUT_S = 5.0
DATABASE_SCHEMES = ("postgresql", "mysql", "mssql")
"""Database servers MLflow stores runs in (``postgresql+psycopg2://user@host/db``)."""
_created: set[str] = set()
"""The stores this process has checked (and created the tables of): they are not checked again."""
os.environ.setdefault(
    "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false"
)  # segrl shows its own progress

for _name in ("mlflow", "alembic"):
    logging.getLogger(_name).setLevel(logging.WARNING)
# MLflow logs each database error with its traceback before raising it again (with the same
# cause): segrl reports the raised one, in one line where it can (``store_write_failure``)
logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)


def tracking_uri() -> str:
    """The store in use: ``MLFLOW_TRACKING_URI`` if set, else ``sqlite:///<cwd>/mlflow.db``."""
    uri = os.environ.get("MLFLOW_TRACKING_URI", "").strip()
    return uri or f"sqlite:///{Path.cwd() / 'mlflow.db'}"


def absolute_tracking_uri() -> str:
    """The store's URI with a relative SQLite path made absolute (for processes started elsewhere)."""
    uri = tracking_uri()
    prefix = "sqlite:///"
    if uri.startswith(prefix) and not uri.startswith(prefix + "/"):
        return prefix + str(Path(uri[len(prefix) :]).resolve())
    return uri


MLFLOW_TABLES = frozenset({"experiments", "runs", "metrics", "latest_metrics", "params", "tags"})
"""Tables every MLflow sqlite store has once MLflow has created it (``alembic_version`` marks that):
a store without one of them is damaged, and MLflow answers it with pages of tracebacks."""


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
                    tables = {
                        name
                        for (name,) in conn.execute(
                            "select name from sqlite_master where type='table'"
                        )
                    }
            except sqlite3.OperationalError as e:
                if "locked" not in str(e):
                    raise TrackingError(
                        f"tracking store {db} is not a readable sqlite database ({e}); move it "
                        "aside or point MLFLOW_TRACKING_URI elsewhere"
                    ) from None
                raise TrackingError(
                    f"tracking store {db} is locked by another process writing to it; wait for it "
                    "and run the command again (moving the store aside would split its runs)"
                ) from None
            except sqlite3.DatabaseError as e:
                raise TrackingError(
                    f"tracking store {db} is not a readable sqlite database ({e}); move it aside "
                    "or point MLFLOW_TRACKING_URI elsewhere"
                ) from None
            missing = sorted(MLFLOW_TABLES - tables) if "alembic_version" in tables else []
            if missing:
                raise TrackingError(
                    f"tracking store {db} is damaged: MLflow's table {missing[0]} is missing; move "
                    "it aside (its runs are lost to MLflow) or point MLFLOW_TRACKING_URI elsewhere"
                )
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


def store_write_failure(error: BaseException | None) -> OSError | None:
    """The full disk behind ``error`` if the tracking store could not write for lack of space
    (SQLite's ``database or disk is full``, however MLflow and SQLAlchemy wrap it), as the
    ``OSError`` a full disk gives, naming the database file; else None."""
    while error is not None:
        code = getattr(error, "sqlite_errorcode", None)
        if (
            isinstance(error, sqlite3.Error)
            and code is not None
            and code & 0xFF == sqlite3.SQLITE_FULL
        ):
            uri = absolute_tracking_uri()
            return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), uri.removeprefix("sqlite:///"))
        error = error.__cause__ or error.__context__
    return None


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


def download_artifacts(uri: str) -> Path:
    """The local copy of an MLflow artifact (``runs:/``, ``models:/``, ...) of the store in use."""
    mlflow.set_tracking_uri(ensure_reachable())
    try:
        return Path(mlflow.artifacts.download_artifacts(artifact_uri=uri))
    except (mlflow.exceptions.MlflowException, OSError) as e:
        raise TrackingError(
            f"{uri}: cannot fetch it from {tracking_uri()} ({_reason(e)})"
        ) from None


MODEL_URI_CLIENTS = {
    "s3": "boto3 (pip install boto3)",
    "gs": "google-cloud-storage (pip install google-cloud-storage)",
    "wasbs": "the Azure client (pip install azure-storage-blob azure-identity)",
}
"""The packages MLflow reads a cloud store's URIs with, by scheme."""


def download_model(uri: str, into: Path | None = None) -> Path:
    """The logged model at ``uri`` (``runs:/RUN_ID/model``, ``models:/NAME/VERSION``; ``runs:/RUN_ID``
    alone means its ``model``), downloaded (MLflow's temporary folders made in ``into`` where given,
    else in the system's temporary folder)."""
    if uri.startswith("runs:/") and uri.rstrip("/").count("/") == 1:
        uri = f"{uri.rstrip('/')}/{MODEL_ARTIFACT}"
    system_temp = tempfile.tempdir
    tempfile.tempdir = str(into) if into else system_temp
    try:
        return download_artifacts(uri)
    except ImportError as e:  # the scheme's client (boto3, google-cloud-storage, ...) is missing
        scheme = uri.partition(":")[0]
        client = MODEL_URI_CLIENTS.get(scheme, f"the package that provides {e.name}")
        raise ModelError(
            f"{uri}: reading {scheme}: URIs needs {client}, which is not installed (no module "
            f"{e.name!r}); install it, or download the model and give its folder"
        ) from None
    finally:
        tempfile.tempdir = system_temp


def _reason(error: BaseException) -> str:
    reason = getattr(error, "reason", None)
    return str(reason or error)
