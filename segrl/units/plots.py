"""Figures of unit models: attention maps (queries x keys, one panel per layer) and robustness curves.

Figures are ``matplotlib.figure.Figure`` objects (no pyplot state, no backend needed), returned, not
shown; ``segrl.tracking.runs.log_figure`` logs them to MLflow as images.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure

from segrl.data.vocab import CharVocab
from segrl.units.base import UnitModel
from segrl.units.evaluation import encode_texts


def attention_maps(
    model: UnitModel, vocab: CharVocab, text: str, layers: int = 3, precision: str = "fp32"
) -> dict[str, np.ndarray]:
    """The top ``layers`` attention maps of ``model`` for ``text``: name -> ``[len(text), keys]``."""
    [(_, encoding)] = list(encode_texts(model, vocab, [text], 1, precision))
    names = list(encoding.layer_attention)[-layers:] if layers > 0 else []
    out = {}
    for name in names:
        weights = encoding.layer_attention[name][0, : len(text)].float().cpu()  # [L, S]
        out[name] = weights.numpy()
    return out


def attention_figure(
    maps: Mapping[str, np.ndarray],
    text: str,
    title: str = "",
    unit_keys: Collection[str] = (),
) -> Figure:
    """One heat map per layer, side by side (bottom layer left), 0 dark to 1 light as in the NVIB
    paper; rows are the characters of ``text`` (queries), columns the keys (characters, then any
    extra keys such as NVIB's prior component, labelled ``*``; for the maps named in ``unit_keys``,
    unit vectors labelled by their index)."""
    n = max(len(maps), 1)
    size = max(3.0, 0.12 * len(text) + 1.5)
    fig = Figure(figsize=(size * n, size))
    axes = fig.subplots(1, n, squeeze=False)
    chars = [c if c != " " else "\u2423" for c in text]
    for ax, (name, weights) in zip(axes[0], maps.items(), strict=False):
        ax.imshow(weights, vmin=0.0, vmax=1.0, cmap="viridis", aspect="equal")
        if name in unit_keys:
            keys = [str(i) for i in range(weights.shape[1])]
        else:
            keys = chars + ["*"] * (weights.shape[1] - len(chars))
        fontsize = 7 if len(text) <= 40 else 4
        ax.set_xticks(range(len(keys)), keys, fontsize=fontsize)
        ax.set_yticks(range(len(chars)), chars, fontsize=fontsize)
        ax.set_title(name)
        ax.set_xlabel("keys")
    axes[0][0].set_ylabel("queries")
    if title:
        fig.suptitle(title)
    fig.tight_layout(rect=(0, 0, 1, 0.94) if title else None)
    return fig


def robustness_figure(
    results: Mapping[str, Sequence[Mapping[str, float | str]]], metric: str = "accuracy"
) -> Figure:
    """``metric`` against the perturbation rate, per noise kind (one column each), one line per
    model: the relative change against clean input as in the NVIB paper (top row), and the values
    themselves (bottom row; models whose clean values differ are only comparable with both).
    ``results[model]`` rows have ``kind``, ``rate`` and the metric."""
    kinds = sorted({str(row["kind"]) for rows in results.values() for row in rows})
    n = max(len(kinds), 1)
    fig = Figure(figsize=(4 * n, 6.4))
    axes = fig.subplots(2, n, squeeze=False, sharex=True)
    for column, kind in enumerate(kinds):
        for model, rows in results.items():
            points = sorted((float(r["rate"]), float(r[metric])) for r in rows if r["kind"] == kind)
            if not points:
                continue
            rates, values = zip(*points, strict=True)
            base = values[0] if rates[0] == 0 else float("nan")
            change = [(v - base) / abs(base) if base else float("nan") for v in values]
            axes[0][column].plot(rates, np.asarray(change) * 100, marker="o", label=model)
            axes[1][column].plot(rates, values, marker="o", label=model)
        axes[0][column].set_title(kind)
        axes[0][column].axhline(0.0, color="grey", linewidth=0.5)
        axes[1][column].set_xlabel("perturbation rate")
    axes[0][0].set_ylabel(f"relative change of {metric} [%]")
    axes[1][0].set_ylabel(metric)
    axes[0][-1].legend()
    fig.tight_layout()
    return fig
