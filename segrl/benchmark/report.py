"""A benchmark's results: mean and standard deviation over seeds per (language, system), as a printed
table per language, CSV, Markdown, and a bar chart of each row's headline F1 with error bars.

A language scored against gold words has the gold words' columns with boundary F1 as its headline; a
language whose corpus is segmented (word discovery) has word discovery's, with word token F1 as its
headline, and an ``slm``'s posterior decoding (logged beside its Viterbi one) as a row of its own,
``SYSTEM-posterior``."""

from __future__ import annotations

import csv
import statistics
from collections.abc import Sequence
from pathlib import Path

from segrl.benchmark.cells import METRICS, WORD_METRICS
from segrl.metrics import posterior_metrics

BEST_MARK = "*"
ALL_METRICS = tuple(dict.fromkeys((*METRICS, *WORD_METRICS)))
SPACES_GOLD = "spaces"
"""The gold of a language whose corpus is segmented: its own spaces (word discovery)."""
POSTERIOR_ROW = "-posterior"
"""The suffix of the row of an ``slm``'s posterior decoding (``slm-posterior``)."""


def with_posterior_rows(results: Sequence[dict]) -> list[dict]:
    """The results, each followed by the result of its posterior decoding where it logged one
    (``posterior/word_f1``): the same cell as a system ``SYSTEM-posterior``."""
    out = []
    for result in results:
        out.append(result)
        posterior = posterior_metrics(result)
        if posterior:
            out.append({**result, **posterior, "system": f"{result['system']}{POSTERIOR_ROW}"})
    return out


def headline(row: dict) -> str:
    """The metric a row is ranked by: word F1 where it has one (word discovery), else boundary F1."""
    value = row.get("word_f1_mean", float("nan"))
    return "word_f1" if value == value else "boundary_f1"


def summarise(results: Sequence[dict]) -> list[dict]:
    """One row per (language, system) with ``n_seeds`` and ``<metric>_mean``/``<metric>_sd`` (sample
    standard deviation over seeds; 0 with one seed), in the order the results come; failed cells are
    left out of the means and counted in ``failed``."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for result in with_posterior_rows(results):
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
        for metric in ALL_METRICS:
            values = [r[metric] for r in ok if metric in r]
            row[f"{metric}_mean"] = statistics.fmean(values) if values else float("nan")
            row[f"{metric}_sd"] = statistics.stdev(values) if len(values) > 1 else 0.0
        rows.append(row)
    return rows


def best_systems(rows: Sequence[dict]) -> dict[str, str]:
    """The system of highest mean headline F1 per language (``headline``)."""
    best: dict[str, dict] = {}
    for row in rows:
        f1 = row[f"{headline(row)}_mean"]
        if f1 == f1 and (
            row["language"] not in best or f1 > best[row["language"]][f"{headline(row)}_mean"]
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
    metrics = _columns(rows, language)[0]
    for row in rows:
        if row["language"] != language:
            continue
        failed = f" ({row['failed']} failed)" if row["failed"] else ""
        cells = [row["system"] + failed, str(row["n_seeds"]), *(_cell(row, m) for m in metrics)]
        out.append((best.get(language) == row["system"], cells))
    return out


def _heading(rows: Sequence[dict], language: str) -> str:
    """A language's heading: its name in the suite and its gold set's language."""
    gold = next(r["gold_language"] for r in rows if r["language"] == language)
    if gold == SPACES_GOLD:
        return f"{language} (gold: its spaces)"
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
WORD_HEADER = [
    "system",
    "seeds",
    "word P",
    "word R",
    "word F1",
    "boundary F1",
    "lexicon F1",
    "units/char",
]
WORD_F1_COLUMN = WORD_HEADER.index("word F1")


def _columns(rows: Sequence[dict], language: str) -> tuple[tuple[str, ...], list[str], int]:
    """A language's metrics, header and headline column: word discovery's where a row of it has
    word F1, else the gold words'."""
    if any(headline(r) == "word_f1" for r in rows if r["language"] == language):
        return WORD_METRICS, WORD_HEADER, WORD_F1_COLUMN
    return METRICS, HEADER, F1_COLUMN


def format_text(rows: Sequence[dict]) -> str:
    """A plain-text table per language; the best boundary F1 is marked with ``*``."""
    best = best_systems(rows)
    blocks = []
    for language in dict.fromkeys(r["language"] for r in rows):
        header = _columns(rows, language)[1]
        body = [
            [cells[0] + (f" {BEST_MARK}" if is_best else ""), *cells[1:]]
            for is_best, cells in _table_rows(rows, language, best)
        ]
        widths = [max(len(header[i]), *(len(r[i]) for r in body)) for i in range(len(header))]

        def line(cells: list[str], widths=widths) -> str:
            first = cells[0].ljust(widths[0])
            return "  ".join(
                [first, *(c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True))]
            )

        blocks.append(
            "\n".join(
                [
                    f"== {_heading(rows, language)}",
                    line(header),
                    line(["-" * w for w in widths]),
                    *map(line, body),
                ]
            )
        )
    return "\n\n".join(blocks) + "\n"


def format_markdown(rows: Sequence[dict], title: str = "") -> str:
    """The same tables in Markdown, the best headline F1 per language in bold."""
    best = best_systems(rows)
    parts = [f"## {title}\n"] if title else []
    for language in dict.fromkeys(r["language"] for r in rows):
        _metrics, header, f1_column = _columns(rows, language)
        parts.append(f"### {_heading(rows, language)}\n")
        parts.append("| " + " | ".join(header) + " |")
        parts.append("|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|")
        for is_best, cells in _table_rows(rows, language, best):
            if is_best:
                cells[0], cells[f1_column] = f"**{cells[0]}**", f"**{cells[f1_column]}**"
            parts.append("| " + " | ".join(cells) + " |")
        parts.append("")
    return "\n".join(parts)


def write_csv(rows: Sequence[dict], path: Path) -> Path:
    columns = ["language", "gold_language", "system", "n_seeds", "failed"] + [
        f"{m}_{s}" for m in ALL_METRICS for s in ("mean", "sd")
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
            if row is None or row[f"{headline(row)}_mean"] != row[f"{headline(row)}_mean"]:
                continue
            xs.append(i + (k - (len(systems) - 1) / 2) * width)
            means.append(row[f"{headline(row)}_mean"])
            sds.append(row[f"{headline(row)}_sd"])
        ax.bar(xs, means, width, yerr=sds, capsize=2, label=system)
    ax.set_xticks(range(len(languages)), languages)
    ax.set_ylabel("word F1 (word discovery) or boundary F1\n(mean ± sd over seeds)")
    ax.set_ylim(0, 1)
    ax.legend(fontsize="small", ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
