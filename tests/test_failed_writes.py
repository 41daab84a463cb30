"""Writes that fail mid-run: a run folder made read-only, a full disk, a read-only MLflow artifact
folder. Each ends the job with one line naming the file, the cause and the last good checkpoint
(exit 2 from the command line), the MLflow run KILLED, and the same command resumes into the same
MLflow run."""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from mlflow.tracking import MlflowClient

import segrl.checkpoint
from segrl.agents.segmenter import POLICY_FILE
from segrl.checkpoint import save_tensor_file
from segrl.cli import EXIT_USER_ERROR, main
from segrl.errors import WriteError
from segrl.files import write_failure
from segrl.jobs import CHECKPOINT_FILE, RunDir
from segrl.tracking.runs import active_artifact_folder, log_text
from segrl.tracking.store import local_folder

from .conftest import CHECKOUT
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
    """The files segrl writes with torch named ``name`` (or its temporary ``.name.*``) are written
    to ``/dev/full`` (every write to it fails with the kernel's ENOSPC) once ``after`` of them
    were written."""
    if not Path("/dev/full").exists():
        pytest.skip("/dev/full (a device that is always full) is Linux's")
    written = []

    def open_tensor_file(file, mode="r", *args, **kwargs):
        if Path(file).name == name or Path(file).name.startswith(f".{name}."):
            written.append(file)
            if len(written) > after:
                file = "/dev/full"
        return open(file, mode, *args, **kwargs)

    monkeypatch.setattr(segrl.checkpoint, "open", open_tensor_file, raising=False)


def test_a_full_disk_is_an_os_error_naming_the_file(tmp_path):
    """torch's writer, given a file name, says only ``unexpected pos``; segrl's names the file and
    the cause."""
    if not Path("/dev/full").exists():
        pytest.skip("/dev/full (a device that is always full) is Linux's")
    weights = tmp_path / "weights.pt"
    weights.symlink_to("/dev/full")
    with pytest.raises(RuntimeError, match="unexpected pos"):
        torch.save({"weights": torch.zeros(10_000)}, weights)
    with pytest.raises(OSError) as raised:
        save_tensor_file({"weights": torch.zeros(10_000)}, weights)
    assert (raised.value.errno, raised.value.filename) == (errno.ENOSPC, str(weights))
    assert write_failure(raised.value) is raised.value


def test_what_counts_as_a_failed_write():
    full = OSError(errno.ENOSPC, "No space left on device")
    torchs = RuntimeError("unexpected pos")  # as torch's writer raises it, while handling ``full``
    torchs.__context__ = full
    said = RuntimeError("the model does not fit")  # raised ``from None``: another problem
    said.__context__, said.__suppress_context__ = full, True
    assert write_failure(torchs) is full and write_failure(said) is None
    assert write_failure(OSError(errno.EROFS, "Read-only file system")).errno == errno.EROFS
    assert write_failure(FileNotFoundError(errno.ENOENT, "No such file")) is None


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

    def finish(self, job) -> dict[str, float]:
        log_text("the end", "end.txt")
        return super().finish(job)


@contextlib.contextmanager
def full_disk(folder: Path) -> Iterator[None]:
    """Inside it, copying bytes into a file (as MLflow stores an artifact) fails as on a full disk:
    the OS's ENOSPC, which names no file."""

    def copy(source, target, length=0):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(shutil, "copyfileobj", copy)
        yield


@pytest.mark.parametrize(
    ("make_unwritable", "failure"),
    [
        (read_only, "{artifacts}/*: cannot write it (*)"),
        (full_disk, "{artifacts}: cannot write it (No space left on device)"),
    ],
    ids=["read-only", "full"],
)
def test_an_unwritable_artifact_folder_at_the_end(mlflow_store, make_unwritable, failure):
    config = ToyConfig(out=str(mlflow_store / "run"))
    with contextlib.ExitStack() as later:

        def unwritable_artifacts(step: int, stats: dict) -> bool:
            if step == 11:
                folder = Path(active_artifact_folder())
                later.enter_context(make_unwritable(folder))
            return False

        with pytest.raises(WriteError) as raised:
            run_toy(config, on_step=unwritable_artifacts, toy=ToyWithArtifact)
    run = RunDir(mlflow_store / "run")
    run_id = run.info["mlflow_run_id"]
    artifacts = local_folder(MlflowClient().get_run(run_id).info.artifact_uri)
    expected = failure.format(artifacts=artifacts) + (
        f"; the last good checkpoint is {run.checkpoint_path} (step 12). * and run the same "
        "command again to resume"
    )
    assert fnmatch.fnmatch(str(raised.value), expected), str(raised.value)
    assert MlflowClient().get_run(run_id).info.status == "KILLED" and not run.finished
    resumed = run_toy(config, toy=ToyWithArtifact)
    assert resumed.job.resumed_from == 12 and run.finished
    assert run.info["mlflow_run_id"] == run_id
    assert MlflowClient().get_run(run_id).info.status == "FINISHED"
    assert [a.path for a in MlflowClient().list_artifacts(run_id)] == ["config.toml", "end.txt"]


