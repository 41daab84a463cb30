"""Speed of the main job (``segrl train --evaluator lm --reward per-action``) and where a step goes.

Runs the real job (REINFORCE, BiLSTM, the co-trained ``slm`` evaluator, per-action rewards) on the
bundled corpus for ``--steps`` updates on one thread, into a throw-away MLflow store, and times,
inside the same steps, the policy's forward and backward passes (and its optimiser step), the LM's
rewards (the evaluator's scores and per-decision rewards, inside the environment's step), the LM's
update, and everything else (the environment, sampling, logging, checkpoints): each as a fraction
of the steps' wall time, measured in one run. The first ``--warmup`` steps are left out. The LM's
pre-training is skipped (``evaluator.lm.pretrain_epochs=0``): it happens once, before the steps,
and the time of a step does not depend on what the LM has learnt.

    python bench/train_speed.py                  # 60 updates of 64 sentences, under a minute
    python bench/train_speed.py --steps 200 --set reinforce.batch_size=128
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator

import torch

PARTS = ("policy forward/backward", "LM rewards", "LM update")


class Clock:
    """Seconds spent inside the wrapped calls, by part (nested calls count once, in the outer)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.depth = 0
        self.counting = False

    def wrap(self, owner: object, name: str, part: str) -> None:
        original: Callable = getattr(owner, name)
        clock = self

        def timed(*args, **kwargs):
            if not clock.counting or clock.depth:
                return original(*args, **kwargs)
            clock.depth += 1
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                clock.seconds[part] += time.perf_counter() - started
                clock.depth -= 1

        setattr(owner, name, timed)


@contextlib.contextmanager
def throwaway_store() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="segrl-train-speed-") as tmp:
        previous = os.environ.get("MLFLOW_TRACKING_URI")
        os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{tmp}/mlflow.db"
        try:
            yield tmp
        finally:
            if previous is None:
                os.environ.pop("MLFLOW_TRACKING_URI", None)
            else:
                os.environ["MLFLOW_TRACKING_URI"] = previous


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()

    from segrl.agents.config import TrainConfig
    from segrl.agents.policies import DecisionHead, SegmenterPolicy
    from segrl.agents.reinforce import Reinforce
    from segrl.cli.common import parse_set
    from segrl.config import build_config
    from segrl.evaluators.lm import LMEvaluator
    from segrl.experiments.agent_train import train_reinforce

    torch.set_num_threads(1)
    clock = Clock()
    clock.wrap(SegmenterPolicy, "features", PARTS[0])
    clock.wrap(DecisionHead, "forward", PARTS[0])
    clock.wrap(torch.Tensor, "backward", PARTS[0])
    clock.wrap(torch.optim.Optimizer, "step", PARTS[0])
    clock.wrap(LMEvaluator, "action_rewards", PARTS[1])
    clock.wrap(LMEvaluator, "score", PARTS[1])
    clock.wrap(LMEvaluator, "update", PARTS[2])

    marks: list[float] = []
    sentences = words = 0

    original_step = Reinforce.step

    def counting_step(self, env, observation):
        nonlocal sentences, words
        if clock.counting:
            texts = list(env.slots.sentences)
            sentences += len(texts)
            words += sum(len(t.split()) for t in texts)
        return original_step(self, env, observation)

    Reinforce.step = counting_step

    def on_step(step: int, _stats: dict[str, float]) -> bool:
        marks.append(time.perf_counter())
        clock.counting = args.warmup <= step < args.warmup + args.steps  # not the final evaluation
        return False

    with throwaway_store() as tmp:
        overrides = {
            "evaluator.name": "lm",
            "env.reward": "per-action",
            "evaluator.lm.pretrain_epochs": 0,
            "reinforce.steps": args.steps + args.warmup,
            "eval_every": 10**9,
            "threads": 1,
            "gold.max_words": 200,
            "out": f"{tmp}/run",
            **parse_set(args.set),
        }
        config = build_config(TrainConfig, overrides=overrides)
        train_reinforce(config, on_step=on_step)

    measured = marks[args.warmup :]
    total = measured[-1] - marks[args.warmup - 1] if args.warmup else measured[-1] - measured[0]
    steps = len(measured) if args.warmup else len(measured) - 1
    shares = {part: clock.seconds[part] / total for part in PARTS}
    shares["everything else"] = 1.0 - sum(shares.values())
    print(f"main job, {steps} updates of {config.reinforce.batch_size} sentences, one thread:")
    print(f"  updates per second    {steps / total:8.2f}")
    print(f"  sentences per second  {sentences / total:8.1f}")
    print(f"  words per second      {words / total:8.1f}")
    for part, share in shares.items():
        print(f"  {part:<24s} {share:6.1%}")


if __name__ == "__main__":
    main()
