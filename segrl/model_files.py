"""The names a saved segmenter is found by, below everything that writes or reads one: the file
that marks each kind's folder, and the paths of a segmenter inside an MLflow model. The kinds save
themselves (``segrl.baselines``, ``segrl.agents``, ...) and ``segrl.loading`` tells them apart by
these names, so the names live here, where both can import them."""

CLASSIC_META_FILE = "segmenter.json"
"""What marks a saved classic segmenter's folder (``segrl.baselines.Segmenter.save``)."""
AGENT_META_FILE = "agent_segmenter.json"
"""What marks a saved agent segmenter's folder (``segrl.agents.AgentSegmenter.save``)."""
MODEL_ARTIFACT = "model"
"""The artifact path of a run's MLflow model: ``runs:/RUN_ID/model``."""
SEGMENTER_ARTIFACT = "segmenter"
"""The name of the segmenter folder inside an MLflow model's artifacts."""
