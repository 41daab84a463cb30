"""The transfer tables: a teacher on the seven corpora of the transfer suite against the best classic
segmenter, its worst corpus first, each student beside its teacher, and curves to the stopping point.

Two steps, so that the tables in ``docs/results.md`` are generated from a report kept beside them:

- ``collect BENCH...`` reads finished benches of the ``transfer`` suite (their ``cells.json`` and
  the MLflow runs they name, in the store ``MLFLOW_TRACKING_URI`` names) and the suite's gold
  samples, and writes a report: per cell its system, corpus, seed, commit, command, boundary
  precision / recall / F1 and units per character of the gold words, an agent's own LM's
  segmentations of the same gold (its ``lm-viterbi`` and ``lm-posterior`` child runs), and the gold
  curve (``eval/boundary_f1`` with the held-out bits per character) where the run logged one;
  per corpus the gold's own units per character.
- ``table REPORT`` prints Markdown from a report alone (no MLflow, no data):

  - per corpus, the gold's density, the best classic segmenter (the best mean boundary F1 of
    Morfessor, FlatCat, SentencePiece unigram and BPE: ``characters`` is not a subword
    segmenter), and each ``--teachers`` system's P / R / F1 (mean ± sd over its seeds) and units
    per character; then each one's margin over the best classic, its minimum over the corpora (the
    worst corpus) and its mean;
  - ``--students SYSTEMS``: each agent beside its teacher, the LM that rewarded it: what the
    student adds over its teacher, seed by seed, and its margin over the best classic segmenter;
  - ``--curve SYSTEM``: that system's gold curve and held-out bits per character to its stopping
    point, and its F1 there beside the F1 at the shorter budget (``slm`` beside ``slm-1500``,
    ``agent-6000`` beside ``agent``); ``--plot FILE`` draws the curves.
- ``page FILE`` rewrites every generated block of a Markdown page (between ``<!-- table: ARGS -->``
  and ``<!-- end table -->``, ARGS being a ``table`` command's arguments) from its report;
  ``--check`` only says which blocks disagree with their reports (exit 1).

    MLFLOW_TRACKING_URI=sqlite:///mlflow.db python tools/transfer_table.py collect \\
        runs/bench/transfer-classic runs/bench/transfer-teacher --out docs/reports/transfer.json
    python tools/transfer_table.py table docs/reports/transfer.json --curve slm --plot curves.png
    python tools/transfer_table.py page docs/results.md

Every figure comes from the benches' own runs; nothing here trains or reads a threshold off gold.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shlex
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

from segrl.benchmark.suite import DEFAULT_DATA_DIR, load_suite
from segrl.data.gold import load_gold
from segrl.errors import SegrlError
from segrl.metrics import units_per_char

CLASSIC = ("morfessor", "flatcat", "unigram", "bpe")
"""The classic subword segmenters, of which the best is the bar a teacher is judged against."""
BUDGET_SYSTEMS = {"slm": "slm-1500", "agent-6000": "agent"}
"""The suite's system at the shorter budget beside which each curve's stopping point is read: the
teacher at 1,500 updates, the main job at its default budget (2,000 updates, a third of 6,000)."""


def shorter_budget(system: str) -> str:
    """The system at the shorter budget for ``system``'s curve (``BUDGET_SYSTEMS``), an earlier
    design's (``agent-6000-before``: ``agent-before``) too; "-" where there is none."""
    names = [*BUDGET_SYSTEMS, *BUDGET_SYSTEMS.values()]
    base = max(
        (n for n in names if system == n or system.startswith(f"{n}-")), key=len, default=None
    )
    if base not in BUDGET_SYSTEMS:  # no curve system, or a shorter budget itself (slm-1500)
        return "-"
    return BUDGET_SYSTEMS[base] + system.removeprefix(base)


TEACHER_ROWS = {"viterbi": "/lm-viterbi", "posterior": "/lm-posterior"}
"""The agent run's child runs that score its LM's own segmentations, by how they end."""
BITS_PER_CHAR = ("valid_bits_per_char", "eval/lm_marginal_bits_per_char")
"""The held-out bits per character of a teacher's run, and of an agent's LM."""


def read_cells(benches: Sequence[str | Path]) -> list[dict]:
    """Every finished cell of the benches (their ``cells.json``), the later bench's cell first
    where two benches ran the same one. A bench given as ``FOLDER:SUFFIX`` names its systems with
    ``-SUFFIX`` added (``slm`` of an earlier design as ``slm-SUFFIX``), so that one report can hold
    a design beside the one that replaced it."""
    cells: dict[str, dict] = {}
    for given in benches:
        bench, _, suffix = str(given).partition(":")
        path = Path(bench) / "cells.json"
        if not path.is_file():
            raise SegrlError(f"{bench}: no cells.json; give the folder of a finished segrl bench")
        for cell in json.loads(path.read_text(encoding="utf-8")):
            if cell.get("status") in ("done", "skipped"):
                if suffix:
                    system = f"{cell['system']}-{suffix}"
                    cell = {**cell, "system": system, "cell": f"{cell['cell']}:{suffix}"}
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


