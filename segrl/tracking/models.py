"""A saved segmenter as the active run's MLflow model: MLflow's models from code are handed the
*file* ``segrl/pyfunc_model.py`` (copied into the model and run when it is loaded) with the
segmenter's folder as its ``segmenter`` artifact. This module names that file but never imports it:
the pyfunc class sits above the loader it calls, and the jobs that log their models sit below it.

A model travels with segrl itself: a wheel of the segrl that logged it (``segrl_wheel``) is its
``segrl_wheel`` artifact, and its ``requirements.txt`` finds segrl there at the wheel's exact
version (segrl's with the hash of its content as a local label), so that MLflow builds the model's
environment (``mlflow models serve``, ``mlflow models build-docker``) from the model alone, one
environment for each segrl code."""

from __future__ import annotations

import atexit
import base64
import functools
import hashlib
import importlib.metadata
import logging
import shutil
import tempfile
import tomllib
import zipfile
from pathlib import Path

import mlflow.pyfunc
from mlflow.utils.mlflow_tags import MLFLOW_RUN_NOTE

from segrl.errors import TrackingError
from segrl.model_files import MODEL_ARTIFACT, SEGMENTER_ARTIFACT
from segrl.tracking.runs import active_run_id
from segrl.tracking.tags import KIND_TAG, SEGMENTER_TAG
from segrl.version import __version__

PYFUNC_MODEL_FILE = Path(__file__).parents[1] / "pyfunc_model.py"
"""The file MLflow runs to load a logged segmenter (it hands ``SegmenterModel`` to MLflow)."""
WHEEL_ARTIFACT = "segrl_wheel"
"""The model's artifact that is segrl's wheel (``artifacts/segrl-VERSION-py3-none-any.whl``)."""


def log_segmenter_model(folder: str | Path, register: str | None = None) -> str:
    """Log the saved segmenter in ``folder`` as the active run's MLflow model (artifact path
    ``model``, with an input example and its signature; ``register``: also a new version of that
    registered model). Returns its URI, ``runs:/RUN_ID/model``.

    The model is named ``model`` in every run, not after its segmenter. In MLflow 3 a logged model's
    name is the path of its ``runs:/`` URI: ``runs:/RUN_ID/NAME`` is the logged model of that run
    whose name is ``NAME`` (``RunsArtifactRepository._get_logged_model_artifact_repo`` in
    ``mlflow/store/artifact/runs_artifact_repo.py`` searches the experiment's logged models with
    ``name = 'NAME'`` and keeps the run's). Named after its segmenter, a model would not be at
    ``runs:/RUN_ID/model`` for MLflow's own readers (``mlflow.pyfunc.load_model``, ``mlflow models
    serve -m``), and its URI could not be told from the run's ID alone: a logged model's name may
    hold none of ``/ : . % " '`` (``_validate_logged_model_name`` in
    ``mlflow/utils/validation.py``), which segmenter names do (a teacher's ``.../lm-viterbi``, a
    predictions file's name), so it would be a rewritten name. ``models:/MODEL_ID`` would work but
    is a new ID for each model, unlike ``runs:/RUN_ID/model``.

    So the MLflow UI's list of an experiment's models names each one ``model``, with its source run
    beside it, named as its segmenter (a segmenter run's name is its segmenter's). The model
    carries the run's ``segrl.segmenter`` and ``segrl.kind`` tags (set by ``log_segmenter`` before
    it; ``mlflow.search_logged_models`` filters on them, the UI does not show them) and a
    description that names the segmenter and its kind, on the model's page in the UI."""
    folder = Path(folder)
    with tempfile.TemporaryDirectory() as tmp:
        if folder.name != SEGMENTER_ARTIFACT:  # MLflow keeps an artifact folder's own name
            folder = Path(shutil.copytree(folder, Path(tmp) / SEGMENTER_ARTIFACT))
        _log_pyfunc(folder, register or None)  # "": not registered
    return f"runs:/{active_run_id()}/{MODEL_ARTIFACT}"


