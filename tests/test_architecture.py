"""The layers of ``docs/architecture.md``, kept by import-linter's contracts in ``pyproject.toml``:
a module imports only from the layers below its own (imports inside functions included), no two
modules of a package import each other, and sibling kinds (algorithms, evaluators, models) stay apart."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from segrl.agents.config import AGENT_NAMES
from segrl.agents.registry import AGENTS
from segrl.baselines import SEGMENTERS, Segmenter

ROOT = Path(__file__).resolve().parents[1]


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` (import-linter, of the dev extra) on the ``segrl`` package under ``root``
    with the contracts of ``root/pyproject.toml``."""
    executable = Path(sys.executable).with_name("lint-imports")
    assert executable.exists(), f"{executable}: missing; install segrl's dev extra (import-linter)"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(
        [str(executable), "--no-cache", "--no-logo"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_import_contracts_hold():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_an_upward_import_inside_a_function_breaks_the_layers(tmp_path):
    """The contract sees through function-local imports: a copy of segrl whose bottom layer
    imports the command line inside a function fails, naming the import."""
    shutil.copytree(
        ROOT / "segrl", tmp_path / "segrl", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    with (tmp_path / "segrl" / "errors.py").open("a", encoding="utf-8") as f:
        f.write("\n\ndef _upward():\n    from segrl.cli import main\n\n    return main\n")
    result = lint_imports(tmp_path)
    assert result.returncode != 0
    assert "segrl.errors is not allowed to import segrl.cli" in result.stdout


def test_the_agent_names_below_the_registry_are_the_registry_s():
    """``TrainConfig`` checks ``agent`` against names it holds itself (the registry sits above the
    config, importing the jobs that import it): they must be the registry's."""
    assert tuple(AGENTS) == AGENT_NAMES


def test_the_evaluator_names_the_config_checks_are_the_registry_s():
    import typing

    from segrl.evaluators.registry import EVALUATORS, EvaluatorName

    assert tuple(EVALUATORS) == typing.get_args(EvaluatorName)


def test_every_classic_segmenter_is_loadable_by_its_method():
    """``Segmenter.load`` finds a saved segmenter's class among the classes entered as they are
    defined (the registry sits above the base class): every one the registry lists is there."""
    for method, cls in SEGMENTERS.items():
        assert Segmenter._classes[method] is cls
