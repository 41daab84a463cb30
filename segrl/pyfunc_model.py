"""The MLflow ``pyfunc`` model of a trained segmenter, as MLflow's models-from-code loads it: this
file is copied into every logged model (``segrl.tracking.log_segmenter_model``) and run when the
model is loaded; the segmenter's own files are the model's ``segmenter`` artifact."""

import mlflow.models

from segrl.tracking import SegmenterModel

mlflow.models.set_model(SegmenterModel())
