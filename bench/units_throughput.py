"""Training throughput of the unit models, side by side in one run: characters per second of NVIB
and of the plain Transformer at the same shape, and their ratio.

    python bench/units_throughput.py                      # CPU-sized models, 20 steps each
    python bench/units_throughput.py --preset paper --device cuda --precision bf16 --batch-size 512

Steps alternate between the models (after one warm-up step each), so that load from other processes
affects both alike; the ratio is the number to compare across machines.
"""

from __future__ import annotations

import argparse
import random
import time

import torch

from segrl.data import load_corpus
from segrl.runtime import autocast, resolve_device, seed_everything
from segrl.units.base import make_autoencoder_batch
from segrl.units.config import build_units_config
from segrl.units.saving import build_model
from segrl.units.training import make_optimizer, noised

PRESETS = {
    "cpu": {"arch.dim": 64, "arch.feed_forward": 64},
    "paper": {"arch.dim": 512, "arch.feed_forward": 512},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", choices=PRESETS, default="cpu")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--precision", default="fp32", choices=("fp32", "bf16", "fp16"))
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    seed_everything(0)
    device = resolve_device(args.device)
    corpus = load_corpus()
    runs = {}
    for name in ("transformer", "nvib"):
        overrides = {**PRESETS[args.preset], "train.precision": args.precision}
        config = build_units_config(name, None, overrides)
        model = build_model(config, len(corpus.vocab)).to(device).train()
        runs[name] = (model, make_optimizer(model, config.train), {"chars": 0, "seconds": 0.0})
    rng = random.Random(0)
    for step in range(args.steps + 1):
        texts = rng.sample(corpus.train, args.batch_size)
        for model, optimizer, totals in runs.values():
            started = time.perf_counter()
            batch = make_autoencoder_batch(corpus.vocab, texts, noised(texts, 0.1, 0, step), device)
            with autocast(device, args.precision):
                loss = model.loss(batch, progress=0.5).total
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            if step:  # the first step of each model warms up
                totals["seconds"] += time.perf_counter() - started
                totals["chars"] += sum(len(t) for t in texts)
    speeds = {name: t["chars"] / t["seconds"] for name, (_, _, t) in runs.items()}
    for name, speed in speeds.items():
        print(f"{name:12s} {speed:12.0f} training characters / second")
    print(f"nvib / transformer: {speeds['nvib'] / speeds['transformer']:.3f}")
    print(f"({args.preset} preset, batch {args.batch_size}, {device}, {args.precision})")


if __name__ == "__main__":
    main()
