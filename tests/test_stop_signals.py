"""SIGTERM (what ``kill``, ``timeout`` and cluster schedulers send) stops a job as Ctrl-C does: at the
next step, checkpointed, its MLflow run KILLED, one line, exit code 143, and the same command resumes
(the probe: ``kill -TERM`` ended ``segrl train`` with 143, no message and the run left RUNNING). The
bench's is in ``test_bench.py``."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

import pytest
from mlflow.tracking import MlflowClient

from segrl.jobs import RunDir, TrainingInterrupted
from segrl.tracking.store import tracking_uri

from .conftest import CHECKOUT
from .test_jobs import ToyConfig, run_toy


def test_sigterm_stops_a_job_at_the_next_step_and_it_resumes(mlflow_store):
    config = ToyConfig(out=str(mlflow_store / "run"))
    before = signal.getsignal(signal.SIGTERM)

    def terminate(step, stats):
        if step == 7:
            os.kill(os.getpid(), signal.SIGTERM)
        return False

    with pytest.raises(TrainingInterrupted, match="stopped at step 8") as stopped:
        run_toy(config, on_step=terminate)
    assert stopped.value.signum == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is before  # the job's handler is gone with it
    run, client = RunDir(config.out), MlflowClient(tracking_uri())
    assert not run.finished and run.info["step"] == 8
    assert client.get_run(run.info["mlflow_run_id"]).info.status == "KILLED"
    resumed = run_toy(config)
    assert resumed.job.resumed_from == 8 and run.finished
    assert client.get_run(run.info["mlflow_run_id"]).info.status == "FINISHED"


@pytest.mark.slow
def test_sigterm_stops_segrl_train_in_one_line_and_the_same_command_resumes(
    mlflow_store, small_corpus_file
):
    out = mlflow_store / "run"
    command = [sys.executable, "-m", "segrl", "train", "--evaluator", "gold", "--threads", "1"]
    command += ["--corpus", str(small_corpus_file), "--min-char-count", "1", "--batch-size", "2"]
    command += ["--gold-max-words", "50", "--checkpoint-every", "2", "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(CHECKOUT)}
    said = mlflow_store / "stderr.txt"
    with said.open("w") as stderr:
        train = subprocess.Popen(
            [*command, "--steps", "1000000"], cwd=mlflow_store, env=env, stderr=stderr
        )
    while not (out / "checkpoint.pt").exists():  # training
        with contextlib.suppress(subprocess.TimeoutExpired):
            pytest.fail(f"train ended first: {train.wait(timeout=0.1)}, {said.read_text()}")
    train.send_signal(signal.SIGTERM)
    code = train.wait(timeout=120)
    err = said.read_text()
    run = RunDir(out)
    step = run.info["step"]
    assert code == 128 + signal.SIGTERM, err
    assert [line for line in err.splitlines() if line.startswith("segrl:")] == [
        f"segrl: interrupted by SIGTERM: stopped at step {step}; run again to resume"
    ], err
    assert "Traceback" not in err
    run_id, client = run.info["mlflow_run_id"], MlflowClient(tracking_uri())
    assert not run.finished and client.get_run(run_id).info.status == "KILLED"
    again = subprocess.run(
        [*command, "--steps", str(step + 2)], cwd=mlflow_store, env=env, capture_output=True
    )
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"resuming {out} from step {step} of {step + 2}" in again.stdout.decode()
    assert run.finished and run.info["step"] == step + 2 and run.info["mlflow_run_id"] == run_id
    assert client.get_run(run_id).info.status == "FINISHED"
