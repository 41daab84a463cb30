"""A run folder is held by the process training into it: a second command given the same folder
names that process and exits 2; without ``--out`` it takes the next free folder; and a holder that
dies, however it dies, holds nothing."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from segrl.cli import EXIT_USER_ERROR, main
from segrl.errors import ConfigError
from segrl.files import LOCK_FILE, lock_folder, unlock_folder
from segrl.jobs import RunDir

from .test_train import small_config

HOLD = (
    "import sys\n"
    "from segrl.files import lock_folder\n"
    "assert lock_folder(sys.argv[1]) is None\n"
    "print('held', flush=True)\n"
    "sys.stdin.read()\n"
)


@pytest.fixture
def holder():
    """Start another process that holds a folder until it is killed."""
    started: list[subprocess.Popen] = []

    def hold(folder: Path) -> subprocess.Popen:
        proc = subprocess.Popen(
            [sys.executable, "-c", HOLD, str(folder)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
        )
        started.append(proc)
        assert proc.stdout.readline().strip() == "held"
        return proc

    yield hold
    for proc in started:
        proc.kill()
        proc.wait()


def test_a_second_command_on_a_held_folder_names_the_holder(
    mlflow_store, small_corpus_file, holder, capsys
):
    out = mlflow_store / "run"
    proc = holder(out)
    args = ["train", "--corpus", str(small_corpus_file), "--min-char-count", "1", "--steps", "2"]
    code = main([*args, "--gold-max-words", "50", "--threads", "1", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == EXIT_USER_ERROR, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert f"{out} is in use: process {proc.pid} is training into it" in err
    assert not (out / "config.toml").exists()  # nothing of the holder's run was touched
    with sqlite3.connect(mlflow_store / "mlflow.db") as conn:
        assert conn.execute("select count(*) from runs").fetchone() == (0,)


def test_without_out_a_held_folder_is_passed_over_and_a_dead_holder_holds_nothing(
    tmp_path, small_corpus_file, holder
):
    config = small_config(small_corpus_file, tmp_path, out=None)
    default = tmp_path / "runs" / "job"
    proc = holder(default)
    run = RunDir.open(config, None, default)
    assert run.path == default.with_name("job-2")
    unlock_folder(run.path)
    proc.kill()  # SIGKILL: no clean-up runs, the system lets the lock go
    proc.wait()
    run = RunDir.open(config, None, default)
    assert run.path == default
    assert (default / LOCK_FILE).read_text().strip() == str(os.getpid())
    unlock_folder(default)
    assert not (default / LOCK_FILE).exists()


def test_holding_is_per_process_and_reentrant(tmp_path, small_corpus_file, holder):
    folder = tmp_path / "run"
    assert lock_folder(folder) is None
    assert lock_folder(folder) is None  # the same process again: still held by it
    unlock_folder(folder)
    proc = holder(folder)
    assert lock_folder(folder) == proc.pid
    with pytest.raises(ConfigError, match=rf"process {proc.pid} is training into it"):
        RunDir.open(small_config(small_corpus_file, tmp_path), folder, folder)
