"""A saved segmenter as the active run's MLflow model: MLflow's models from code are handed the
*file* ``segrl/pyfunc_model.py`` (copied into the model and run when it is loaded) with the
segmenter's folder as its ``segmenter`` artifact. This module names that file but never imports it:
the pyfunc class sits above the loader it calls, and the jobs that log their models sit below it."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import mlflow.pyfunc

from segrl.model_files import MODEL_ARTIFACT, SEGMENTER_ARTIFACT
from segrl.tracking.runs import active_run_id
from segrl.tracking.tags import KIND_TAG, SEGMENTER_TAG
from segrl.version import __version__

PYFUNC_MODEL_FILE = Path(__file__).parents[1] / "pyfunc_model.py"
"""The file MLflow runs to load a logged segmenter (it hands ``SegmenterModel`` to MLflow)."""


def log_segmenter_model(folder: str | Path, register: str | None = None) -> str:
    """Log the saved segmenter in ``folder`` as the active run's MLflow model (artifact path
    ``model``, with an input example and its signature; ``register``: also a new version of that
    registered model). Returns its URI, ``runs:/RUN_ID/model``.

    The model is named ``model`` in every run: MLflow finds ``runs:/RUN_ID/model`` by the name of
    the run's logged model. It carries the run's ``segrl.segmenter`` and ``segrl.kind`` tags (set by
    ``log_segmenter`` before it), which name it in the MLflow UI's models."""
    folder = Path(folder)
    with tempfile.TemporaryDirectory() as tmp:
        if folder.name != SEGMENTER_ARTIFACT:  # MLflow keeps an artifact folder's own name
            folder = Path(shutil.copytree(folder, Path(tmp) / SEGMENTER_ARTIFACT))
        _log_pyfunc(folder, register)
    return f"runs:/{active_run_id()}/{MODEL_ARTIFACT}"


def _log_pyfunc(folder: Path, register: str | None) -> None:
    run_tags = mlflow.get_run(active_run_id()).data.tags
    mlflow.pyfunc.log_model(
        name=MODEL_ARTIFACT,
        python_model=str(PYFUNC_MODEL_FILE),
        artifacts={SEGMENTER_ARTIFACT: str(folder)},
        input_example=["unexpectedly", "the cats sat"],  # the signature comes from predict's hints
        pip_requirements=[f"segrl=={__version__}"],
        registered_model_name=register,
        tags={k: run_tags[k] for k in (SEGMENTER_TAG, KIND_TAG) if k in run_tags},
    )
