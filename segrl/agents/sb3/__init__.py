"""PPO with stable-baselines3 on ``CharSegment``: the segmenter policy inside SB3 (``policy``) and
the batched environment as SB3's ``VecEnv`` (``vec_env``); the ``segrl train --agent ppo`` job that
runs them is ``segrl.experiments.sb3_train``."""
