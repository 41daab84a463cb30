"""The transfer tables: a teacher on the seven corpora of the transfer suite against the best classic
segmenter, its worst corpus first, and its curve to its stopping point.

Reads finished benches of the ``transfer`` suite (their ``cells.json`` and the MLflow runs they
name, in the store ``MLFLOW_TRACKING_URI`` names) and prints Markdown:

- per corpus, the gold's density (units per character of its first analyses, on the suite's gold
  sample), the best classic segmenter (the best mean boundary F1 of Morfessor, SentencePiece
  unigram and BPE: ``characters`` is not a subword segmenter), and each teacher system's boundary
  precision / recall / F1 (mean ± sd over its seeds) and units per character of the gold words
  beside the gold's; then the margin of each teacher over the best classic, with its minimum over
  the corpora (the worst corpus) and its mean;
- ``--curve SYSTEM``: that system's gold curve (``eval/boundary_f1``, logged by ``segrl lm train``
  after every epoch) and held-out bits per character, epoch by epoch to its stopping point, seed by
  seed, and the F1 at its stopping point beside the F1 at 1,500 updates (the ``slm-1500`` system),
  and ``--plot FILE`` draws the curves.

    MLFLOW_TRACKING_URI=sqlite:///mlflow.db python tools/transfer_table.py \\
        runs/bench/transfer-classic runs/bench/transfer-teacher --curve slm --plot curves.png

Every figure comes from the benches' own runs; nothing here trains or reads a threshold off gold.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

from mlflow.tracking import MlflowClient

from segrl.benchmark.suite import DEFAULT_DATA_DIR, load_suite
from segrl.data.gold import load_gold
from segrl.errors import SegrlError
from segrl.metrics import units_per_char

CLASSIC = ("morfessor", "unigram", "bpe")
"""The classic subword segmenters, of which the best is the bar a teacher is judged against."""
BUDGET_SYSTEM = "slm-1500"
"""The suite's teacher at 1,500 updates, beside which its stopping point is read."""


def read_cells(benches: Sequence[Path]) -> list[dict]:
    """Every finished cell of the benches (their ``cells.json``), the later bench's cell first
    where two benches ran the same one."""
    cells: dict[str, dict] = {}
    for bench in benches:
        path = bench / "cells.json"
        if not path.is_file():
            raise SegrlError(f"{bench}: no cells.json; give the folder of a finished segrl bench")
        for cell in json.loads(path.read_text(encoding="utf-8")):
            if cell.get("status") in ("done", "skipped"):
                cells[cell["cell"]] = cell
    return list(cells.values())


def gold_densities(data_dir: Path) -> dict[str, float]:
    """Units per character of each language's gold sample (its first analyses), as the suite reads
    it: the same words every system is scored on."""
    suite = load_suite("transfer", data_dir)
    densities = {}
    for language in suite.languages:
        size = _gold_max_words(language.options)
        gold = load_gold(language.gold, size)
        densities[language.name] = units_per_char([g.analyses[0] for g in gold])
    return densities


def _gold_max_words(options: Sequence[str]) -> int | None:
    options = list(options)
    if "--gold-max-words" in options:
        return int(options[options.index("--gold-max-words") + 1])
    return None


def summary(cells: list[dict], client: MlflowClient) -> dict[tuple[str, str], dict]:
    """Per (language, system): each seed's boundary P, R, F1 and gold units per character."""
    out: dict[tuple[str, str], dict] = {}
    for cell in cells:
        metrics = client.get_run(cell["run_id"]).data.metrics
        row = out.setdefault((cell["language"], cell["system"]), {"seeds": {}})
        row["seeds"][int(cell["seed"])] = {
            name: metrics.get(name, math.nan)
            for name in ("boundary_precision", "boundary_recall", "boundary_f1")
        } | {"density": metrics.get("gold_units_per_char", math.nan), "run_id": cell["run_id"]}
    return out


def _mean_sd(values: Sequence[float]) -> tuple[float, float]:
    values = list(values)
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def corpus_table(
    rows: dict[tuple[str, str], dict],
    densities: dict[str, float],
    teachers: Sequence[str],
) -> str:
    """The seven-corpus table and the margins over the best classic segmenter."""
    languages = list(densities)
    lines = [
        "| corpus | gold units/char | best classic | "
        + " | ".join(f"{t}: P / R / F1 (units/char)" for t in teachers)
        + " |",
        "|---|---:|---|" + "---|" * len(teachers),
    ]
    margins: dict[str, list[float]] = {t: [] for t in teachers}
    for language in languages:
        classic = [
            (_mean_sd(s["boundary_f1"] for s in rows[language, c]["seeds"].values())[0], c)
            for c in CLASSIC
            if (language, c) in rows
        ]
        best, best_name = max(classic) if classic else (math.nan, "-")
        cells = []
        for teacher in teachers:
            if (language, teacher) not in rows:
                cells.append("-")
                margins[teacher].append(math.nan)
                continue
            seeds = rows[language, teacher]["seeds"].values()
            p, r = (
                _mean_sd(s[k] for s in seeds)[0] for k in ("boundary_precision", "boundary_recall")
            )
            f1, sd = _mean_sd(s["boundary_f1"] for s in seeds)
            density = _mean_sd(s["density"] for s in seeds)[0]
            cells.append(
                f"{p:.3f} / {r:.3f} / **{f1:.3f} ± {sd:.3f}** ({density:.3f}; {len(seeds)})"
            )
            margins[teacher].append(f1 - best)
        lines.append(
            f"| {language} | {densities[language]:.3f} | {best:.3f} {best_name} | "
            + " | ".join(cells)
            + " |"
        )
    lines += ["", "| teacher | " + " | ".join(languages) + " | worst | mean |"]
    lines.append("|---|" + "---:|" * (len(languages) + 2))
    for teacher in teachers:
        values = margins[teacher]
        known = [v for v in values if not math.isnan(v)]
        worst = min(known) if known else math.nan
        mean = statistics.fmean(known) if known else math.nan
        shown = " | ".join("-" if math.isnan(v) else f"{v:+.3f}" for v in values)
        lines.append(f"| {teacher} − best classic | {shown} | **{worst:+.3f}** | {mean:+.3f} |")
    return "\n".join(lines)


