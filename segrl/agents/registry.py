"""Training algorithms by name, and what each can do: ``segrl train --agent NAME`` dispatches here, and
``TrainConfig`` and the command line ask here, never by the agent's name, which table holds its
budget and options, whether its policy can read a teacher, and which gradients it takes.

Each entry names its job, a function ``train(config: TrainConfig, corpus=None, gold=None, on_step=None)
-> TrainResult``, by import path, so naming one does not import the others; the job is run by
``segrl.experiments.agent_train.train``, and the jobs live there too (``segrl.experiments``, above the
agents they train). The registry sits below the config (``segrl.agents.config`` imports it), so it
imports nothing of the agents.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Literal

from segrl.errors import ConfigError

AgentName = Literal["reinforce", "ppo", "ppo-batched"]
"""The names ``TrainConfig.agent`` may take, in the order of ``AGENTS``."""
AGENT_NAMES: tuple[str, ...] = typing.get_args(AgentName)


@dataclass(frozen=True)
class AgentSpec:
    """A training algorithm: its job and what it can do."""

    job: str
    """Its training job, ``"module:function"``."""
    table: str
    """The ``TrainConfig`` table of its options (``reinforce``, ``ppo``): their ``steps`` is the
    job's budget of updates (``TrainConfig.steps``), and the command line's flags of another table
    are refused with this agent (``segrl.cli.train.check_agent_flags``)."""
    reads_teacher: bool = False
    """Whether its policy can read the evaluator's boundary log-odds (``env.teacher_features``)."""
    per_action_gradients: bool = False
    """Whether it takes the gradients of ``reinforce.per_action_gradient`` other than ``sampled``
    (``expected``, ``forward-kl``), which need mirrored per-action rewards."""


AGENTS: dict[str, AgentSpec] = {
    "reinforce": AgentSpec(
        "segrl.experiments.agent_train:train_reinforce",
        table="reinforce",
        reads_teacher=True,
        per_action_gradients=True,
    ),
    "ppo": AgentSpec("segrl.experiments.sb3_train:train_ppo", table="ppo"),
    "ppo-batched": AgentSpec("segrl.experiments.agent_train:train_ppo_batched", table="ppo"),
}


def agent_spec(name: str) -> AgentSpec:
    """The registry's entry for the agent ``name``."""
    try:
        return AGENTS[name]
    except KeyError:
        raise ConfigError(f"unknown agent {name!r}; choose one of: {', '.join(AGENTS)}") from None


def agent_tables() -> tuple[str, ...]:
    """The ``TrainConfig`` tables of the agents' options, each once, in the registry's order."""
    return tuple(dict.fromkeys(spec.table for spec in AGENTS.values()))
