"""A benchmark's results: mean and standard deviation over seeds per (language, system), as a printed
table per language, CSV, Markdown, and a bar chart of boundary F1 with error bars."""

from __future__ import annotations

import csv
import statistics
from collections.abc import Sequence
from pathlib import Path

from segrl.benchmark.cells import METRICS

BEST_MARK = "*"


def summarise(results: Sequence[dict]) -> list[dict]:
    """One row per (language, system) with ``n_seeds`` and ``<metric>_mean``/``<metric>_sd`` (sample
    standard deviation over seeds; 0 with one seed), in the order the results come; failed cells are
    left out of the means and counted in ``failed``."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for result in results:
        groups.setdefault((result["language"], result["system"]), []).append(result)
    rows = []
    for (language, system), group in groups.items():
        ok = [r for r in group if r.get("status") in ("done", "skipped")]
        row: dict = {
            "language": language,
            "gold_language": group[0].get("gold_language", "unknown"),
            "system": system,
            "n_seeds": len(ok),
            "failed": len(group) - len(ok),
        }
        for metric in METRICS:
            values = [r[metric] for r in ok if metric in r]
            row[f"{metric}_mean"] = statistics.fmean(values) if values else float("nan")
            row[f"{metric}_sd"] = statistics.stdev(values) if len(values) > 1 else 0.0
        rows.append(row)
    return rows


def best_systems(rows: Sequence[dict]) -> dict[str, str]:
    """The system of highest mean boundary F1 per language."""
    best: dict[str, dict] = {}
    for row in rows:
        f1 = row["boundary_f1_mean"]
        if f1 == f1 and (
            row["language"] not in best or f1 > best[row["language"]]["boundary_f1_mean"]
        ):
            best[row["language"]] = row
    return {language: row["system"] for language, row in best.items()}


def _cell(row: dict, metric: str) -> str:
    mean, sd = row[f"{metric}_mean"], row[f"{metric}_sd"]
    if mean != mean:
        return "-"
    return f"{mean:.3f}" if row["n_seeds"] < 2 else f"{mean:.3f} ± {sd:.3f}"


def _table_rows(
    rows: Sequence[dict], language: str, best: dict[str, str]
) -> list[tuple[bool, list[str]]]:
    """``(is the best F1, cells)`` for each system of ``language``."""
    out = []
    for row in rows:
        if row["language"] != language:
            continue
        failed = f" ({row['failed']} failed)" if row["failed"] else ""
        cells = [row["system"] + failed, str(row["n_seeds"]), *(_cell(row, m) for m in METRICS)]
        out.append((best.get(language) == row["system"], cells))
    return out


def _heading(rows: Sequence[dict], language: str) -> str:
    """A language's heading: its name in the suite and its gold set's language."""
    gold = next(r["gold_language"] for r in rows if r["language"] == language)
    return f"{language} (gold: {gold})"


HEADER = [
    "system",
    "seeds",
    "boundary P",
    "boundary R",
    "boundary F1",
    "bpr F1",
    "morph F1",
    "units/char",
]
F1_COLUMN = HEADER.index("boundary F1")


def format_text(rows: Sequence[dict]) -> str:
    """A plain-text table per language; the best boundary F1 is marked with ``*``."""
    best = best_systems(rows)
    blocks = []
    for language in dict.fromkeys(r["language"] for r in rows):
        body = [
            [cells[0] + (f" {BEST_MARK}" if is_best else ""), *cells[1:]]
            for is_best, cells in _table_rows(rows, language, best)
        ]
        widths = [max(len(HEADER[i]), *(len(r[i]) for r in body)) for i in range(len(HEADER))]

        def line(cells: list[str], widths=widths) -> str:
            first = cells[0].ljust(widths[0])
            return "  ".join(
                [first, *(c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True))]
            )

        blocks.append(
            "\n".join(
                [
                    f"== {_heading(rows, language)}",
                    line(HEADER),
                    line(["-" * w for w in widths]),
                    *map(line, body),
                ]
            )
        )
    return "\n\n".join(blocks) + "\n"


def format_markdown(rows: Sequence[dict], title: str = "") -> str:
    """The same tables in Markdown, the best boundary F1 per language in bold."""
    best = best_systems(rows)
    parts = [f"## {title}\n"] if title else []
    for language in dict.fromkeys(r["language"] for r in rows):
        parts.append(f"### {_heading(rows, language)}\n")
        parts.append("| " + " | ".join(HEADER) + " |")
        parts.append("|" + "|".join(["---"] + ["---:"] * (len(HEADER) - 1)) + "|")
        for is_best, cells in _table_rows(rows, language, best):
            if is_best:
                cells[0], cells[F1_COLUMN] = f"**{cells[0]}**", f"**{cells[F1_COLUMN]}**"
            parts.append("| " + " | ".join(cells) + " |")
        parts.append("")
    return "\n".join(parts)


def write_csv(rows: Sequence[dict], path: Path) -> Path:
    columns = ["language", "gold_language", "system", "n_seeds", "failed"] + [
        f"{m}_{s}" for m in METRICS for s in ("mean", "sd")
    ]
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        for row in rows:
            writer.writerow({c: row[c] for c in columns})
    return path


def plot_f1(rows: Sequence[dict], path: Path) -> Path:
    """Grouped bars: one group per language, one bar per system, error bars of one standard
    deviation over seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    languages = list(dict.fromkeys(r["language"] for r in rows))
    systems = list(dict.fromkeys(r["system"] for r in rows))
    by_key = {(r["language"], r["system"]): r for r in rows}
    width = 0.8 / max(len(systems), 1)
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(languages) * max(len(systems), 1) * 0.5), 4))
    for k, system in enumerate(systems):
        xs, means, sds = [], [], []
        for i, language in enumerate(languages):
            row = by_key.get((language, system))
            if row is None or row["boundary_f1_mean"] != row["boundary_f1_mean"]:
                continue
            xs.append(i + (k - (len(systems) - 1) / 2) * width)
            means.append(row["boundary_f1_mean"])
            sds.append(row["boundary_f1_sd"])
        ax.bar(xs, means, width, yerr=sds, capsize=2, label=system)
    ax.set_xticks(range(len(languages)), languages)
    ax.set_ylabel("boundary F1 (mean ± sd over seeds)")
    ax.set_ylim(0, 1)
    ax.legend(fontsize="small", ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
