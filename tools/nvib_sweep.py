"""Why NVIB keeps every vector: the kept fraction per layer against the KL weights, at CPU width.

Three steps (docs/studies/2026-11-28-nvib-compression.md):

- ``optimum`` prints, from the formulas alone, what the Dirichlet KL asks of the pseudo-counts: its
  optimum (the tokens' mean pseudo-count is ``alpha_delta``) against the 0.1 threshold, and the
  least ``L_D / (n + 1)`` a model pays to keep a fraction of its vectors at or above the threshold.
- ``run`` trains the grid's points with ``segrl units train`` (``configs/nvib_cpu.toml``, one run at a
  time at one thread), seed after seed; a point whose run folder holds a finished ``run.json`` is
  skipped, so the command can be run again after a stop.
- ``table`` prints the curves as Markdown from the run folders' ``run.json`` (test metrics, mean ±
  sd over seeds); ``--pseudo-counts`` adds the characters' pseudo-counts per NVIB layer on 300 test
  sentences (mean, 10th and 90th percentiles), read off the trained models.

    python tools/nvib_sweep.py optimum
    MLFLOW_TRACKING_URI=sqlite:///mlflow.db python tools/nvib_sweep.py run --corpus synthetic:0 \\
        --seeds 0,1,2 --steps 800 --root runs/nvib-sweep
    python tools/nvib_sweep.py table --corpus synthetic:0 --root runs/nvib-sweep --pseudo-counts
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

import torch

from segrl.units.nvib import THRESHOLD, kl_dirichlet

POINTS: dict[str, dict[str, float]] = {
    # lambda_D at the paper's alpha_delta (0.25)
    "ld0.1-ad0.25": {"lambda_d": 0.1, "alpha_delta": 0.25},
    "ld1-ad0.25": {"lambda_d": 1.0, "alpha_delta": 0.25},  # the paper's final model
    "ld10-ad0.25": {"lambda_d": 10.0, "alpha_delta": 0.25},
    "ld100-ad0.25": {"lambda_d": 100.0, "alpha_delta": 0.25},
    # alpha_delta at the paper's lambda_D (1)
    "ld1-ad0": {"lambda_d": 1.0, "alpha_delta": 0.0},
    "ld1-ad0.05": {"lambda_d": 1.0, "alpha_delta": 0.05},
    "ld1-ad0.075": {"lambda_d": 1.0, "alpha_delta": 0.075},
    "ld1-ad0.1": {"lambda_d": 1.0, "alpha_delta": 0.1},
    "ld1-ad0.15": {"lambda_d": 1.0, "alpha_delta": 0.15},
    # lambda_D at the CPU config's alpha_delta (0.1)
    "ld0.1-ad0.1": {"lambda_d": 0.1, "alpha_delta": 0.1},  # configs/nvib_cpu.toml
    "ld10-ad0.1": {"lambda_d": 10.0, "alpha_delta": 0.1},
    # the Gaussian KL at the paper's setting
    "ld1-ad0.25-lg0": {"lambda_d": 1.0, "alpha_delta": 0.25, "lambda_g": 0.0},
    "ld1-ad0.25-lg0.1": {"lambda_d": 1.0, "alpha_delta": 0.25, "lambda_g": 0.1},
    # the paper's setting with the authors' averaging of the reconstruction over padded positions
    # (mean 1 / fill of a batch of 32 synthetic sentences: 1.66)
    "ld1.66-ad0.25-lg0.0166": {"lambda_d": 1.66, "alpha_delta": 0.25, "lambda_g": 0.0166},
}
"""The grid: name -> NVIB options set on top of configs/nvib_cpu.toml (lambda_g 0.01 unless set)."""
CONFIG = Path(__file__).resolve().parent.parent / "configs" / "nvib_cpu.toml"
LAYERS = (4, 5, 6)


def corpus_tag(corpus: str) -> str:
    """Short name of a corpus in run names: ``syn`` for a synthetic corpus, ``bundled`` for "" (the
    bundled one), else the file's name without its suffixes."""
    if not corpus:
        return "bundled"
    return "syn" if corpus.startswith("synthetic") else Path(corpus).name.split(".")[0]


