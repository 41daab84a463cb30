"""Training curves of runs side by side: the metric histories of
``segrl.tracking.queries.metric_histories`` as one table per metric (a row per logged step, a column
per run) and as a chart (``segrl curves``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

Histories = Mapping[str, Mapping[str, Mapping[int, float]]]
"""``{run: {metric: {step: value}}}``."""


def curve_rows(histories: Histories, metric: str, every: int = 1) -> list[dict]:
    """One row per step at which any run logged ``metric`` (only steps that are multiples of
    ``every``, and always the last), with ``step`` and each run's value there (missing: None)."""
    if every < 1:
        raise ValueError(f"every must be at least 1, got {every}")
    steps = sorted({step for run in histories.values() for step in run.get(metric, {})})
    if steps:
        steps = [s for s in steps if s % every == 0 or s == steps[-1]]
    return [
        {"step": step, **{run: histories[run].get(metric, {}).get(step) for run in histories}}
        for step in steps
    ]


def format_curves(histories: Histories, metrics: Sequence[str], every: int = 1) -> str:
    """A plain-text table per metric; a metric no run logged says so."""
    from segrl.tables import format_table

    blocks = []
    for metric in metrics:
        rows = curve_rows(histories, metric, every)
        if not rows:
            blocks.append(f"{metric}: not logged by any of the runs")
            continue
        blocks.append(f"{metric}:\n" + format_table(rows, ["step", *histories]))
    return "\n\n".join(blocks)


def plot_curves(histories: Histories, metrics: Sequence[str], path: str | Path) -> Path:
    """A PNG with one panel per metric, a line per run; returns its path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure, axes = plt.subplots(
        len(metrics), 1, figsize=(7, 2.6 * len(metrics)), sharex=True, squeeze=False
    )
    for axis, metric in zip(axes[:, 0], metrics, strict=True):
        for run, by_metric in histories.items():
            points = sorted(by_metric.get(metric, {}).items())
            if points:
                axis.plot([s for s, _ in points], [v for _, v in points], label=run)
        axis.set_ylabel(metric, fontsize=8)
        axis.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=8)
    axes[-1, 0].set_xlabel("step")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
