"""The layers of ``docs/architecture.md``, kept by import-linter's contracts in ``pyproject.toml``:
a module imports only from the layers below its own (imports inside functions included; the models
below the job skeleton and tracking, with no exception), no two modules of a package import each
other, sibling kinds (algorithms, evaluators, models) stay apart, and who may import MLflow,
stable-baselines3 and the evaluators' implementations is limited whatever the layer. Each of the
last contracts is shown to catch a wrong import planted in a copy of the package, which the
contracts before it let through."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path

import pytest

from segrl.agents.registry import AGENT_NAMES, AGENTS
from segrl.baselines import SEGMENTERS, Segmenter

ROOT = Path(__file__).resolve().parents[1]


def lint_imports(root: Path, contracts: Sequence[str] = ()) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` (import-linter, of the dev extra) on the ``segrl`` package under ``root``
    with the contracts of ``root/pyproject.toml`` (only those whose ids are in ``contracts``, if
    given)."""
    executable = Path(sys.executable).with_name("lint-imports")
    assert executable.exists(), f"{executable}: missing; install segrl's dev extra (import-linter)"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
    }
    only = [arg for contract in contracts for arg in ("--contract", contract)]
    return subprocess.run(
        [str(executable), "--no-cache", "--no-logo", *only],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def contract_ids(root: Path) -> list[str]:
    """The ids of the import contracts in ``root/pyproject.toml``, in order."""
    with (root / "pyproject.toml").open("rb") as f:
        config = tomllib.load(f)
    return [contract["id"] for contract in config["tool"]["importlinter"]["contracts"]]


def package_copy(tmp_path: Path) -> Path:
    """A copy of segrl and its ``pyproject.toml`` under ``tmp_path``."""
    shutil.copytree(
        ROOT / "segrl", tmp_path / "segrl", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def planted_copy(tmp_path: Path, module_file: str, statement: str) -> Path:
    """A copy of segrl (``package_copy``) whose ``module_file`` (a path under ``segrl/``) ends with
    a function that runs ``statement``, an import."""
    root = package_copy(tmp_path)
    with (root / "segrl" / module_file).open("a", encoding="utf-8") as f:
        f.write(f"\n\ndef _planted():\n    {statement}\n")
    return root


def test_the_import_contracts_hold():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_an_upward_import_inside_a_function_breaks_the_layers(tmp_path):
    """The contract sees through function-local imports: a copy of segrl whose bottom layer
    imports the command line inside a function fails, naming the import."""
    root = planted_copy(tmp_path, "errors.py", "from segrl.cli import main")
    result = lint_imports(root)
    assert result.returncode != 0
    assert "segrl.errors is not allowed to import segrl.cli" in result.stdout


@pytest.mark.parametrize(
    ("module_file", "statement", "report"),
    [
        # an environment, a model: straight to the job skeleton, to tracking
        pytest.param(
            "envs/char_segment.py",
            "from segrl.jobs import Job",
            "segrl.envs is not allowed to import segrl.jobs",
            id="jobs-in-an-env",
        ),
        pytest.param(
            "lm/slm.py",
            "from segrl.tracking.runs import log_metrics",
            "segrl.lm is not allowed to import segrl.tracking",
            id="tracking-in-a-model",
        ),
        # SB3's policy sending its logs to MLflow itself, as its logger writer once did
        pytest.param(
            "agents/sb3/policy.py",
            "from segrl.tracking.runs import log_metrics",
            "segrl.agents is not allowed to import segrl.tracking",
            id="tracking-in-sb3-policy",
        ),
        # a learner importing its job back, as REINFORCE's module once held train_reinforce
        pytest.param(
            "agents/reinforce.py",
            "from segrl.experiments.agent_train import train_sentence_agent",
            "segrl.agents is not allowed to import segrl.experiments",
            id="a-job-in-a-learner",
        ),
    ],
)
def test_a_model_reaching_a_job_or_tracking_breaks_the_layers(
    tmp_path, module_file, statement, report
):
    """Models, rewards and environments sit below the job skeleton and tracking, with no
    exception: a copy of segrl where one of them imports a job, the skeleton or tracking (inside a
    function) fails the layers."""
    root = planted_copy(tmp_path, module_file, statement)
    result = lint_imports(root, ["layers"])
    assert result.returncode != 0, result.stdout + result.stderr
    assert report in result.stdout


@pytest.mark.parametrize(
    ("contract", "module_file", "statement", "report"),
    [
        # a model logging to MLflow itself
        pytest.param(
            "mlflow", "lm/slm.py", "import mlflow", "segrl.lm.slm -> mlflow", id="mlflow-in-a-model"
        ),
        # a learner other than agents.sb3 reaching for SB3
        pytest.param(
            "stable-baselines3",
            "agents/reinforce.py",
            "from stable_baselines3 import PPO",
            "segrl.agents.reinforce -> stable_baselines3",
            id="sb3-in-reinforce",
        ),
        # an environment, a learner: past the evaluators' interface
        pytest.param(
            "evaluator-interface",
            "envs/char_segment.py",
            "from segrl.evaluators.lm import LMEvaluator",
            "segrl.envs.char_segment -> segrl.evaluators.lm",
            id="evaluators-lm-in-an-env",
        ),
        pytest.param(
            "evaluator-interface",
            "agents/reinforce.py",
            "from segrl.lm.slm import SLM",
            "segrl.agents.reinforce -> segrl.lm.slm",
            id="lm-in-reinforce",
        ),
    ],
)
def test_a_planted_import_breaks_its_contract_alone(
    tmp_path, contract, module_file, statement, report
):
    """Each contract on who may import what catches a wrong import (inside a function) that every
    other contract lets through."""
    root = planted_copy(tmp_path, module_file, statement)
    caught = lint_imports(root, [contract])
    assert caught.returncode != 0, caught.stdout + caught.stderr
    assert report in caught.stdout
    others = [other for other in contract_ids(root) if other != contract]
    missed = lint_imports(root, others)
    assert missed.returncode == 0, missed.stdout + missed.stderr


def test_an_exception_that_matches_no_import_breaks_the_check(tmp_path):
    """An ``ignore_imports`` line whose import is gone (here, one that never was) fails the check
    instead of lingering: an exception leaves with the import it excused, and none is silent."""
    root = package_copy(tmp_path)
    pyproject = root / "pyproject.toml"
    anchor = "exhaustive = true  # a new module of segrl must be given its layer here\n"
    text = pyproject.read_text(encoding="utf-8")
    assert text.count(anchor) == 1
    exception = 'ignore_imports = ["segrl.lm.slm -> segrl.jobs"]\n'
    pyproject.write_text(text.replace(anchor, anchor + exception), encoding="utf-8")
    result = lint_imports(root, ["layers"])
    assert result.returncode != 0
    assert "segrl.lm.slm -> segrl.jobs" in result.stdout + result.stderr


def test_the_agent_names_the_config_checks_are_the_registry_s():
    """``TrainConfig`` checks ``agent`` against a ``Literal`` (``AgentName``): its names must be
    the registry's, in its order."""
    assert tuple(AGENTS) == AGENT_NAMES


def test_the_evaluator_names_the_config_checks_are_the_registry_s():
    import typing

    from segrl.evaluators.registry import EVALUATORS, EvaluatorName

    assert tuple(EVALUATORS) == typing.get_args(EvaluatorName)


def test_every_lm_reward_the_config_checks_is_registered_and_computed():
    """Each reward mode's ``Literal`` of LM rewards lists the registry's rewards of that mode in
    its order (the first is the mode's default), and the LM evaluator computes each of them."""
    from segrl.evaluators.lm import LMEvaluator
    from segrl.evaluators.registry import LM_REWARDS, lm_rewards

    for mode, computed in (
        ("sequence", LMEvaluator.SEQUENCE_REWARDS),
        ("per-action", LMEvaluator.ACTION_REWARDS),
    ):
        registered = tuple(name for name, spec in LM_REWARDS.items() if spec.mode == mode)
        assert lm_rewards(mode) == registered
        assert set(computed) == set(registered)


def test_every_classic_segmenter_is_loadable_by_its_method():
    """``Segmenter.load`` finds a saved segmenter's class among the classes entered as they are
    defined (the registry sits above the base class): every one the registry lists is there."""
    for method, cls in SEGMENTERS.items():
        assert Segmenter._classes[method] is cls
