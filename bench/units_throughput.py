"""Training throughput of the unit models, side by side in one run: the training step of
``segrl units train`` against the reference step (attention weights computed explicitly, fp32 matrix
products in full precision on a GPU, and a loop that waits for the device after every update and
makes each batch while the device idles), for NVIB and the plain Transformer at the same shape.

    python bench/units_throughput.py                      # CPU-sized models, 20 steps each
    python bench/units_throughput.py --preset paper --device cuda --precision bf16 --batch-size 512
    python bench/units_throughput.py --profile 3          # also where each step spends its time
    python bench/units_throughput.py --models nvib --json speeds.json

Steps alternate between the runs (after two warm-up steps each), so that load from other
processes affects all alike; the ratios are the numbers to compare across machines. Wall-clock time
is measured over whole steps, the making of batches included.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from segrl.data import load_corpus
from segrl.runtime import resolve_device, seed_everything, set_threads
from segrl.units.base import make_autoencoder_batch
from segrl.units.config import build_units_config
from segrl.units.saving import build_model
from segrl.units.stepping import UnitTrainer, noised

PRESETS = {
    "cpu": {"arch.dim": 64, "arch.feed_forward": 64},
    "paper": {"arch.dim": 512, "arch.feed_forward": 512},
}
VARIANTS = {
    "reference": {"arch.fused_attention": False, "train.tf32": False},
    "default": {},
}
WARMUP = 2


@dataclass
class Run:
    name: str
    trainer: UnitTrainer
    reference: bool
    pending: object = None
    chars: int = 0
    seconds: float = 0.0
    per_step: list[float] = field(default_factory=list)

    def step(self, texts: list[str], next_texts: list[str], step: int) -> None:
        """One training step as ``segrl units train`` makes it, or as the reference loop did."""
        trainer, device = self.trainer, self.trainer.device
        if self.reference:
            t = trainer.train
            noisy = noised(texts, t.deletion_prob, t.seed, step)
            batch = make_autoencoder_batch(trainer.vocab, texts, noisy, device)
            out = trainer.update(batch, progress=0.5)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            {k: float(v.detach()) for k, v in {"loss": out.total, **out.terms, **out.stats}.items()}
            return
        batch = self.pending or trainer.batch(texts, step)
        out = trainer.update(batch, progress=0.5)
        self.pending = trainer.batch(next_texts, step + 1)
        trainer.values(out, step, "-")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", choices=PRESETS, default="cpu")
    parser.add_argument("--models", default="transformer,nvib")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--precision", default="fp32", choices=("fp32", "bf16", "fp16"))
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument(
        "--profile", type=int, default=0, help="profile this many steps of each run"
    )
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (PyTorch's default)")
    parser.add_argument("--variants", default="reference,default", help=f"of {', '.join(VARIANTS)}")
    parser.add_argument("--json", type=Path, default=None, help="also write the speeds here")
    args = parser.parse_args()
    set_threads(args.threads)
    seed_everything(0)
    device = resolve_device(args.device)
    corpus = load_corpus()
    runs = []
    for model_name in args.models.split(","):
        for variant in args.variants.split(","):
            options = VARIANTS[variant]
            overrides = {**PRESETS[args.preset], "train.precision": args.precision, **options}
            config = build_units_config(model_name, None, overrides)
            torch.manual_seed(0)
            model = build_model(config, len(corpus.vocab)).to(device).train()
            trainer = UnitTrainer(model, corpus.vocab, config.train, device, config.seed)
            runs.append(Run(f"{model_name} {variant}", trainer, variant == "reference"))
    rng = random.Random(0)
    texts = rng.sample(corpus.train, args.batch_size)
    for step in range(WARMUP + args.steps):
        next_texts = rng.sample(corpus.train, args.batch_size)
        for run in runs:
            started = time.perf_counter()
            run.step(texts, next_texts, step)
            if step >= WARMUP:
                run.seconds += time.perf_counter() - started
                run.per_step.append(time.perf_counter() - started)
                run.chars += sum(len(t) for t in texts)
        texts = next_texts
    print(f"{'run':24s} {'chars/s':>12s} {'s/step':>9s}")
    speeds = {}
    for run in runs:
        speeds[run.name] = run.chars / run.seconds
        print(f"{run.name:24s} {speeds[run.name]:12.0f} {run.seconds / args.steps:9.4f}")
    for model_name in args.models.split(","):
        for variant in args.variants.split(","):
            if variant != "reference" and "reference" in args.variants.split(","):
                ratio = speeds[f"{model_name} {variant}"] / speeds[f"{model_name} reference"]
                print(f"{model_name}: {variant} / reference speed {ratio:.2f}")
    if args.json:
        args.json.write_text(json.dumps({"speeds": speeds, "options": vars(args)}, default=str))
    print(f"({args.preset} preset, batch {args.batch_size}, {device}, {args.precision})")
    if args.profile:
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] * (device.type == "cuda"))
        key = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
        for run in runs:
            with profile(activities=activities) as prof:
                for step in range(args.profile):
                    next_texts = rng.sample(corpus.train, args.batch_size)
                    run.step(texts, next_texts, step)
                    texts = next_texts
            print(f"\n== {run.name}: {args.profile} steps")
            print(prof.key_averages().table(sort_by=key, row_limit=18, max_name_column_width=48))


if __name__ == "__main__":
    main()