@pytest.mark.parametrize(
    ("name", "after", "failure"),
    [
        (CHECKPOINT_FILE, 1, "{checkpoint}: cannot write the checkpoint of step 8"),
        (POLICY_FILE, 0, "{out}/segmenter: cannot write it"),
    ],
    ids=["checkpoint", "final-model"],
)
def test_train_on_a_full_disk_exits_2_and_resumes(
    mlflow_store, small_corpus_file, monkeypatch, capsys, name, after, failure
):
    """The disk fills up at the second checkpoint (step 8, the last good one at step 4), or as the
    trained segmenter is saved at the end (the last good checkpoint at step 8)."""
    out = mlflow_store / "run"
    args = ["train", "--corpus", str(small_corpus_file), "--min-char-count", "1", "--steps", "8"]
    args += ["--gold-max-words", "50", "--threads", "1", "--out", str(out)]
    args += ["--checkpoint-every", "4", "--eval-every", "8"]
    full_disk_for(name, monkeypatch, after=after)
    capsys.readouterr()
    assert main(args) == EXIT_USER_ERROR
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("segrl: error")]
    checkpoint = out / CHECKPOINT_FILE
    last = 4 if name == CHECKPOINT_FILE else 8
    expected = failure.format(checkpoint=checkpoint, out=out) + (
        f" (No space left on device); the last good checkpoint is {checkpoint} (step {last}). "
        f"Free space on the disk of {out} and run the same command again to resume"
    )
    assert lines == [f"segrl: error: {expected}"], err
    assert "Traceback" not in err
    run_id = RunDir(out).info["mlflow_run_id"]
    assert MlflowClient().get_run(run_id).info.status == "KILLED"
    monkeypatch.delattr(segrl.checkpoint, "open")
    assert main(args) == 0
    assert f"resuming {out} from step {last} of 8" in capsys.readouterr().out
    run = RunDir(out)
    assert run.finished and run.info["step"] == 8 and run.info["mlflow_run_id"] == run_id
    assert MlflowClient().get_run(run_id).info.status == "FINISHED"


def test_an_artifact_disk_full_at_the_start_ends_every_command_in_one_line(
    mlflow_store, small_corpus_file, capsys
):
    """The up-front check of the artifact folder creates a file, which a full disk still allows;
    logging the run's config is the first write that fails. Every command that starts a run ends
    in one line, its MLflow run KILLED (none FAILED) and no run folder left; the same command
    runs once there is room."""
    corpus = ["--corpus", str(small_corpus_file), "--min-char-count", "1"]
    small = [*corpus, "--gold-max-words", "20", "--max-sentences", "20"]
    jobs = [*small, "--threads", "1"]
    predictions = mlflow_store / "pred.txt"
    predictions.write_text("walk ed\n", encoding="utf-8")
    gold = mlflow_store / "gold.tsv"
    gold.write_text("walked\twalk @@ed\t010\n", encoding="utf-8")
    commands = {
        "baseline": ["baseline", "--method", "characters", *small, "--out", "b"],
        "train": ["train", *jobs, "--steps", "2", "--out", "t"],
        "units": ["units", "train", "--model", "transformer", *jobs, "--steps", "1", "--out", "u"],
        "lm": ["lm", "train", *jobs, "--steps", "1", "--out", "l"],
        "evaluate": ["evaluate", "--predictions", str(predictions), "--gold", str(gold), "--log"],
    }
    main(["baseline", "--method", "words", *small])  # the store and its artifact root, made
    artifacts = Path(local_folder(MlflowClient().search_experiments()[0].artifact_location))
    capsys.readouterr()
    with full_disk(artifacts):
        for name, args in commands.items():
            assert main(args) == EXIT_USER_ERROR, name
            said = capsys.readouterr().err.splitlines(keepends=True)
            err = "".join(line for line in said if not line.startswith("segrl: warning: "))
            # evaluate --log logs no config file: its first artifact is its scores' figure
            what = "cannot write it" if name == "evaluate" else "cannot log the run's config"
            done = "" if name == "evaluate" else "nothing was run, and "
            expected = (
                f"segrl: error: {artifacts}/*/artifacts: {what} (No space left on device); "
                f"{done}the MLflow run ends KILLED. Free space on the disk of "
                f"{artifacts}/*/artifacts and run the same command again"
            )
            assert fnmatch.fnmatch(err.strip(), expected) and err.count("\n") == 1, (name, err)
    runs = MlflowClient().search_runs(
        [e.experiment_id for e in MlflowClient().search_experiments()]
    )
    assert sorted(r.info.status for r in runs) == ["FINISHED"] + ["KILLED"] * len(commands)
    assert not any((mlflow_store / out).exists() for out in ("b", "t", "u", "l"))
    assert main(commands["train"]) == 0