def run_folder(root: Path, corpus: str, point: str, seed: int) -> Path:
    return root / f"{corpus_tag(corpus)}-{point}-s{seed}"


def finished(folder: Path) -> dict | None:
    """The run's ``run.json`` if it finished, else None."""
    path = folder / "run.json"
    if not path.exists():
        return None
    record = json.loads(path.read_text())
    return record if record.get("finished") else None


def train_command(args: argparse.Namespace, point: str, seed: int) -> list[str]:
    folder = run_folder(args.root, args.corpus, point, seed)
    command = [sys.executable, "-m", "segrl", "units", "train", "--config", str(CONFIG)]
    if args.corpus:
        command += ["--corpus", args.corpus, "--gold", args.corpus]
    else:
        command += ["--gold-max-words", "2000"]
    command += ["--steps", str(args.steps), "--set", "eval.robustness=false"]
    for key, value in POINTS[point].items():
        command += ["--set", f"arch.{key}={value}"]
    command += ["--train-seed", str(seed), "--threads", "1", "--experiment", args.experiment]
    return command + ["--run-name", folder.name, "--out", str(folder)]


def run(args: argparse.Namespace) -> None:
    for seed in args.seeds:
        for point in args.points:
            folder = run_folder(args.root, args.corpus, point, seed)
            if finished(folder):
                continue
            print(f"{folder.name}: {' '.join(train_command(args, point, seed))}", flush=True)
            subprocess.run(train_command(args, point, seed), check=True)


def token_pseudo_counts(folder: Path, sentences: int = 300) -> dict[int, list[float]]:
    """The characters' pseudo-counts per NVIB layer on the first test sentences: their mean, 10th
    and 90th percentiles."""
    from segrl.data import load_corpus
    from segrl.units.base import make_autoencoder_batch
    from segrl.units.saving import load_unit_model

    model, vocab, config = load_unit_model(folder)
    texts = load_corpus(config.data).test[:sentences]
    batch = make_autoencoder_batch(vocab, texts)
    with torch.no_grad():
        encoding = model.encode(batch.source, batch.source_mask)
    counts = {}
    for number, params in encoding.extras["nvib"]:
        alpha = params.alpha[:, :-1][batch.source_mask]  # [characters]
        low, high = torch.quantile(alpha, torch.tensor([0.1, 0.9])).tolist()
        counts[number] = [float(alpha.mean()), low, high]
    return counts


def pseudo_count(counts: list[dict[int, list[float]]], layer: int) -> str:
    """Layer ``layer``'s mean pseudo-count (10th-90th percentile), each averaged over the seeds."""
    mean, low, high = (statistics.mean(c[layer][i] for c in counts) for i in range(3))
    return f"{mean:.2g} ({low:.2g}-{high:.2g})"


def mean_sd(values: list[float], digits: int = 2) -> str:
    if not values:
        return "-"
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.{digits}f} ± {sd:.{digits}f}"


def table(args: argparse.Namespace) -> None:
    torch.set_num_threads(1)  # --pseudo-counts encodes test sentences; one core, as the runs
    header = "| point | seeds | kept fraction, layers 4 / 5 / 6 | `units_per_char` | reconstruction | `boundary_f1` | `segment_f1` |"
    columns = header.count("|") - 1
    if args.pseudo_counts:
        header += " pseudo-count per character, mean (10th-90th percentile), layers 4 / 5 / 6 |"
        columns += 1
    print(header)
    print("|" + "---|" * columns)
    for point in args.points:
        folders = [run_folder(args.root, args.corpus, point, seed) for seed in args.seeds]
        records = [(f, r) for f in folders if (r := finished(f))]
        if not records:
            continue
        metrics = [r["metrics"] for _, r in records]

        def column(key: str, digits: int = 3, metrics: list = metrics) -> str:
            return mean_sd([m[key] for m in metrics], digits)

        kept = " / ".join(column(f"kept_fraction/layer_{n}", 2) for n in LAYERS)
        row = (
            f"| {point} | {len(records)} | {kept} | {column('units_per_char')} | "
            f"{column('reconstruction')} | {column('boundary_f1')} | {column('segment_f1')} |"
        )
        if args.pseudo_counts:
            counts = [token_pseudo_counts(f) for f, _ in records]
            row += " " + " / ".join(pseudo_count(counts, n) for n in LAYERS) + " |"
        print(row, flush=True)


