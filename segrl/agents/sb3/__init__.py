"""PPO with stable-baselines3 on ``CharSegment``: the job (``train``), the segmenter policy inside
SB3 (``policy``), and the batched environment as SB3's ``VecEnv`` (``vec_env``)."""
