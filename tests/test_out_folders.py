"""A command writes only into a folder it made, an empty one, or one of its own runs: an ``--out``
that holds the user's files is refused in one line before anything is written (the probe: ``segrl
train --out .`` in a project with a ``segmenter/`` package deleted its ``__init__.py``)."""

from __future__ import annotations

import sqlite3

import pytest

from segrl.cli import EXIT_USER_ERROR, main
from segrl.errors import ConfigError
from segrl.files import LOCK_FILE, check_own_folder, unlock_folder
from segrl.jobs import RunDir

from .test_train import small_config

SMALL = ["--min-char-count", "1", "--gold-max-words", "50"]
COMMANDS = {
    "train": ["train", "--steps", "2", "--batch-size", "2", "--threads", "1"],
    "lm train": ["lm", "train", "--steps", "1", "--hidden-dim", "8", "--threads", "1"],
    "units train": ["units", "train", "--model", "transformer", "--steps", "1", "--threads", "1"],
    "baseline": ["baseline", "--method", "characters"],
}
"""Every command that saves into ``--out``, and the subfolder of the user's its save would replace."""
REPLACED = {"train": "segmenter", "lm train": "best", "units train": "best", "baseline": "model"}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_folder_of_the_users_files_is_refused_and_left_as_it_was(
    command, mlflow_store, small_corpus_file, capsys
):
    project = mlflow_store / "project"
    package = project / REPLACED[command]
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("def f(): pass\n")
    before = sorted(p.relative_to(project) for p in project.rglob("*"))
    args = [*COMMANDS[command], "--corpus", str(small_corpus_file), *SMALL, "--out", str(project)]
    code = main(args)
    err = capsys.readouterr().err
    assert code == EXIT_USER_ERROR, err
    said = [line for line in err.strip().splitlines() if not line.startswith("segrl: warning: ")]
    assert said == [
        f"segrl: error: --out {project}: a folder of other files ({REPLACED[command]}), which this "
        f"command could overwrite; give a new or empty folder, or "
        + (
            "one segrl baseline saved a segmenter in"
            if command == "baseline"
            else "the run folder of a run to resume"
        )
    ]
    assert sorted(p.relative_to(project) for p in project.rglob("*")) == before  # not even a .lock
    assert (package / "__init__.py").read_text() == "def f(): pass\n"
    with sqlite3.connect(mlflow_store / "mlflow.db") as conn:
        assert conn.execute("select count(*) from runs").fetchone() == (0,)


def test_an_empty_folder_is_trained_into(mlflow_store, small_corpus_file):
    out = mlflow_store / "empty"
    out.mkdir()
    args = [*COMMANDS["train"], "--corpus", str(small_corpus_file), *SMALL, "--out", str(out)]
    assert main(args) == 0
    run = RunDir(out)
    assert run.finished and run.info["step"] == 2
    assert (out / "segmenter" / "policy.pt").exists()


def test_a_run_folder_is_known_by_its_run_state(tmp_path):
    """A folder that holds ``run.json``, ``checkpoint.pt`` or ``requested.toml`` is a run's (resumed
    or refused by its state); only a ``.lock`` left by a dead process counts as empty."""
    own = {"run.json", "checkpoint.pt", "requested.toml"}
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / LOCK_FILE).write_text("123\n")
    assert check_own_folder(folder, "--out", own, "x") == folder
    (folder / "segmenter").mkdir()
    with pytest.raises(ConfigError, match=r"a folder of other files \(segmenter\)"):
        check_own_folder(folder, "--out", own, "x")
    for name in sorted(own):
        (folder / name).write_text("")
        assert check_own_folder(folder, "--out", own, "x") == folder
        (folder / name).unlink()


def test_a_default_folder_of_the_users_files_is_passed_over(tmp_path, small_corpus_file):
    default = tmp_path / "runs" / "job"
    default.mkdir(parents=True)
    (default / "notes.txt").write_text("mine\n")
    run = RunDir.open(small_config(small_corpus_file, tmp_path, out=None), None, default)
    assert run.path == default.with_name("job-2")
    unlock_folder(run.path)
    assert sorted(p.name for p in default.iterdir()) == ["notes.txt"]
