"""Observation and action spaces of the segmentation environments: fixed-shape arrays only, so that
stable-baselines3's ``MultiInputPolicy`` and any batched agent can read them unchanged."""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from segrl.envs.episodes import TEACHER_LIMIT, EpisodeSlots
from segrl.envs.setup import EnvSetup


def char_observation_space(setup: EnvSetup) -> spaces.Dict:
    """``chars`` [L], ``length`` [1], ``position`` [1], ``decisions`` [P], with teacher features
    ``teacher`` [P] (see ``CharSegmentEnv``)."""
    width = setup.max_len
    return spaces.Dict(
        {
            "chars": spaces.Box(0, setup.vocab_size - 1, shape=(width,), dtype=np.int64),
            "length": spaces.Box(2, width, shape=(1,), dtype=np.int64),
            "position": spaces.Box(0, width - 1, shape=(1,), dtype=np.int64),
            "decisions": spaces.Box(0, setup.n_actions - 1, shape=(width - 1,), dtype=np.int64),
            **teacher_space(setup),
        }
    )


def sentence_observation_space(setup: EnvSetup) -> spaces.Dict:
    """``chars`` [L], ``length`` [1], ``free`` [P], with teacher features ``teacher`` [P] (see
    ``SentenceSegmentEnv``)."""
    width = setup.max_len
    return spaces.Dict(
        {
            "chars": spaces.Box(0, setup.vocab_size - 1, shape=(width,), dtype=np.int64),
            "length": spaces.Box(2, width, shape=(1,), dtype=np.int64),
            "free": spaces.MultiBinary(width - 1),
            **teacher_space(setup),
        }
    )


def teacher_space(setup: EnvSetup) -> dict[str, spaces.Box]:
    """``{"teacher": Box [P]}`` with ``EnvConfig.teacher_features``, else nothing."""
    if not setup.config.teacher_features:
        return {}
    shape = (setup.max_len - 1,)
    return {"teacher": spaces.Box(-TEACHER_LIMIT, TEACHER_LIMIT, shape=shape, dtype=np.float32)}


def sentence_action_space(setup: EnvSetup) -> spaces.Space:
    """One action per position: ``MultiBinary(P)``, or ``MultiDiscrete([5] * P)`` with all rules."""
    if setup.n_actions == 2:
        return spaces.MultiBinary(setup.max_len - 1)
    return spaces.MultiDiscrete(np.full(setup.max_len - 1, setup.n_actions, dtype=np.int64))


def char_observation(slots: EpisodeSlots) -> dict[str, np.ndarray]:
    """[N, ...] arrays of every slot (fresh copies)."""
    return {
        "chars": slots.ids.copy(),
        "length": slots.lengths[:, None].copy(),
        "position": slots.current_position()[:, None],
        "decisions": slots.decisions.copy(),
        **teacher_observation(slots),
    }


def sentence_observation(slots: EpisodeSlots) -> dict[str, np.ndarray]:
    """[N, ...] arrays of every slot (fresh copies)."""
    return {
        "chars": slots.ids.copy(),
        "length": slots.lengths[:, None].copy(),
        "free": slots.free_mask.astype(np.int8),
        **teacher_observation(slots),
    }


def teacher_observation(slots: EpisodeSlots) -> dict[str, np.ndarray]:
    """``{"teacher": [N, P]}`` with ``EnvConfig.teacher_features``, else nothing."""
    if not slots.setup.config.teacher_features:
        return {}
    return {"teacher": slots.teacher.copy()}


def first(observation: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Slot 0 of a batched observation (what a single environment returns)."""
    return {key: value[0] for key, value in observation.items()}
