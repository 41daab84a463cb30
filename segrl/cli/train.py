"""``segrl train``: train an agent to segment, rewarded by an evaluator, logged to MLflow."""

from __future__ import annotations

import argparse

from segrl.cli.common import (
    add_job_args,
    config_from_args,
    where_to_look,
)
from segrl.cli.flags import Flag, FlagTable
from segrl.errors import ConfigError

TRAIN = "segrl.agents.config:TrainConfig"
TRAIN_FLAGS = (
    (
        "agent",
        FlagTable(
            TRAIN,
            (
                Flag("--agent", "agent", str, "NAME"),
                Flag(
                    "--policy",
                    "policy.kind",
                    str,
                    "KIND",
                    "formerly --segmenter, still accepted",
                    old_names=("--segmenter",),
                ),
                Flag("--evaluator", "evaluator.name", str, "NAME"),
                Flag("--reward", "env.reward", str, "MODE"),
                Flag("--hide-spaces", "env.hide_spaces", bool),
                Flag("--rules", "env.rules", str, "SET"),
                Flag("--teacher-features", "env.teacher_features", bool),
                Flag("--steps", "reinforce.steps", int, "N"),
                Flag("--batch-size", "reinforce.batch_size", int, "N"),
                Flag("--lr", "reinforce.lr", float, "X"),
                Flag("--entropy-coef", "reinforce.entropy_coef", float, "X"),
                Flag("--train-seed", "seed", int, "N"),
            ),
        ),
    ),
    (
        "LM evaluator (--evaluator lm)",
        FlagTable(
            TRAIN,
            (
                Flag("--lm-reward", "evaluator.lm.reward_variant", str, "NAME"),
                Flag("--lm-objective", "evaluator.lm.objective", str, "NAME"),
                Flag("--lm-context", "evaluator.lm.lm.context", str, "NAME"),
                Flag("--lm-length-penalty", "evaluator.lm.lm.length_penalty", float, "X"),
                Flag("--lm-expected-length", "evaluator.lm.lm.expected_length_weight", float, "X"),
            ),
        ),
    ),
    (
        "run",
        FlagTable(
            TRAIN,
            (
                Flag("--out", "out", str, "DIR"),
                Flag("--device", "device", str, "DEV"),
                Flag("--threads", "threads", int, "N"),
                Flag("--max-minutes", "max_minutes", float, "M"),
                Flag("--eval-every", "eval_every", int, "N"),
                Flag("--checkpoint-every", "checkpoint_every", int, "N"),
            ),
        ),
    ),
    (
        "ppo (--agent ppo, ppo-batched)",
        FlagTable(
            TRAIN,
            (
                Flag("--ppo-steps", "ppo.steps", int, "N"),
                Flag("--num-envs", "ppo.num_envs", int, "N"),
                Flag("--n-steps", "ppo.n_steps", int, "N"),
                Flag("--epochs", "ppo.epochs", int, "N"),
                Flag("--minibatches", "ppo.minibatches", int, "N"),
                Flag("--ppo-lr", "ppo.lr", float, "X"),
                Flag("--ppo-ent-coef", "ppo.ent_coef", float, "X"),
                Flag("--clip-coef", "ppo.clip_coef", float, "X"),
            ),
        ),
    ),
)
"""``segrl train``'s flags by argument group: each sets the option of ``TrainConfig`` it names, and
its help is that option's docstring."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "train",
        help="train a segmenting agent (REINFORCE, PPO) rewarded by an evaluator; log it to MLflow",
        description="Train a segmenter policy (BiLSTM or Transformer) with an RL agent in the "
        "segmentation environment, rewarded by an evaluator (Morfessor's decisions, a gold "
        "segmentation, or a co-trained segmental language model). Logs reward, entropy, agreement with the reference, gold metrics and "
        "sample segmentations to MLflow, and registers the final segmenter for `segrl compare`. "
        "Run the same command again to resume an interrupted run from its last checkpoint.",
    )
    for title, table in TRAIN_FLAGS:
        table.add_to(parser, title)
    add_job_args(parser, "reinforce.lr=3e-4 --set evaluator.lm.lm.hidden_dim=256")
    parser.set_defaults(func=run_train_command, _config_of=train_config)


def check_agent_flags(args: argparse.Namespace, agent: str) -> None:
    """A flag given on the command line that the chosen agent does not read is an error: the flags
    of another agent's table (``AgentSpec.table``)."""
    from segrl.agents.registry import agent_spec, agent_tables

    reads = f"{agent_spec(agent).table}."
    flags = {
        f"{table.prefix}{row.key}": row.flag for _, table in TRAIN_FLAGS for row in table.flags
    }
    for other in (f"{table}." for table in agent_tables()):
        if other == reads:
            continue
        given = [k for k, v in vars(args).items() if k.startswith(other) and v is not None]
        if given:
            own = ", ".join(flag for key, flag in flags.items() if key.startswith(reads))
            raise ConfigError(
                f"--agent {agent} does not read {', '.join(flags[k] for k in given)} (flags of "
                f"{other.rstrip('.')}); its own are {own}"
            )


def train_config(args: argparse.Namespace):
    """The config ``segrl train`` trains with, from its parsed command line, the chosen agent's
    flags checked (``check_agent_flags``)."""
    from segrl.agents import TrainConfig

    config = config_from_args(TrainConfig, args)
    check_agent_flags(args, config.agent)
    return config


def run_train_command(args: argparse.Namespace) -> int:
    from segrl.experiments.agent_train import train

    config = train_config(args)
    print("segrl train: Ctrl-C stops at the next step with a checkpoint", flush=True)
    result = train(config)
    print(f"run folder: {result.run_dir}")
    print(where_to_look(config.tracking.experiment))
    return 0
