"""Train unit-model configs within a time budget and evaluate them, without MLflow: the paper
schedules (``configs/nvib_paper.toml``, ``configs/transformer_paper.toml``) on a lent GPU, where a
lease is minutes long and its machine has none of the tracking stack.

    python bench/units_lease.py --config configs/nvib_paper.toml --budget 360 --out OUT
    python bench/units_lease.py --config configs/nvib_cpu.toml --set train.steps=40 --budget 60

Each config trains as ``segrl units train`` trains it (``segrl.units.stepping.UnitTrainer``, the same
batches, noise, schedule and KL annealing) and is evaluated as it evaluates (``evaluate_unit_model``
on the test split and the gold words). ``--budget`` is the wall-clock seconds of one config's
training: after ``--probe`` timed steps, a schedule that would not fit is compressed to the steps that do
(learning-rate cool-down and KL annealing follow the new total; the report says so), and training
stops at the budget in any case, so that every config is still evaluated. Writes
``OUT/<run name>.json`` (config, device, steps, speed, the curve every ``log_every`` steps and
the final metrics) and prints one line per config.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from segrl.cli.common import parse_set
from segrl.data import load_corpus, load_gold
from segrl.data.batching import training_batches
from segrl.runtime import resolve_device, seed_everything, set_threads
from segrl.units.config import build_units_config
from segrl.units.evaluation import evaluate_unit_model
from segrl.units.saving import build_model
from segrl.units.stepping import UnitTrainer

SHOWN = ("reconstruction", "kept", "units_per_char", "boundary_f1", "segment_f1", "kl_")
"""The metrics printed (the report holds them all)."""
EVAL_RESERVE = 0.05
"""Fraction of the budget a compressed schedule leaves for the steps' variation."""
WARMUP = 5
"""Steps before the probe's timing starts (the first are slower: the GPU warms up)."""


def train_within(path: str, overrides: dict, budget: float, probe: int) -> dict:
    config = build_units_config(None, path, overrides)
    train = config.train
    device = resolve_device(config.device)
    corpus = load_corpus(config.data)
    gold = load_gold(config.gold.path, config.gold.max_words)
    seed_everything(config.seed)
    model = build_model(config, len(corpus.vocab)).to(device).train()
    trainer = UnitTrainer(model, corpus.vocab, train, device, config.seed)
    planned = train.steps
    batches = training_batches(corpus.train, train.batch_size, config.seed)
    batch = trainer.batch(next(batches), 0)
    curve, window = [], {}
    started = time.perf_counter()
    step = 0
    while step < train.steps:
        step += 1
        out = trainer.update(batch, progress=(step - 1) / train.steps)
        batch = trainer.batch(next(batches), step)
        for key, value in trainer.values(out, step - 1, "-").items():
            window.setdefault(key, []).append(value)
        elapsed = time.perf_counter() - started
        if step == WARMUP:
            warm = elapsed
        if step == WARMUP + probe:  # the time per step after the first (compiling, warming up)
            rate = (elapsed - warm) / probe
            fits = step + int((budget * (1 - EVAL_RESERVE) - elapsed) / rate)
            train.steps = max(step + 1, min(train.steps, fits))
        if step % config.log_every == 0 or step == train.steps or elapsed > budget:
            means = {k: sum(v) / len(v) for k, v in window.items()}
            curve.append({"step": step, "seconds": round(elapsed, 1), **means})
            window = {}
        if elapsed > budget:
            break
    seconds = time.perf_counter() - started
    metrics = evaluate_unit_model(
        model, corpus.vocab, corpus.test, gold, config.eval.batch_size, train.precision,
        train.deletion_prob, config.seed,
    )  # fmt: skip
    return {
        "config": path,
        "overrides": overrides,
        "model": config.model,
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else str(device),
        "torch": torch.__version__,
        "precision": train.precision,
        "batch_size": train.batch_size,
        "steps_planned": planned,
        "steps_schedule": train.steps,
        "steps_made": step,
        "train_seconds": round(seconds, 1),
        "seconds_per_step": round(seconds / step, 4),
        "evaluation_seconds": round(time.perf_counter() - started - seconds, 1),
        "metrics": metrics,
        "curve": curve,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", action="append", required=True, help="a units config file")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--budget", type=float, default=360.0, help="training seconds per config")
    parser.add_argument("--probe", type=int, default=30, help="steps timed before fitting")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    set_threads(args.threads)
    overrides = parse_set(args.set)
    for path in args.config:
        report = train_within(path, overrides, args.budget, args.probe)
        m = report["metrics"]
        print(
            f"{path}: {report['steps_made']}/{report['steps_planned']} steps "
            f"(schedule {report['steps_schedule']}) in {report['train_seconds']} s "
            f"({report['seconds_per_step']} s/step) on {report['device']}; "
            + ", ".join(f"{k}={v:.4g}" for k, v in sorted(m.items()) if k.startswith(SHOWN)),
            flush=True,
        )
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            name = Path(path).stem
            (args.out / f"{name}.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