def dirichlet_cost(mean: float, alpha_delta: float, n: int) -> float:
    """``L_D / (n + 1)`` of a sentence of ``n`` characters whose pseudo-counts average ``mean``
    (total ``1 + n mean``, the prior's 1 included) under the conditional prior ``1 + n alpha_delta``."""
    total = torch.tensor(1.0 + n * mean, dtype=torch.float64)
    target = torch.tensor(1.0 + n * alpha_delta, dtype=torch.float64)
    return float(kl_dirichlet(total, target, n + 1)) / (n + 1)


def dirichlet_price(kept: float, alpha_delta: float, n: int) -> float:
    """The least ``L_D / (n + 1)`` of a sentence of ``n`` characters whose fraction ``kept`` of
    characters have pseudo-counts at or above the threshold: 0 while the target total
    ``1 + n alpha_delta`` can pay for them, else the KL at the least total that keeps them (the
    dropped characters at 0)."""
    return dirichlet_cost(max(alpha_delta, kept * THRESHOLD), alpha_delta, n)


def optimum(args: argparse.Namespace) -> None:
    kept_grid = (0.1, 0.25, 0.5, 0.75, 1.0)
    print(
        f"| `alpha_delta` | mean pseudo-count per character at the optimum | largest kept fraction "
        f"at no Dirichlet cost | least `L_D / (n + 1)` to keep a fraction f, n = {args.n}: "
        + ", ".join(f"f = {f}" for f in kept_grid)
        + " |"
    )
    print("|---|---|---|---|")
    for alpha_delta in args.alpha_deltas:
        free = min(1.0, alpha_delta / THRESHOLD) if alpha_delta > 0 else 0.0
        prices = " / ".join(f"{dirichlet_price(f, alpha_delta, args.n):.3f}" for f in kept_grid)
        print(f"| {alpha_delta} | {alpha_delta} | {free:.2f} | {prices} |")
    print()
    means = (0.05, 0.1, 0.25, 0.5, 1.0)
    print(
        "| `alpha_delta` | `L_D / (n + 1)` at a mean pseudo-count per character of "
        + " / ".join(str(m) for m in means)
        + f", n = {args.n} |"
    )
    print("|---|---|")
    for alpha_delta in args.alpha_deltas:
        costs = " / ".join(f"{dirichlet_cost(m, alpha_delta, args.n):.3f}" for m in means)
        print(f"| {alpha_delta} | {costs} |")
    print()
    print("Noise of the sampled attention bias log pi_i at a pseudo-count alpha (sd of log Gamma):")
    for alpha in (0.1, 0.25, 0.5, 1.0, 2.5, 10.0):
        sd = math.sqrt(float(torch.polygamma(1, torch.tensor(alpha, dtype=torch.float64))))
        print(f"  alpha {alpha}: {sd:.2f} nats")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("run", "table"):
        sub = commands.add_parser(name)
        sub.add_argument("--corpus", default="synthetic:0", help='"" for the bundled corpus')
        sub.add_argument("--root", type=Path, default=Path("runs/nvib-sweep"))
        sub.add_argument(
            "--seeds", type=lambda s: [int(x) for x in s.split(",")], default=[0, 1, 2]
        )
        sub.add_argument("--points", type=lambda s: s.split(","), default=list(POINTS))
    commands.choices["run"].add_argument("--steps", type=int, default=800)
    commands.choices["run"].add_argument("--experiment", default="nvib-compression")
    commands.choices["table"].add_argument("--pseudo-counts", action="store_true")
    sub = commands.add_parser("optimum")
    sub.add_argument("--n", type=int, default=44, help="characters in a sentence")
    sub.add_argument(
        "--alpha-deltas",
        type=lambda s: [float(x) for x in s.split(",")],
        default=[0.0, 0.05, 0.1, 0.25, 1.0],
    )
    args = parser.parse_args(argv)
    unknown = set(getattr(args, "points", [])) - set(POINTS)
    if unknown:
        parser.error(f"unknown points {sorted(unknown)}: choose from {', '.join(POINTS)}")
    {"run": run, "table": table, "optimum": optimum}[args.command](args)


if __name__ == "__main__":
    main()
