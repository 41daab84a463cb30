"""segrl: a workbench for discovering meaning-bearing units (morphemes, words) in raw character text.

Importing the package is cheap: heavy dependencies (torch, mlflow, the environments' code) load when
the module that needs them is imported. It registers the Gymnasium environments by entry-point
string (``segrl/CharSegment-v0``, ``segrl/SentenceSegment-v0``), so ``gymnasium.make`` finds them.
"""

import gymnasium

from segrl.errors import ConfigError, DataError, ModelError, SegrlError, TrackingError
from segrl.function_segmenter import FunctionSegmenter
from segrl.version import __version__

ENVIRONMENTS = {
    "segrl/CharSegment-v0": "segrl.envs.char_segment:CharSegmentEnv",
    "segrl/SentenceSegment-v0": "segrl.envs.sentence_segment:SentenceSegmentEnv",
}
VECTOR_ENVIRONMENTS = {
    "segrl/CharSegment-v0": "segrl.envs.vector:make_char_segment_vector",
    "segrl/SentenceSegment-v0": "segrl.envs.vector:make_sentence_segment_vector",
}
"""What ``gymnasium.make_vec`` builds: one batched environment (one process, one evaluator)."""
for _env_id, _entry_point in ENVIRONMENTS.items():
    if _env_id not in gymnasium.registry:
        gymnasium.register(
            id=_env_id, entry_point=_entry_point, vector_entry_point=VECTOR_ENVIRONMENTS[_env_id]
        )


def load_segmenter(source, device: str = "cpu"):  # noqa: ANN201 - see segrl.loading
    """A trained segmenter of any kind from a folder, an MLflow URI (``runs:/RUN_ID/model``,
    ``models:/NAME/VERSION``), a SentencePiece ``.model`` or a Morfessor segmentation file, with
    ``segment_words`` and ``segment_sentences`` (``segrl.loading.load_segmenter``)."""
    from segrl.loading import load_segmenter as load

    return load(source, device)


__all__ = [
    "ENVIRONMENTS",
    "ConfigError",
    "DataError",
    "FunctionSegmenter",
    "ModelError",
    "SegrlError",
    "TrackingError",
    "__version__",
    "load_segmenter",
]
