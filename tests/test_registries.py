"""The agent and LM reward registries: what an entry declares is what the config, the command line
and the job dispatch do with it, whatever its name."""

from dataclasses import replace

import pytest

from segrl.agents import TrainConfig
from segrl.agents.config import can_read_teacher
from segrl.agents.registry import AGENTS, AgentSpec
from segrl.cli import build_parser
from segrl.cli.train import check_agent_flags
from segrl.errors import ConfigError
from segrl.evaluators.registry import LM_REWARDS
from segrl.experiments.agent_train import train

CALLS = []


def train_toy(config, **options):
    """The job of the agent ``toy`` the tests register: it records what it was given."""
    CALLS.append((config.agent, config.steps, options))
    return "trained"


@pytest.fixture
def toy(monkeypatch):
    """An agent registered as the recipe in docs/architecture.md adds one: its options in PPO's
    table, a policy that reads its teacher, no per-action gradients of its own."""
    spec = AgentSpec(f"{__name__}:train_toy", table="ppo", reads_teacher=True)
    monkeypatch.setitem(AGENTS, "toy", spec)
    return spec


def test_a_registered_agent_gets_its_own_budget_not_reinforce_s(toy):
    config = TrainConfig(agent="toy")
    config.reinforce.steps, config.ppo.steps = 99, 7
    assert config.steps == 7
    config.agent = "reinforce"
    assert config.steps == 99


def test_a_registered_agent_reads_its_own_table_s_flags(toy):
    parser = build_parser()
    check_agent_flags(parser.parse_args(["train", "--ppo-steps", "3"]), "toy")
    with pytest.raises(
        ConfigError, match=r"^--agent toy does not read --steps \(flags of reinforce"
    ):
        check_agent_flags(parser.parse_args(["train", "--steps", "3"]), "toy")


def test_a_registered_agent_s_capabilities_are_what_it_declares(toy):
    config = TrainConfig(agent="toy")
    config.evaluator.name = "lm"
    config.env.teacher_features = True
    config.check("")  # it declares a policy that reads its teacher
    assert can_read_teacher(config)
    config.agent = "ppo"
    with pytest.raises(ConfigError, match="env.teacher_features"):
        config.check("")
    assert not can_read_teacher(config)

    # REINFORCE's expected gradient needs mirrored rewards; an agent that does not take it is not
    # asked for them
    config = TrainConfig(agent="reinforce")
    config.evaluator.name, config.evaluator.lm.reward_variant = "lm", "resample"
    config.reinforce.per_action_gradient = "expected"
    with pytest.raises(ConfigError, match="needs binary rules and per-action rewards"):
        config.check("")
    config.agent = "toy"
    config.check("")


def test_train_runs_the_registered_agent_s_job(toy):
    CALLS.clear()
    config = TrainConfig(agent="toy")
    config.ppo.steps = 5
    assert train(config, on_step=None) == "trained"
    assert CALLS == [("toy", 5, {"on_step": None})]


def test_an_unknown_agent_is_refused_with_the_registered_names():
    with pytest.raises(ConfigError, match="unknown agent 'nope'; choose one of: reinforce, ppo"):
        TrainConfig(agent="nope").steps  # noqa: B018 - the property is the check


def test_the_config_reads_a_reward_s_capabilities_from_the_registry(monkeypatch):
    """Whether REINFORCE fits a reward by the forward KL by default, and whether it may take the
    expectation over both actions, are the reward's entry, not its name."""
    config = TrainConfig()
    config.evaluator.name, config.evaluator.lm.reward_variant = "lm", "flip"
    assert config.per_action_gradient() == "sampled"
    config.evaluator.lm.reward_variant = "posterior"
    assert config.per_action_gradient() == "forward-kl"
    config.evaluator.lm.reward_variant = "flip"
    monkeypatch.setitem(LM_REWARDS, "flip", replace(LM_REWARDS["flip"], forward_kl=True))
    assert config.per_action_gradient() == "forward-kl"

    config.evaluator.lm.reward_variant = "resample"
    assert not config.evaluator.mirrored_action_rewards()
    monkeypatch.setitem(LM_REWARDS, "resample", replace(LM_REWARDS["resample"], mirrored=True))
    assert config.evaluator.mirrored_action_rewards()
    config.evaluator.name = "gold"  # no reward variants: its own entry says
    assert config.evaluator.mirrored_action_rewards()
    assert config.evaluator.reward_variant("per-action") is None
