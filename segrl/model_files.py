"""The names a saved segmenter is found by, below everything that writes or reads one: the file
that marks each kind's folder, the paths of a segmenter inside an MLflow model, and the URIs it is
logged under. The kinds save themselves (``segrl.baselines``, ``segrl.agents``, ...) and
``segrl.loading`` tells them apart by these names, so the names live here, where both can import
them."""

import os
from pathlib import Path

CLASSIC_META_FILE = "segmenter.json"
"""What marks a saved classic segmenter's folder (``segrl.baselines.Segmenter.save``)."""
AGENT_META_FILE = "agent_segmenter.json"
"""What marks a saved agent segmenter's folder (``segrl.agents.AgentSegmenter.save``)."""
MODEL_ARTIFACT = "model"
"""The artifact path of a run's MLflow model: ``runs:/RUN_ID/model``."""
SEGMENTER_ARTIFACT = "segmenter"
"""The name of the segmenter folder inside an MLflow model's artifacts."""
MLMODEL_FILE = "MLmodel"
"""What marks an MLflow model's folder; its segmenter is ``artifacts/segmenter`` beside it."""
MODEL_URI_SCHEMES = (
    "runs:",
    "models:",
    "mlflow-artifacts:",
    "s3:",
    "gs:",
    "wasbs:",
    "dbfs:",
    "file:",
)
"""The schemes of the MLflow URIs a logged model is read from (``runs:/RUN_ID/model``, ...)."""


def is_model_uri(source: str | Path) -> bool:
    """Whether ``source`` is an MLflow URI (``runs:/...``, ``models:/...``) rather than a path."""
    return str(source).startswith(MODEL_URI_SCHEMES) and not os.path.exists(source)


def logged_segmenter_folder(folder: Path) -> Path:
    """The segmenter folder of an MLflow model's folder (``artifacts/segmenter`` beside its
    ``MLmodel``); any other folder as it is."""
    if (folder / MLMODEL_FILE).exists():
        return folder / "artifacts" / SEGMENTER_ARTIFACT
    return folder
