"""Plain-text tables of results, as ``segrl compare``, ``segrl curves`` and the experiments' text
artifacts print them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def format_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """A plain-text table; floats with 3 decimals, missing values as ``-``."""

    def cell(value: Any) -> str:
        if value is None:
            return "-"
        if isinstance(value, float):
            return f"{value:.3f}"
        return str(value)

    table = [list(columns)] + [[cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(columns))]
    lines = [
        "  ".join(
            v.ljust(w) if i == 0 else v.rjust(w)
            for i, (v, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in table
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
