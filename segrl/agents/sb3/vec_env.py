"""The project's batched ``VectorCharSegmentEnv`` behind stable-baselines3's ``VecEnv`` API.

All episode slots live in one process and share one evaluator (and so one co-trained LM); SB3 sees
``num_envs`` environments. Semantics are SB3's: ``step_wait`` returns ``(obs, rewards, dones,
infos)``; where an episode ended, ``obs`` already holds the next episode's first observation and
``infos[i]["terminal_observation"]`` the last one of the finished episode, with ``infos[i]
["episode"]`` (return ``r``, length ``l``, seconds ``t``, as SB3's ``Monitor`` gives them, so that
``rollout/ep_rew_mean`` is logged) and ``infos[i]["segments"]``.

Attributes (``get_attr``) and methods (``env_method``) are those of this one object, shared by every
index; ``env_method("action_masks")`` gives each index its row, which is what ``MaskablePPO`` reads.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env import VecEnv

from segrl.envs.masks import position_rule_masks
from segrl.envs.vector import VectorCharSegmentEnv
from segrl.evaluators import SegmentationBatch

SLOT_ARRAYS = (
    "ids",
    "lengths",
    "decisions",
    "free_mask",
    "boundary_mask",
    "free_positions",
    "n_free",
    "cursor",
    "reward_start",
    "position",
)
"""``EpisodeSlots`` arrays that make up the episodes in progress (saved for an exact resume)."""


class SegmentVecEnv(VecEnv):
    """``VectorCharSegmentEnv`` as an SB3 ``VecEnv`` (see the module docstring).

    ``finished_batch``: after each step, the episodes that ended in it as a ``SegmentationBatch``
    (None if none did), for the evaluator's co-training step.
    """

    def __init__(self, env: VectorCharSegmentEnv):
        self.render_mode = None
        super().__init__(env.num_envs, env.single_observation_space, env.single_action_space)
        self.env = env
        self.finished_batch: SegmentationBatch | None = None
        self._actions: np.ndarray | None = None
        self._returns = np.zeros(env.num_envs)
        self._lengths = np.zeros(env.num_envs, dtype=np.int64)
        self._start = time.time()
        self._restored = False

    @property
    def evaluator(self):
        return self.env.evaluator

    # --- the VecEnv contract -------------------------------------------------------------------------
    def reset(self) -> dict[str, np.ndarray]:
        """New episodes in every slot; a seed given with ``seed()`` starts a new sentence order.
        The first reset after ``load_state_dict`` continues the restored episodes instead."""
        if self._restored:
            self._restored = False
            self._reset_seeds()
            self.reset_infos = [{} for _ in range(self.num_envs)]
            return self.env.observe()
        observation = self.env.reset(seed=self._seeds[0])
        self._reset_seeds()
        self._returns[:] = 0.0
        self._lengths[:] = 0
        self.reset_infos = [{} for _ in range(self.num_envs)]
        return observation

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions)

    def step_wait(self) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, list[dict]]:
        if self._actions is None:
            raise RuntimeError("step_wait() without step_async()")
        observation, rewards, dones, info = self.env.step(self._actions)
        self._actions = None
        self._returns += rewards
        self._lengths += 1
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        finished = np.flatnonzero(dones)
        for i in finished:
            infos[i] = {
                "terminal_observation": {k: v[i] for k, v in info["final_observation"].items()},
                "TimeLimit.truncated": False,
                "episode": {
                    "r": float(self._returns[i]),
                    "l": int(self._lengths[i]),
                    "t": round(time.time() - self._start, 6),
                },
                "segments": info["segments"][i],
            }
        self._returns[finished] = 0.0
        self._lengths[finished] = 0
        self.finished_batch = info["batch"].select(finished) if len(finished) else None
        return observation, rewards.astype(np.float32), dones.copy(), infos

    def close(self) -> None:
        self.env.close()

    def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
        return [getattr(self, attr_name)] * len(self._indices(indices))

    def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
        setattr(self, attr_name, value)

    def env_method(self, method_name: str, *args: Any, indices: Any = None, **kwargs: Any) -> list:
        """Call a method of this object; a result with one row per slot ([N, ...]) is split by
        index, anything else is given to every index."""
        result = getattr(self, method_name)(*args, **kwargs)
        rows = self._indices(indices)
        if isinstance(result, np.ndarray) and result.shape[:1] == (self.num_envs,):
            return [result[i] for i in rows]
        return [result] * len(rows)

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: Any = None) -> list[bool]:
        return [False] * len(self._indices(indices))

    def _indices(self, indices: Any) -> Sequence[int]:
        return list(self._get_indices(indices))

    # --- masks and state -----------------------------------------------------------------------------
    def action_masks(self) -> np.ndarray:
        """[N, A] bool: the actions allowed at each slot's current position (see ``segrl.envs.masks``)."""
        slots = self.env.slots
        return position_rule_masks(slots.texts, slots.current_position(), self.env.setup.n_actions)

    def state_dict(self) -> dict[str, Any]:
        """The sentence order, and the episodes in progress as they stand (decisions included)."""
        slots = self.env.slots
        return {
            "env": self.env.state_dict(),
            "slots": {name: getattr(slots, name).copy() for name in SLOT_ARRAYS},
            "texts": list(slots.texts),
            "returns": self._returns.copy(),
            "lengths": self._lengths.copy(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> dict[str, np.ndarray]:
        """Restore a ``state_dict`` exactly; returns the current observation (which the next
        ``reset`` returns too, so that SB3's ``learn`` continues the episodes in progress)."""
        self.env.load_state_dict(state["env"])
        slots = self.env.slots
        for name in SLOT_ARRAYS:
            setattr(slots, name, np.array(state["slots"][name]))
        slots.texts[:] = state["texts"]
        self._returns = np.array(state["returns"])
        self._lengths = np.array(state["lengths"])
        self._restored = True
        return self.env.observe()