def test_a_tracking_store_whose_disk_fills_mid_run(mlflow_store, capfd):
    """SQLite's own 'database or disk is full' (its page limit reached, as a full disk stops
    it): one line naming the database and the last good checkpoint, no traceback; the run ends
    KILLED (a status changed in place needs no room; where even that fails, it stays RUNNING), and
    the same command resumes it."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    config = ToyConfig(out=str(mlflow_store / "run"), steps=400)
    pages: list[int] = []

    def no_room_to_grow(connection, cursor, statement, parameters, context, executemany):
        if pages:
            cursor.execute(f"PRAGMA max_page_count = {pages[0]}")

    def fill(step: int, stats: dict) -> bool:
        if step == 11 and not pages:
            with contextlib.closing(sqlite3.connect(mlflow_store / "mlflow.db")) as db:
                pages.append(db.execute("PRAGMA page_count").fetchone()[0])
        return False

    event.listen(Engine, "before_cursor_execute", no_room_to_grow)
    try:
        with pytest.raises(WriteError) as raised:
            run_toy(config, on_step=fill)
        run = RunDir(mlflow_store / "run")
        expected = (
            f"{mlflow_store / 'mlflow.db'}: cannot write it (No space left on device); the last "
            f"good checkpoint is {run.checkpoint_path} (step *). Free space on the disk of "
            f"{mlflow_store} and run the same command again to resume"
        )
        assert fnmatch.fnmatch(str(raised.value), expected), str(raised.value)
        last = run.info["step"]
        assert last >= 10 and not run.finished  # past the first checkpoint after it filled
        err = capfd.readouterr().err
        assert "Traceback" not in err and "database or disk is full" not in err, err
        run_id = run.info["mlflow_run_id"]
        assert MlflowClient().get_run(run_id).info.status == "KILLED"
        pages[0] = 2**30  # room made (connections MLflow keeps open had the limit)
        assert run_toy(config).job.resumed_from == last
    finally:
        event.remove(Engine, "before_cursor_execute", no_room_to_grow)
    assert run.info["mlflow_run_id"] == run_id and run.finished
    assert MlflowClient().get_run(run_id).info.status == "FINISHED"


@pytest.mark.parametrize("command", [["data"], ["segment", "--model", "{model}", "{words}"]])
def test_standard_output_on_a_full_disk(mlflow_store, small_corpus_file, command):
    """``segrl ... > /dev/full``: every write to it fails with the kernel's ENOSPC."""
    if not Path("/dev/full").exists():
        pytest.skip("/dev/full (a device that is always full) is Linux's")
    model = mlflow_store / "chars"
    words = mlflow_store / "words.txt"
    words.write_text("walked\n" * 5000, encoding="utf-8")  # more than the output's buffer
    corpus = ["--corpus", str(small_corpus_file), "--min-char-count", "1"]
    assert main(["baseline", "--method", "characters", *corpus, "--out", str(model)]) == 0
    args = [a.format(model=model, words=words) for a in command]
    if command == ["data"]:
        args += corpus
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "segrl", *args],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(CHECKOUT)},
            timeout=300,
        )
    assert done.returncode == EXIT_USER_ERROR, done.stderr
    assert done.stderr == (
        "segrl: error: cannot write standard output (No space left on device); send standard "
        "output to a disk with room, or to a writable file\n"
    )