def collect(cells: list[dict], client) -> list[dict]:
    """The report's cells: each bench cell's figures, read from its MLflow run (and its children's,
    where it rewarded an agent with its own LM), and its gold curve where the run logged one."""
    out = []
    for cell in cells:
        run = client.get_run(cell["run_id"])
        metrics = run.data.metrics
        entry = {
            "language": cell["language"],
            "system": cell["system"],
            "seed": int(cell["seed"]),
            "run_id": cell["run_id"],
            "commit": run.data.tags.get("segrl.git_commit", "unknown"),
            "command": cell.get("command", ""),
        }
        for name in ("boundary_precision", "boundary_recall", "boundary_f1"):
            entry[name] = metrics.get(name, math.nan)
        entry["density"] = metrics.get("gold_units_per_char", math.nan)
        children = client.search_runs(
            [run.info.experiment_id], f"tags.mlflow.parentRunId = '{cell['run_id']}'"
        )
        for child in children:
            for decoding, ending in TEACHER_ROWS.items():
                if child.info.run_name.endswith(ending):
                    entry[decoding] = child.data.metrics.get("boundary_f1", math.nan)
        f1 = {
            m.step: m.value for m in client.get_metric_history(cell["run_id"], "eval/boundary_f1")
        }
        if f1:
            bpc = {}
            for name in BITS_PER_CHAR:
                bpc = bpc or {
                    m.step: m.value for m in client.get_metric_history(cell["run_id"], name)
                }
            entry["curve"] = [[step, f1[step], bpc.get(step, math.nan)] for step in sorted(f1)]
        out.append(entry)
    return sorted(out, key=lambda e: (e["language"], e["system"], e["seed"]))


def write_report(path: Path, densities: dict[str, float], cells: list[dict]) -> None:
    """The report as JSON, a line per cell (a missing figure is ``null``), corpora in the suite's
    order."""

    def plain(value):
        if isinstance(value, float) and math.isnan(value):
            return None
        if isinstance(value, list):
            return [plain(v) for v in value]
        return value

    lines = [
        json.dumps({k: plain(v) for k, v in cell.items()}, ensure_ascii=False) for cell in cells
    ]
    text = (
        f'{{"suite": "transfer",\n "gold_units_per_char": {json.dumps(densities)},\n "cells": [\n'
        + ",\n".join(lines)
        + "\n]}\n"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def read_report(path: Path) -> tuple[dict[str, float], list[dict]]:
    """A report's gold densities and cells (``null`` read back as NaN)."""
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
        densities = report["gold_units_per_char"]
        cells = report["cells"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SegrlError(
            f"{path}: not a transfer report ({e}); write one with 'transfer_table.py collect'"
        ) from None

    def number(value):
        return math.nan if value is None else value

    for cell in cells:
        for key in (*TEACHER_ROWS, "boundary_precision", "boundary_recall", "boundary_f1"):
            if key in cell:
                cell[key] = number(cell[key])
        cell["density"] = number(cell.get("density"))
        if "curve" in cell:
            cell["curve"] = [[s, number(f), number(b)] for s, f, b in cell["curve"]]
    return densities, cells


def summary(cells: list[dict]) -> dict[tuple[str, str], dict]:
    """Per (language, system): each seed's figures (boundary P, R, F1, gold units per character,
    the teacher's F1 where the cell is a student's)."""
    out: dict[tuple[str, str], dict] = {}
    for cell in cells:
        row = out.setdefault((cell["language"], cell["system"]), {"seeds": {}})
        row["seeds"][cell["seed"]] = cell
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
    margins_only: bool = False,
) -> str:
    """The seven-corpus table and the margins over the best classic segmenter (``margins_only``:
    the margins alone, a row per design)."""
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
    margin_lines = _margin_lines("teacher", named, languages)
    return "\n".join(margin_lines if margins_only else [*lines, "", *margin_lines])


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
    rows: dict[tuple[str, str], dict], system: str
) -> dict[str, dict[int, list[tuple[int, float, float]]]]:
    """Per language and seed, ``(step, eval/boundary_f1, held-out bits per character)``."""
    out: dict[str, dict[int, list[tuple[int, float, float]]]] = {}
    for (language, name), row in rows.items():
        if name != system:
            continue
        for seed, values in row["seeds"].items():
            out.setdefault(language, {})[seed] = [tuple(p) for p in values.get("curve", [])]
    return out


