"""``segrl train``: train an agent to segment, rewarded by an evaluator, logged to MLflow."""

from __future__ import annotations

import argparse

from segrl.cli.common import (
    add_config_args,
    add_data_args,
    add_gold_args,
    add_tracking_args,
    config_from_args,
    where_to_look,
)
from segrl.errors import ConfigError


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
    group = parser.add_argument_group("agent")
    group.add_argument(
        "--agent", dest="agent", metavar="NAME", help="reinforce (default), ppo or ppo-batched"
    )
    group.add_argument(
        "--policy",
        dest="policy.kind",
        metavar="KIND",
        help="the policy's architecture: bilstm (default) or transformer (formerly --segmenter, "
        "still accepted)",
    )
    group.add_argument("--segmenter", dest="policy.kind", help=argparse.SUPPRESS)  # the old name
    group.add_argument(
        "--evaluator",
        dest="evaluator.name",
        metavar="NAME",
        help="morfessor (default), gold, or lm (a co-trained segmental language model)",
    )
    group.add_argument(
        "--reward", dest="env.reward", metavar="MODE", help="per-action (default) or sequence"
    )
    group.add_argument(
        "--hide-spaces",
        dest="env.hide_spaces",
        action="store_const",
        const=True,
        help="remove spaces: word boundaries become decisions too (word discovery)",
    )
    group.add_argument(
        "--rules", dest="env.rules", metavar="SET", help="binary (default) or full (5 actions)"
    )
    group.add_argument(
        "--teacher-features",
        dest="env.teacher_features",
        action="store_const",
        const=True,
        help="the policy reads the lm evaluator's boundary log-odds at every position "
        "(reinforce, binary rules)",
    )
    group.add_argument(
        "--steps", dest="reinforce.steps", type=int, metavar="N", help="updates (default 2000)"
    )
    group.add_argument(
        "--batch-size",
        dest="reinforce.batch_size",
        type=int,
        metavar="N",
        help="sentences per update (default 64)",
    )
    group.add_argument("--lr", dest="reinforce.lr", type=float, metavar="X")
    group.add_argument("--entropy-coef", dest="reinforce.entropy_coef", type=float, metavar="X")
    group.add_argument(
        "--train-seed",
        dest="seed",
        type=int,
        metavar="N",
        help="seed of initialisation and sampling (default 0)",
    )
    lm = parser.add_argument_group("LM evaluator (--evaluator lm)")
    lm.add_argument(
        "--lm-reward",
        dest="evaluator.lm.reward",
        metavar="NAME",
        help="per-action: posterior (default), flip, resample, incremental; sequence: likelihood "
        "(default), entropy, marginal, space-penalty",
    )
    lm.add_argument(
        "--lm-objective",
        dest="evaluator.lm.objective",
        metavar="NAME",
        help="how the LM learns: marginal (default; -log p(X)) or joint (-log p(X, S) under the "
        "agent's segmentations)",
    )
    lm.add_argument(
        "--lm-context",
        dest="evaluator.lm.arch.context",
        metavar="NAME",
        help="what conditions a segment of the slm: none (default), words, lstm",
    )
    lm.add_argument(
        "--lm-length-penalty",
        dest="evaluator.lm.arch.length_penalty",
        type=float,
        metavar="X",
        help="prior against long segments in the LM's objective (default: 0.05 on a word list, "
        "0 on running text)",
    )
    run = parser.add_argument_group("run")
    run.add_argument(
        "--out",
        dest="out",
        metavar="DIR",
        help="run folder (checkpoints, final segmenter); the same folder resumes (default: runs/NAME)",
    )
    run.add_argument("--device", dest="device", metavar="DEV", help="auto (default), cpu, cuda")
    run.add_argument("--threads", dest="threads", type=int, metavar="N", help="CPU threads")
    run.add_argument(
        "--max-minutes",
        dest="max_minutes",
        type=float,
        metavar="M",
        help="stop training after M minutes, then evaluate",
    )
    run.add_argument("--eval-every", dest="eval_every", type=int, metavar="N")
    run.add_argument("--checkpoint-every", dest="checkpoint_every", type=int, metavar="N")
    ppo = parser.add_argument_group("ppo (--agent ppo, ppo-batched)")
    ppo.add_argument(
        "--ppo-steps", dest="ppo.steps", type=int, metavar="N", help="iterations (default 300)"
    )
    ppo.add_argument(
        "--num-envs",
        dest="ppo.num_envs",
        type=int,
        metavar="N",
        help="episodes side by side: CharSegment slots (ppo) or sentences per rollout (ppo-batched)",
    )
    ppo.add_argument(
        "--n-steps",
        dest="ppo.n_steps",
        type=int,
        metavar="N",
        help="ppo: steps per slot per rollout",
    )
    ppo.add_argument("--epochs", dest="ppo.epochs", type=int, metavar="N")
    ppo.add_argument("--minibatches", dest="ppo.minibatches", type=int, metavar="N")
    ppo.add_argument("--ppo-lr", dest="ppo.lr", type=float, metavar="X")
    ppo.add_argument("--ppo-ent-coef", dest="ppo.ent_coef", type=float, metavar="X")
    ppo.add_argument("--clip-coef", dest="ppo.clip_coef", type=float, metavar="X")
    add_config_args(parser, "reinforce.lr=3e-4 --set evaluator.lm.arch.hidden_dim=256")
    add_data_args(parser)
    add_gold_args(parser)
    add_tracking_args(parser)
    parser.set_defaults(func=run_train_command)


AGENT_FLAGS = {
    "reinforce": ("reinforce.", ("--steps", "--batch-size", "--lr", "--entropy-coef")),
    "ppo": ("ppo.", ("--ppo-steps", "--num-envs", "--n-steps", "--epochs", "--minibatches",
                     "--ppo-lr", "--ppo-ent-coef", "--clip-coef")),
}  # fmt: skip
"""The flags that only one kind of agent reads (dest prefix, flags), to refuse them for another."""


def check_agent_flags(args: argparse.Namespace, agent: str) -> None:
    """A flag given on the command line that the chosen agent does not read is an error."""
    reads = "ppo" if agent in ("ppo", "ppo-batched") else "reinforce"
    for kind, (prefix, _flags) in AGENT_FLAGS.items():
        if kind == reads:
            continue
        given = [k for k, v in vars(args).items() if k.startswith(prefix) and v is not None]
        if given:
            others = ", ".join(AGENT_FLAGS[reads][1])
            raise ConfigError(
                f"--agent {agent} does not read {', '.join(_flag(k) for k in given)} (flags of "
                f"{kind}); its own are {others}"
            )


def _flag(dest: str) -> str:
    if dest.startswith("ppo."):
        name = dest.removeprefix("ppo.")
        return {"steps": "--ppo-steps", "lr": "--ppo-lr", "ent_coef": "--ppo-ent-coef"}.get(
            name, "--" + name.replace("_", "-")
        )
    return "--" + dest.removeprefix("reinforce.").replace("_", "-")


def run_train_command(args: argparse.Namespace) -> int:
    from segrl.agents import TrainConfig, train

    config = config_from_args(TrainConfig, args)
    check_agent_flags(args, config.agent)
    print(f"[{config.name}] training; Ctrl-C stops at the next step with a checkpoint", flush=True)
    result = train(config)
    print(f"run folder: {result.run_dir}")
    print(where_to_look(config.tracking.experiment))
    return 0