class _OwnWheelMismatch(logging.Filter):
    """Drops MLflow's warning that the model's segrl (its wheel's labelled version, ``0.1.0+<hash>``)
    is not the installed one (``0.1.0``) where segrl is the only mismatch: while segrl logs a model,
    the model's wheel is the code that is running."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if not message.startswith("Detected one or more mismatches"):
            return True
        mismatches = [line for line in message.splitlines() if line.startswith(" - ")]
        return not all(line.startswith(" - segrl (") for line in mismatches)


def _log_pyfunc(folder: Path, register: str | None) -> None:
    run_tags = mlflow.get_run(active_run_id()).data.tags
    wheel = segrl_wheel()
    checks = logging.getLogger("mlflow.utils.requirements_utils")  # MLflow's, as it logs a model
    own_wheel = _OwnWheelMismatch()
    checks.addFilter(own_wheel)
    try:
        mlflow.pyfunc.log_model(
            name=MODEL_ARTIFACT,
            python_model=str(PYFUNC_MODEL_FILE),
            artifacts={SEGMENTER_ARTIFACT: str(folder), WHEEL_ARTIFACT: str(wheel)},
            input_example=["unexpectedly", "the cats sat"],  # the signature: predict's hints
            pip_requirements=wheel_requirements(wheel),
            registered_model_name=register,
            tags=_model_tags(run_tags),
        )
    finally:
        checks.removeFilter(own_wheel)


def _model_tags(run_tags: dict[str, str]) -> dict[str, str]:
    """The logged model's tags: the run's ``SEGMENTER_TAG`` and ``KIND_TAG``, and a description
    (``mlflow.note.content``, the UI's on the model's page) that names the segmenter."""
    tags = {k: run_tags[k] for k in (SEGMENTER_TAG, KIND_TAG) if k in run_tags}
    if SEGMENTER_TAG in tags:
        kind = f" ({tags[KIND_TAG]})" if KIND_TAG in tags else ""
        tags[MLFLOW_RUN_NOTE] = f"segrl segmenter `{tags[SEGMENTER_TAG]}`{kind}"
    return tags


def wheel_requirements(wheel: Path) -> list[str]:
    """The model's requirements: segrl at exactly the version of its ``wheel``, found in the
    model's ``artifacts`` folder (pip reads a
    ``--find-links`` folder of a requirements file beside that file, wherever pip runs: MLflow's
    virtualenvs install from the model's folder, its Docker images from elsewhere).

    The version carries the wheel's content as a local label (``0.1.0+<hash>``): MLflow names a
    model's virtualenv by its requirements, so models logged by different segrl code get different
    environments, and models logged by the same code share one."""
    version = wheel.name.split("-")[1]
    return ["--find-links artifacts", f"segrl=={version}"]


@functools.cache
def segrl_wheel() -> Path:
    """A wheel of the segrl that runs: its package folder as it is now (a checkout's uncommitted
    changes included), its requirements as its ``pyproject.toml`` says (else as installed), pure
    Python (``py3-none-any``), its version segrl's with the hash of its content as a local label.
    Made once a process, in a temporary folder removed at exit."""
    folder = Path(tempfile.mkdtemp(prefix="segrl-wheel-"))
    atexit.register(shutil.rmtree, folder, True)
    return build_wheel(Path(__file__).resolve().parents[1], folder)


def build_wheel(package: Path, folder: Path) -> Path:
    """A pure-Python wheel of the segrl package folder ``package`` in ``folder``; its version is
    ``__version__`` with a local label, the first 12 hex digits of the SHA-256 of its files (names
    and bytes) and requirements: the same for the same code, different for any change."""
    files = {
        path.relative_to(package.parent).as_posix(): path.read_bytes()
        for path in sorted(package.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }
    requirements = _requirement_lines(package)
    content = hashlib.sha256("\n".join(requirements).encode())
    for name, data in files.items():
        content.update(f"{name}\0{len(data)}\0".encode())
        content.update(data)
    version = f"{__version__}+{content.hexdigest()[:12]}"
    info = f"segrl-{version}.dist-info"
    metadata = ["Metadata-Version: 2.1", "Name: segrl", f"Version: {version}"]
    files[f"{info}/METADATA"] = "\n".join([*metadata, *requirements]).encode() + b"\n"
    files[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: segrl\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    record = [f"{name},sha256={_digest(data)},{len(data)}" for name, data in files.items()]
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]).encode() + b"\n"
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"segrl-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as out:
        for name, data in files.items():
            out.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data)
    return wheel


def _requirement_lines(package: Path) -> list[str]:
    """``Requires-Dist`` and ``Provides-Extra`` lines: from the checkout's ``pyproject.toml`` beside
    the package, else from the installed segrl's metadata."""
    pyproject = package.parent / "pyproject.toml"
    project = tomllib.loads(pyproject.read_text())["project"] if pyproject.is_file() else {}
    if project.get("name") == "segrl":
        lines = [f"Requires-Dist: {r}" for r in project.get("dependencies", [])]
        for extra, requirements in project.get("optional-dependencies", {}).items():
            lines.append(f"Provides-Extra: {extra}")
            lines += [f'Requires-Dist: {r}; extra == "{extra}"' for r in requirements]
        return lines
    try:
        installed = importlib.metadata.metadata("segrl")
    except importlib.metadata.PackageNotFoundError:
        raise TrackingError(
            f"cannot make segrl's wheel for the model: {package} is neither in a checkout with its "
            "pyproject.toml nor installed (pip install segrl's folder)"
        ) from None
    return [
        *(f"Provides-Extra: {e}" for e in installed.get_all("Provides-Extra") or []),
        *(f"Requires-Dist: {r}" for r in installed.get_all("Requires-Dist") or []),
    ]


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
