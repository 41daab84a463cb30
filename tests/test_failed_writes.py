"""Writes that fail mid-run: a run folder made read-only, a full disk, a read-only MLflow artifact
folder. Each ends the job with one line naming the file, the cause and the last good checkpoint
(exit 2 from the command line), the MLflow run KILLED, and the same command resumes into the same
MLflow run."""

from __future__ import annotations

import contextlib
import os
import subprocess
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from mlflow.tracking import MlflowClient

import mlflow
import segrl.checkpoint
from segrl import tracking
from segrl.cli import EXIT_USER_ERROR, main
from segrl.errors import WriteError
from segrl.files import write_failure
from segrl.jobs import CHECKPOINT_FILE, RunDir

from .test_jobs import Toy, ToyConfig, run_toy


@contextlib.contextmanager
def read_only(folder: Path) -> Iterator[None]:
    """``folder`` made read-only for real: by its permission bits for a user, by a read-only bind
    mount for root (whom permission bits do not stop); skipped where root may not mount."""
    if os.geteuid() != 0:
        mode = folder.stat().st_mode
        folder.chmod(0o555)
        try:
            yield
        finally:
            folder.chmod(mode)
        return
    bind = subprocess.run(["mount", "--bind", str(folder), str(folder)], capture_output=True)
    if bind.returncode != 0:
        pytest.skip(f"as root only a read-only mount stops writes, and mount failed: {bind.stderr}")
    try:
        remount = ["mount", "-o", "remount,ro,bind", str(folder), str(folder)]
        subprocess.run(remount, capture_output=True, check=True)
        yield
    finally:
        subprocess.run(["umount", str(folder)], capture_output=True, check=True)


def full_disk_for(name: str, monkeypatch: pytest.MonkeyPatch, after: int = 0) -> None:
    """Checkpoints named ``name`` are written to ``/dev/full`` (every write to it fails with the
    kernel's ENOSPC) once ``after`` of them were written."""
    if not Path("/dev/full").exists():
        pytest.skip("/dev/full (a device that is always full) is Linux's")
    written = []

    def open_checkpoint(file, mode="r", *args, **kwargs):
        if Path(file).name.startswith(f".{name}.") and "w" in mode:
            written.append(file)
            if len(written) > after:
                file = "/dev/full"
        return open(file, mode, *args, **kwargs)

    monkeypatch.setattr(segrl.checkpoint, "open", open_checkpoint, raising=False)


def test_a_full_disk_is_the_os_error_not_torchs():
    with pytest.raises(OSError) as raised, open("/dev/full", "wb") as file:
        torch.save({"weights": torch.zeros(10_000)}, file)
    assert write_failure(raised.value).strerror == "No space left on device"


def test_a_run_folder_made_read_only_mid_run(mlflow_store):
    config = ToyConfig(out=str(mlflow_store / "run"))
    straight = run_toy(ToyConfig(out=str(mlflow_store / "straight")))
    run = RunDir(mlflow_store / "run")
    with contextlib.ExitStack() as later:

        def make_read_only(step: int, stats: dict) -> bool:
            if step == 7:
                later.enter_context(read_only(run.path))
            return False

        with pytest.raises(WriteError) as raised:
            run_toy(config, on_step=make_read_only)
    checkpoint = run.path / CHECKPOINT_FILE
    cause = "Read-only file system" if os.geteuid() == 0 else "Permission denied"
    assert str(raised.value) == (
        f"{checkpoint}: cannot write the checkpoint of step 10 ({cause}); the last good "
        f"checkpoint is {checkpoint} (step 5). Make {run.path} writable and run the same command "
        "again to resume"
    )
    assert sorted(p.name for p in run.path.iterdir() if p.name != ".lock") == [
        CHECKPOINT_FILE,
        "config.toml",
        "run.json",
    ]  # no half-written checkpoint beside the good one
    run_id = run.info["mlflow_run_id"]
    assert MlflowClient().get_run(run_id).info.status == "KILLED"
    resumed = run_toy(config)
    assert resumed.job.resumed_from == 5 and resumed.metrics == straight.metrics
    assert run.info["mlflow_run_id"] == run_id and run.finished
    assert MlflowClient().get_run(run_id).info.status == "FINISHED"
    history = MlflowClient().get_metric_history(run_id, "train/loss")
    assert [m.step for m in history] == [4, 8, 12]


