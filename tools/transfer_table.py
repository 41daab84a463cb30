"""The transfer tables: a teacher on the seven corpora of the transfer suite against the best classic
segmenter, its worst corpus first, and its curve to its stopping point.

Reads finished benches of the ``transfer`` suite (their ``cells.json`` and the MLflow runs they
name, in the store ``MLFLOW_TRACKING_URI`` names) and prints Markdown:

- per corpus, the gold's density (units per character of its first analyses, on the suite's gold
  sample), the best classic segmenter (the best mean boundary F1 of Morfessor, FlatCat, SentencePiece
  unigram and BPE: ``characters`` is not a subword segmenter), and each teacher system's boundary
  precision / recall / F1 (mean ± sd over its seeds) and units per character of the gold words
  beside the gold's; then the margin of each teacher over the best classic, with its minimum over
  the corpora (the worst corpus) and its mean;
- ``--students SYSTEMS``: each agent beside its teacher, the LM that rewarded it (the agent run's
  own ``lm-viterbi`` and ``lm-posterior`` rows): what the student adds over its teacher, seed by
  seed, and its margin over the best classic segmenter;
- ``--curve SYSTEM``: that system's gold curve (``eval/boundary_f1``, logged by ``segrl lm train``
  after every epoch and by ``segrl train`` every ``--eval-every`` updates) and held-out bits per
  character (the agent's: its LM's marginal ones), to its stopping point, seed by seed, and the F1
  at its stopping point beside the F1 at the shorter budget (``slm`` beside ``slm-1500``,
  ``agent-6000`` beside ``agent``), and ``--plot FILE`` draws the curves.

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

CLASSIC = ("morfessor", "flatcat", "unigram", "bpe")
"""The classic subword segmenters, of which the best is the bar a teacher is judged against."""
BUDGET_SYSTEMS = {"slm": "slm-1500", "agent-6000": "agent"}
"""The suite's system at the shorter budget beside which each curve's stopping point is read: the
teacher at 1,500 updates, the main job at its default budget (2,000 updates, a third of 6,000)."""
TEACHER_ROWS = {"viterbi": "/lm-viterbi", "posterior": "/lm-posterior"}
"""The agent run's child runs that score its LM's own segmentations, by how they end."""
BITS_PER_CHAR = ("valid_bits_per_char", "eval/lm_marginal_bits_per_char")
"""The held-out bits per character of a teacher's run, and of an agent's LM."""


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


def summary(
    cells: list[dict], client: MlflowClient, students: Sequence[str] = ()
) -> dict[tuple[str, str], dict]:
    """Per (language, system): each seed's boundary P, R, F1 and gold units per character; for the
    ``students``, also their teacher's F1 (``viterbi``, ``posterior``) from the run's child rows."""
    out: dict[tuple[str, str], dict] = {}
    for cell in cells:
        run = client.get_run(cell["run_id"])
        metrics = run.data.metrics
        row = out.setdefault((cell["language"], cell["system"]), {"seeds": {}})
        seed = row["seeds"][int(cell["seed"])] = {
            name: metrics.get(name, math.nan)
            for name in ("boundary_precision", "boundary_recall", "boundary_f1")
        } | {"density": metrics.get("gold_units_per_char", math.nan), "run_id": cell["run_id"]}
        if cell["system"] in students:
            children = client.search_runs(
                [run.info.experiment_id], f"tags.mlflow.parentRunId = '{cell['run_id']}'"
            )
            for child in children:
                for decoding, ending in TEACHER_ROWS.items():
                    if child.info.run_name.endswith(ending):
                        seed[decoding] = child.data.metrics.get("boundary_f1", math.nan)
    return out


def _mean_sd(values: Sequence[float]) -> tuple[float, float]:
    values = list(values)
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def best_classic(rows: dict[tuple[str, str], dict], language: str) -> tuple[float, str]:
    """The best mean boundary F1 of the classic segmenters on a corpus, and its segmenter."""
    classic = [
        (_mean_sd(s["boundary_f1"] for s in rows[language, c]["seeds"].values())[0], c)
        for c in CLASSIC
        if (language, c) in rows
    ]
    return max(classic) if classic else (math.nan, "-")


def _margin_lines(
    label: str, margins: dict[str, list[float]], languages: Sequence[str]
) -> list[str]:
    """A row per system of its margins per corpus, their minimum (the worst corpus) and mean."""
    lines = [f"| {label} | " + " | ".join(languages) + " | worst | mean |"]
    lines.append("|---|" + "---:|" * (len(languages) + 2))
    for system, values in margins.items():
        known = [v for v in values if not math.isnan(v)]
        worst = min(known) if known else math.nan
        mean = statistics.fmean(known) if known else math.nan
        shown = " | ".join("-" if math.isnan(v) else f"{v:+.3f}" for v in values)
        lines.append(f"| {system} | {shown} | **{worst:+.3f}** | {mean:+.3f} |")
    return lines


def corpus_table(
    rows: dict[tuple[str, str], dict],
    densities: dict[str, float],
    teachers: Sequence[str],
) -> str:
    """The seven-corpus table and the margins over the best classic segmenter."""
    languages = list(densities)
    lines = [
        "| corpus | gold morphs/char | best classic | "
        + " | ".join(f"{t}: P / R / F1 (gold units/char)" for t in teachers)
        + " |",
        "|---|---:|---|" + "---|" * len(teachers),
    ]
    margins: dict[str, list[float]] = {t: [] for t in teachers}
    for language in languages:
        best, best_name = best_classic(rows, language)
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
    named = {f"{teacher} − best classic": values for teacher, values in margins.items()}
    return "\n".join([*lines, "", *_margin_lines("teacher", named, languages)])


def student_table(
    rows: dict[tuple[str, str], dict], languages: Sequence[str], students: Sequence[str]
) -> str:
    """Each student beside its teacher (its LM's Viterbi and posterior segmentations of the same
    gold, at the end of the same run), seed by seed, and both against the best classic."""
    lines = [
        "| corpus | best classic | student | its F1 | teacher: Viterbi | teacher: posterior | "
        "student − Viterbi, per seed |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    margins: dict[str, list[float]] = {}
    for student in students:
        added, over_classic = [], []
        for language in languages:
            best, best_name = best_classic(rows, language)
            if (language, student) not in rows:
                added.append(math.nan)
                over_classic.append(math.nan)
                continue
            seeds = rows[language, student]["seeds"]
            f1, sd = _mean_sd(s["boundary_f1"] for s in seeds.values())
            cells = []
            for decoding in TEACHER_ROWS:
                mean, spread = _mean_sd(s.get(decoding, math.nan) for s in seeds.values())
                cells.append(f"{mean:.3f} ± {spread:.3f}")
            per_seed = ", ".join(
                f"{s['boundary_f1'] - s.get('viterbi', math.nan):+.3f}"
                for _, s in sorted(seeds.items())
            )
            lines.append(
                f"| {language} | {best:.3f} {best_name} | {student} | **{f1:.3f} ± {sd:.3f}** | "
                + " | ".join(cells)
                + f" | {per_seed} |"
            )
            teacher = _mean_sd(s.get("viterbi", math.nan) for s in seeds.values())[0]
            added.append(f1 - teacher)
            over_classic.append(f1 - best)
        margins[f"{student} − its teacher (Viterbi)"] = added
        margins[f"{student} − best classic"] = over_classic
    return "\n".join([*lines, "", *_margin_lines("student", margins, languages)])


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
            bpc = {}
            for name in BITS_PER_CHAR:
                bpc = bpc or {
                    m.step: m.value for m in client.get_metric_history(values["run_id"], name)
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
    """Per corpus: the stopping point against the shorter budget, and seed 0's curve."""
    shorter = BUDGET_SYSTEMS.get(system, "-")
    lines = [
        f"| corpus | {system} at its stopping point: F1 | at the shorter budget ({shorter}) | "
        "difference | updates to the stop (seeds) | seed 0: gold F1 / held-out bits per character "
        "at each evaluation |",
        "|---|---:|---:|---:|---|---|",
    ]
    for language, seeds in history.items():
        stop = _mean_sd(s["boundary_f1"] for s in rows[language, system]["seeds"].values())
        budget = rows.get((language, shorter))
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
    parser.add_argument(
        "--students", default="", help="agent systems to show beside their teachers (e.g. agent)"
    )
    parser.add_argument("--curve", help="a system whose gold curve to show (e.g. slm)")
    parser.add_argument("--plot", type=Path, help="draw the curve into this PNG")
    args = parser.parse_args(argv)
    try:
        client = MlflowClient()
        students = [s for s in args.students.split(",") if s]
        rows = summary(read_cells(args.benches), client, students)
        densities = gold_densities(args.data_dir)
        print(corpus_table(rows, densities, args.teachers.split(",")))
        if students:
            print()
            print(student_table(rows, list(densities), students))
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
