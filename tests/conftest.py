"""Shared fixtures. Tests never write into the checkout: MLflow stores and caches go to tmp folders."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
SHARED_DATA = Path(os.environ.get("SEGRL_SHARED_DATA") or SHARED / "data")
"""``../shared/data`` beside the checkout, or ``$SEGRL_SHARED_DATA`` (a checkout elsewhere)."""
CHECKOUT = Path(__file__).resolve().parents[1]
"""The checkout under test: ``PYTHONPATH`` for the segrl processes a test starts."""


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("SEGRL_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture
def one_thread():
    """PyTorch on one thread for the test: tiny models run faster without thread hand-offs (much
    faster on a loaded machine)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def mlflow_store(tmp_path, monkeypatch) -> Path:
    """An empty working folder with no MLFLOW_TRACKING_URI: the default store ./mlflow.db is used."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_ID", raising=False)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    import mlflow

    while mlflow.active_run():
        mlflow.end_run()


def write_small_corpus(path: Path) -> Path:
    """A small English text with clear morphology (walk-ed, jump-ing, talk-s), one paragraph a line."""
    stems = ["walk", "talk", "jump", "play", "work", "help", "look", "call", "open", "kick"]
    lines = []
    for i, stem in enumerate(stems):
        other = stems[(i + 3) % len(stems)]
        lines.append(
            f"The man {stem}ed home. She is {stem}ing now. They {stem} often and he {stem}s too. "
            f"We {other}ed and {other}ing was fun. The {stem}er {other}s."
        )
    path.write_text("\n".join(lines * 3) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """The small corpus, loaded (every character kept), once per test module."""
    from segrl.config import DataConfig
    from segrl.data import load_corpus

    path = write_small_corpus(tmp_path_factory.mktemp("corpus") / "small.txt")
    return load_corpus(DataConfig(corpus=str(path), min_char_count=1))


@pytest.fixture(scope="module")
def morfessor(corpus, tmp_path_factory):
    """A Morfessor evaluator of the small corpus (its own cache), once per test module."""
    from segrl.evaluators import EvaluatorConfig, build_evaluator

    cache = tmp_path_factory.mktemp("morfessor")
    return build_evaluator(EvaluatorConfig(cache_dir=str(cache)), corpus)


@pytest.fixture
def small_corpus_file(tmp_path) -> Path:
    return write_small_corpus(tmp_path / "small.txt")


def shared_path(*parts: str) -> Path:
    """A path under ../shared/data; tests that use it skip where the checkout has no ../shared."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} not present: ../shared/data is only beside the development checkout")
    return path


def pytest_report_header(config):
    return f"shared data: {SHARED_DATA if SHARED_DATA.exists() else 'absent (tests that need it skip)'}; cpus: {os.cpu_count()}"


PLANTED = "open({marker!r}, 'w').write('ran')\n"
"""A module planted in the working folder: it writes ``marker`` if anything imports it."""


def plant_modules(folder: Path, names: list[str]) -> list[Path]:
    """``NAME.py`` in ``folder`` for each name, each writing ``ran-NAME`` there if imported: the
    markers."""
    markers = [folder / f"ran-{name}" for name in names]
    for name, marker in zip(names, markers, strict=True):
        (folder / f"{name}.py").write_text(PLANTED.format(marker=str(marker)), encoding="utf-8")
    return markers


def command_segments(command: list, words: list[str]) -> list[list[str]]:
    """``words`` as another tool's command segments them: one word a line on its standard input,
    one segmentation a line (segments separated by spaces) on its standard output."""
    found = subprocess.run(
        command, input="\n".join(words) + "\n", capture_output=True, text=True, check=True
    ).stdout.split("\n")
    return [line.split(" ") for line in found if line]