def curves(
    rows: dict[tuple[str, str], dict], system: str, client: MlflowClient
) -> dict[str, dict[int, list[tuple[int, float, float]]]]:
    """Per language and seed, ``(step, eval/boundary_f1, valid_bits_per_char)`` after every epoch."""
    out: dict[str, dict[int, list[tuple[int, float, float]]]] = {}
    for (language, name), row in rows.items():
        if name != system:
            continue
        for seed, values in row["seeds"].items():
            f1 = {
                m.step: m.value
                for m in client.get_metric_history(values["run_id"], "eval/boundary_f1")
            }
            bpc = {
                m.step: m.value
                for m in client.get_metric_history(values["run_id"], "valid_bits_per_char")
            }
            out.setdefault(language, {})[seed] = [
                (step, f1[step], bpc.get(step, math.nan)) for step in sorted(f1)
            ]
    return out


def curve_table(
    rows: dict[tuple[str, str], dict],
    system: str,
    history: dict[str, dict[int, list[tuple[int, float, float]]]],
) -> str:
    """Per corpus: the stopping point against 1,500 updates, and seed 0's curve."""
    lines = [
        f"| corpus | {system} at its stopping point: F1 | at 1,500 updates ({BUDGET_SYSTEM}) | "
        "difference | updates to the stop (seeds) | seed 0: gold F1 / held-out bits per character "
        "after each epoch |",
        "|---|---:|---:|---:|---|---|",
    ]
    for language, seeds in history.items():
        stop = _mean_sd(s["boundary_f1"] for s in rows[language, system]["seeds"].values())
        budget = rows.get((language, BUDGET_SYSTEM))
        at_budget = _mean_sd(s["boundary_f1"] for s in budget["seeds"].values()) if budget else None
        steps = ", ".join(str(points[-1][0]) for _, points in sorted(seeds.items()) if points)
        first = seeds.get(0) or next(iter(seeds.values()))
        shown = ", ".join(f"{f1:.3f} / {bpc:.2f}" for _, f1, bpc in first)
        budget_text, difference = "-", "-"
        if at_budget is not None:
            budget_text = f"{at_budget[0]:.3f} ± {at_budget[1]:.3f}"
            difference = f"{stop[0] - at_budget[0]:+.3f}"
        lines.append(
            f"| {language} | {stop[0]:.3f} ± {stop[1]:.3f} | {budget_text} | {difference} | "
            f"{steps} | {shown} |"
        )
    return "\n".join(lines)


def plot(history: dict[str, dict[int, list[tuple[int, float, float]]]], path: Path) -> None:
    """Gold boundary F1 and held-out bits per character against updates, a panel per corpus."""
    from matplotlib.figure import Figure

    languages = list(history)
    figure = Figure(figsize=(3.0 * len(languages), 4.6), dpi=100)
    axes = figure.subplots(2, len(languages), squeeze=False)
    for column, language in enumerate(languages):
        for seed, points in sorted(history[language].items()):
            steps = [p[0] for p in points]
            axes[0][column].plot(steps, [p[1] for p in points], marker=".", label=f"seed {seed}")
            axes[1][column].plot(steps, [p[2] for p in points], marker=".")
        axes[0][column].set_title(language)
        axes[0][column].set_ylim(0, 1)
        axes[1][column].set_xlabel("updates")
    axes[0][0].set_ylabel("gold boundary F1")
    axes[1][0].set_ylabel("held-out bits/char")
    axes[0][0].legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("benches", nargs="+", type=Path, help="finished transfer bench folders")
    parser.add_argument("--data-dir", type=Path, default=Path(DEFAULT_DATA_DIR))
    parser.add_argument(
        "--teachers", default="slm", help="the systems to judge, comma-separated (default: slm)"
    )
    parser.add_argument("--curve", help="a system whose gold curve to show (e.g. slm)")
    parser.add_argument("--plot", type=Path, help="draw the curve into this PNG")
    args = parser.parse_args(argv)
    try:
        client = MlflowClient()
        rows = summary(read_cells(args.benches), client)
        densities = gold_densities(args.data_dir)
        print(corpus_table(rows, densities, args.teachers.split(",")))
        if args.curve:
            history = curves(rows, args.curve, client)
            print()
            print(curve_table(rows, args.curve, history))
            if args.plot:
                plot(history, args.plot)
    except SegrlError as e:
        print(f"transfer_table: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