def curve_table(
    rows: dict[tuple[str, str], dict],
    system: str,
    history: dict[str, dict[int, list[tuple[int, float, float]]]],
) -> str:
    """Per corpus: the stopping point against the shorter budget, and seed 0's curve."""
    shorter = shorter_budget(system)
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


def tables(argv: Sequence[str], plot_to: bool = True) -> str:
    """The Markdown of a ``table`` command (its arguments without ``table``)."""
    parser = argparse.ArgumentParser(prog="transfer_table.py table")
    parser.add_argument("report", type=Path, help="a report written by 'collect'")
    parser.add_argument(
        "--teachers",
        default="slm",
        help="the systems to judge, comma-separated (default: slm; '' for none)",
    )
    parser.add_argument(
        "--students", default="", help="agent systems to show beside their teachers (e.g. agent)"
    )
    parser.add_argument(
        "--margins-only",
        action="store_true",
        help="of the teachers, only their margins over the best classic segmenter",
    )
    parser.add_argument("--curve", help="a system whose gold curve to show (e.g. slm)")
    parser.add_argument("--plot", type=Path, help="draw the curve into this PNG")
    args = parser.parse_args(argv)
    densities, cells = read_report(args.report)
    rows = summary(cells)
    students = [s for s in args.students.split(",") if s]
    teachers = [t for t in args.teachers.split(",") if t]
    parts = [corpus_table(rows, densities, teachers, args.margins_only)] if teachers else []
    if students:
        parts.append(student_table(rows, list(densities), students))
    if args.curve:
        history = curves(rows, args.curve)
        history = {language: history[language] for language in densities if language in history}
        parts.append(curve_table(rows, args.curve, history))
        if args.plot and plot_to:
            plot(history, args.plot)
    return "\n\n".join(parts)


BLOCK = re.compile(r"(<!-- table: (?P<args>[^\n]*?) -->\n)(?P<body>.*?)(<!-- end table -->)", re.S)
"""A generated block of a page: the ``table`` command's arguments, its output, the end mark."""


def page(path: Path, check: bool) -> list[str]:
    """Rewrite (or, with ``check``, compare) every generated block of a Markdown page; the
    arguments of each block whose text is not what its report gives. Report paths in a block are
    relative to the repository (the page's folder's parent)."""
    text = path.read_text(encoding="utf-8")
    root = path.resolve().parent.parent
    stale: list[str] = []

    def render(match: re.Match) -> str:
        argv = shlex.split(match["args"])
        argv[0] = str(root / argv[0])
        body = tables(argv, plot_to=False) + "\n"
        if body != match["body"]:
            stale.append(match["args"])
        return match.group(1) + body + match.group(4)

    new = BLOCK.sub(render, text)
    if not BLOCK.search(text):
        raise SegrlError(f"{path}: no generated block ('<!-- table: ARGS -->')")
    if not check and new != text:
        path.write_text(new, encoding="utf-8")
    return stale


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = ("collect", "table", "page")
    if not argv or argv[0] not in commands:
        print(__doc__)
        print(f"transfer_table: error: give a command: {', '.join(commands)}", file=sys.stderr)
        return 2
    command, rest = argv[0], argv[1:]
    try:
        if command == "table":
            print(tables(rest))
        elif command == "page":
            parser = argparse.ArgumentParser(prog="transfer_table.py page")
            parser.add_argument("page", type=Path)
            parser.add_argument("--check", action="store_true")
            args = parser.parse_args(rest)
            stale = page(args.page, args.check)
            for block in stale:
                verb = "disagrees with its report" if args.check else "regenerated"
                print(f"{args.page}: table '{block}' {verb}", file=sys.stderr)
            return 1 if args.check and stale else 0
        else:
            parser = argparse.ArgumentParser(prog="transfer_table.py collect")
            parser.add_argument(
                "benches",
                nargs="+",
                help="finished bench folders (FOLDER:SUFFIX: its systems named SYSTEM-SUFFIX)",
            )
            parser.add_argument("--data-dir", type=Path, default=Path(DEFAULT_DATA_DIR))
            parser.add_argument("--out", type=Path, required=True, help="the report to write")
            args = parser.parse_args(rest)
            from mlflow.tracking import MlflowClient

            cells = collect(read_cells(args.benches), MlflowClient())
            write_report(args.out, gold_densities(args.data_dir), cells)
            print(f"{args.out}: {len(cells)} cells")
    except SegrlError as e:
        print(f"transfer_table: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
