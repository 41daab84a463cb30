"""Runs and what they log: ``start_run`` checks the store is reachable before anything trains,
logs the run's full config (as params and as ``config.toml``; a job's resolved config, every option
a value, with the config as asked as ``requested.toml``), and marks the run FAILED if the job
raises, or KILLED (with one line naming the file) where a write fails for a full disk or an
unwritable folder, the store's included; a resumed run skips the metric steps it logged before it
was interrupted.

Runs of anything that finds units are tagged ``segrl.segmenter=<name>`` (``log_segmenter``) and log
the standard metric names of ``segrl.metrics`` (the scores to 4 decimals); ``segrl.tracking.queries``
reads them back.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import is_dataclass
from pathlib import Path
from typing import Any

from mlflow.tracking import MlflowClient

import mlflow
from segrl.config import flatten_config, save_config
from segrl.errors import TrackingError, WriteError
from segrl.files import write_failure, write_remedy
from segrl.metrics import BOUNDARY_F1, F1_BY_LENGTH, length_figure, rounded_scores
from segrl.tracking.store import (
    DEFAULT_EXPERIMENT,
    check_artifact_folder,
    ensure_reachable,
    local_folder,
    store_write_failure,
)
from segrl.tracking.tags import (
    CORPUS_FINGERPRINT_TAG,
    CORPUS_LANGUAGE_TAG,
    CORPUS_TAG,
    GOLD_COVERAGE_TAG,
    GOLD_FINGERPRINT_TAG,
    GOLD_LANGUAGE_TAG,
    GOLD_TAG,
    JOB_IDENTITY_SUFFIXES,
    KIND_TAG,
    SEGMENTER_TAG,
    extra_run_tags,
    gold_coverage,
    label_tags,
    source_tags,
    version_tags,
)
from segrl.tracking.ui import prepare_experiment_view

_project_run_id: str | None = None
"""The run ``mlflow run`` started for this process, once taken out of the environment."""
_logged: dict[str, int] = {}
"""The last step each metric of a resumed run was logged at before it was interrupted."""


@contextlib.contextmanager
def start_run(
    config: Any,
    experiment: str = DEFAULT_EXPERIMENT,
    run_name: str | None = None,
    tags: Mapping[str, str] | None = None,
    resume_run_id: str | None = None,
    nested: bool = False,
    requested: Any = None,
) -> Iterator[mlflow.ActiveRun]:
    """Start an MLflow run that logs ``config`` (a config dataclass or a flat dict), and
    ``requested``, the config as asked where ``config`` is its resolution, as ``requested.toml``.

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
    tags = {**version_tags(), **source_tags(), **extra, **(tags or {})}
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
            try:
                yield run
            except KeyboardInterrupt:  # as below
                end_run_killed()
                raise
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
        logging_config = True
        try:
            params = flatten_config(config) if is_dataclass(config) else dict(config)
            log_params(params)
            saved = {"config.toml": config, "requested.toml": requested}
            with tempfile.TemporaryDirectory() as tmp:
                for name, values in saved.items():
                    if is_dataclass(values):
                        mlflow.log_artifact(str(save_config(values, Path(tmp) / name)))
            logging_config = False
            yield run
        except (KeyboardInterrupt, WriteError):
            # Ctrl-C (or a stop signal raised as it), or a failed write a job or a nested run has
            # said already: this run ends KILLED, as the jobs end theirs
            end_run_killed()
            raise
        except Exception as e:  # MLflow's errors, OSError
            failure = write_failure(e) or store_write_failure(e)
            if failure is None or active_run_id() != run.info.run_id:
                raise  # not a failed write; or a job's, which ended the run and says so itself
            raise _killed_by(failure, uri, logging_config) from None


def _killed_by(failure: OSError, uri: str, logging_config: bool) -> WriteError:
    """End the active run KILLED after ``failure`` (a full disk, an unwritable folder: the
    artifact folder's or the store's), and the one line that says so: a job's own handling
    (``segrl.jobs``) has said it before this, with its checkpoint, where a job runs."""
    where = failure.filename or active_artifact_folder() or uri
    folder = where if os.path.isdir(where) else os.path.dirname(where)
    end_run_killed()
    what = "cannot log the run's config" if logging_config else "cannot write it"
    done = "nothing was run, and " if logging_config else ""
    return WriteError(
        f"{where}: {what} ({failure.strerror}); {done}the MLflow run ends KILLED. "
        f"{write_remedy(failure, folder).capitalize()} and run the same command again"
    )


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


