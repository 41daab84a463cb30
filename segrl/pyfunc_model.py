"""The MLflow ``pyfunc`` model of a trained segmenter, as MLflow's models-from-code loads it: this
file is copied into every logged model (``segrl.tracking.models.log_segmenter_model``) and run when
the model is loaded; the segmenter's own files are the model's ``segmenter`` artifact. The class
lives here, in the file handed to ``set_model``, above the loader it calls: tracking names this file
but never imports it."""

from typing import Any

import mlflow.models
import mlflow.pyfunc

from segrl.loading import load_segmenter
from segrl.model_files import SEGMENTER_ARTIFACT


class SegmenterModel(mlflow.pyfunc.PythonModel):
    """A trained segrl segmenter as an MLflow ``pyfunc`` model: ``predict(["unexpectedly"])`` gives
    ``[["un", "expected", "ly"]]``. A text with whitespace is a sentence: its segments have the
    spaces between words as segments of their own (``segment_sentences``)."""

    def load_context(self, context: Any) -> None:
        self.segmenter = load_segmenter(context.artifacts[SEGMENTER_ARTIFACT])

    def predict(self, context: Any, model_input: list[str], params: Any = None) -> list[list[str]]:
        sentences = [i for i, text in enumerate(model_input) if len(text.split()) > 1]
        chosen = set(sentences)
        out = self.segmenter.segment_words(
            ["" if i in chosen else text.strip() for i, text in enumerate(model_input)]
        )
        found = self.segmenter.segment_sentences([model_input[i] for i in sentences])
        for i, segments in zip(sentences, found, strict=True):
            out[i] = segments
        return out


mlflow.models.set_model(SegmenterModel())