def test_a_full_disk_mid_run(mlflow_store, monkeypatch):
    config = ToyConfig(out=str(mlflow_store / "run"))
    full_disk_for(CHECKPOINT_FILE, monkeypatch, after=1)
    with pytest.raises(WriteError, match="step 10 \\(No space left on device\\)") as raised:
        run_toy(config)
    run = RunDir(mlflow_store / "run")
    assert f"the last good checkpoint is {run.checkpoint_path} (step 5)" in str(raised.value)
    assert f"Free space on the disk of {run.path} and run the same command" in str(raised.value)
    assert not [p for p in run.path.iterdir() if p.name.endswith(".tmp")]
    monkeypatch.delattr(segrl.checkpoint, "open")
    assert run_toy(config).job.resumed_from == 5


class ToyWithArtifact(Toy):
    """The toy whose end logs an artifact, as every trainer's end logs its segmenter."""

    def final(self, step: int) -> dict[str, float]:
        tracking.log_text("the end", "end.txt")
        return super().final(step)


def test_a_read_only_artifact_folder_mid_run(mlflow_store):
    config = ToyConfig(out=str(mlflow_store / "run"))
    with contextlib.ExitStack() as later:

        def make_read_only(step: int, stats: dict) -> bool:
            if step == 11:
                uri = mlflow.active_run().info.artifact_uri
                later.enter_context(read_only(Path(urllib.parse.urlparse(uri).path)))
            return False

        with pytest.raises(WriteError) as raised:
            run_toy(config, on_step=make_read_only, toy=ToyWithArtifact)
    run = RunDir(mlflow_store / "run")
    run_id = run.info["mlflow_run_id"]
    artifacts = Path(urllib.parse.urlparse(MlflowClient().get_run(run_id).info.artifact_uri).path)
    message = str(raised.value)
    assert message.startswith(f"{artifacts}/") and ": cannot write it (" in message, message
    assert f"the last good checkpoint is {run.checkpoint_path} (step 12)" in message
    assert MlflowClient().get_run(run_id).info.status == "KILLED" and not run.finished
    resumed = run_toy(config, toy=ToyWithArtifact)
    assert resumed.job.resumed_from == 12 and run.finished
    assert run.info["mlflow_run_id"] == run_id
    finished = MlflowClient().get_run(run_id)
    assert finished.info.status == "FINISHED"
    assert [a.path for a in MlflowClient().list_artifacts(run_id)] == ["config.toml", "end.txt"]


def test_train_on_a_full_disk_exits_2_and_resumes(
    mlflow_store, small_corpus_file, monkeypatch, capsys
):
    out = mlflow_store / "run"
    args = ["train", "--corpus", str(small_corpus_file), "--min-char-count", "1", "--steps", "8"]
    args += ["--gold-max-words", "50", "--threads", "1", "--out", str(out)]
    args += ["--checkpoint-every", "4", "--eval-every", "8"]
    full_disk_for(CHECKPOINT_FILE, monkeypatch, after=1)
    capsys.readouterr()
    assert main(args) == EXIT_USER_ERROR
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("\r")]
    checkpoint = out / CHECKPOINT_FILE
    assert lines[-1] == (
        f"segrl: error: {checkpoint}: cannot write the checkpoint of step 8 (No space left on "
        f"device); the last good checkpoint is {checkpoint} (step 4). Free space on the disk of "
        f"{out} and run the same command again to resume"
    )
    assert "Traceback" not in err
    run_id = RunDir(out).info["mlflow_run_id"]
    assert MlflowClient().get_run(run_id).info.status == "KILLED"
    monkeypatch.delattr(segrl.checkpoint, "open")
    assert main(args) == 0
    assert "resuming" in capsys.readouterr().out
    run = RunDir(out)
    assert run.finished and run.info["step"] == 8 and run.info["mlflow_run_id"] == run_id
    assert MlflowClient().get_run(run_id).info.status == "FINISHED"