def end_run_killed() -> None:
    """End the active run as KILLED (a job stopped by Ctrl-C, resumable), not FAILED. Where the
    store has no room left to record it, the run is let go as it is (RUNNING, until the command
    is run again and resumes it)."""
    if mlflow.active_run() is None:
        return
    try:
        mlflow.end_run(status="KILLED")  # no longer the active run, even where this fails
    except mlflow.exceptions.MlflowException as e:
        if store_write_failure(e) is None:
            raise


def log_params(params: Mapping[str, Any]) -> None:
    """Log params (options left unset, None, are left out: a job's resolved config has none,
    ``segrl.jobs``; long values truncated to MLflow's limit)."""
    items = {k: str(v)[:6000] for k, v in params.items() if v is not None}
    keys = list(items)
    for i in range(0, len(keys), 100):
        mlflow.log_params({k: items[k] for k in keys[i : i + 100]})


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
    (from ``segrl.metrics``; its scores rounded to 4 decimals, ``rounded_scores``: the digits past
    them are below a score's sampling error, and MLflow's tables show what was logged) and sample
    segmentations as text."""
    set_tags({SEGMENTER_TAG: name, KIND_TAG: kind})
    log_metrics(rounded_scores(metrics))
    if samples:
        log_text(samples, "samples.txt")
    by_length = {
        k.removeprefix(F1_BY_LENGTH): v for k, v in metrics.items() if k.startswith(F1_BY_LENGTH)
    }
    if by_length:
        log_figure(
            length_figure(name, by_length, metrics.get(BOUNDARY_F1)), "boundary_f1_by_length.png"
        )


def log_data(
    corpus: Any, gold_source: str | None = None, gold: Sequence[Any] | None = None
) -> None:
    """Record what the active run trained on and was scored against: the corpus's settings
    (``corpus.json``), and its source and the gold set's as tags with their fingerprints (hashes of
    the normalised text and of the gold analyses), languages and short labels (``label_tags``), the
    gold set's size (``GOLD_COVERAGE_TAG``: all of it is scored), and as MLflow dataset inputs."""
    from segrl.data.languages import corpus_language, gold_language

    log_dict(corpus.settings, "corpus.json")
    source = str(corpus.settings.get("source", "bundled"))
    tags = {
        CORPUS_TAG: source,
        CORPUS_FINGERPRINT_TAG: corpus.fingerprint,
        CORPUS_LANGUAGE_TAG: corpus_language(source),
    }
    inputs = [("corpus", source, corpus.fingerprint, "training")]
    if gold:  # none, or empty where the corpus's spaces are the gold (word discovery)
        from segrl.data.gold import BUNDLED_GOLD, gold_fingerprint

        label, digest = gold_source or f"bundled:{BUNDLED_GOLD}", gold_fingerprint(gold)
        tags.update(
            {
                GOLD_TAG: label,
                GOLD_FINGERPRINT_TAG: digest,
                GOLD_LANGUAGE_TAG: gold_language(label),
                GOLD_COVERAGE_TAG: gold_coverage(len(gold), len(gold)),
            }
        )
        inputs.append(("gold", label, digest, "evaluation"))
    set_tags({**tags, **label_tags(tags)})
    for name, where, digest, context in inputs:
        log_dataset_input(name, where, digest, context)


def log_dataset_input(name: str, where: str, digest: str, context: str) -> None:
    """An MLflow dataset input of the active run (the run page's *Datasets*): the file or folder
    ``where`` (``bundled:NAME``: one of the bundled data files), named ``name``, with ``digest`` (a
    fingerprint of its content) and ``context`` (``training``, ``evaluation``, ``predictions``);
    nothing where ``where`` is not one (``wordfreq:LANG``)."""
    path = Path(where)
    if where.startswith("bundled:"):
        path = Path(__file__).parents[1] / "data" / "bundled" / where.removeprefix("bundled:")
    if path.exists():
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


def active_artifact_folder() -> str | None:
    """The local folder of the active run's artifacts; None without one, or for a remote store."""
    run = mlflow.active_run()
    return None if run is None else local_folder(run.info.artifact_uri)
