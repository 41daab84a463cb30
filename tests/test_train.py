"""``segrl train``: the REINFORCE job end to end, MLflow logging, resumption, and its command line."""

import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from mlflow.tracking import MlflowClient

from segrl.agents import TrainConfig
from segrl.checkpoint import load_checkpoint
from segrl.cli import EXIT_USER_ERROR, main
from segrl.config import build_config
from segrl.errors import ConfigError
from segrl.experiments.agent_train import train_reinforce
from segrl.jobs import RunDir, TrainingInterrupted
from segrl.tracking.queries import segmenter_runs
from segrl.tracking.store import ensure_reachable


def small_config(corpus_file, tmp_path, **overrides):
    values = {
        "data.corpus": str(corpus_file),
        "data.min_char_count": 1,
        "gold.max_words": 200,
        "policy.embedding_dim": 8,
        "policy.hidden_dim": 16,
        "reinforce.steps": 12,
        "reinforce.batch_size": 8,
        "eval_every": 6,
        "eval_gold_words": 50,
        "checkpoint_every": 4,
        "log_every": 2,
        "threads": 1,
        "out": str(tmp_path / "run"),
    }
    values.update(overrides)
    return build_config(TrainConfig, overrides=values)


def test_train_logs_to_mlflow_and_registers_the_segmenter(mlflow_store, small_corpus_file):
    config = small_config(small_corpus_file, mlflow_store)
    result = train_reinforce(config)
    assert result.step == 12 and result.resumed_from is None
    run = MlflowClient().get_run(result.run_id)
    metrics = run.data.metrics
    for key in ("boundary_f1", "units_per_char", "morfessor_boundary_f1", "train/reward"):
        assert key in metrics, key
    assert 0.0 <= metrics["morfessor_boundary_f1"] <= 1.0
    assert run.data.params["reinforce.steps"] == "12"
    history = MlflowClient().get_metric_history(result.run_id, "train/entropy")
    assert [m.step for m in history] == [2, 4, 6, 8, 10, 12]
    eval_history = MlflowClient().get_metric_history(result.run_id, "eval/boundary_f1")
    assert [m.step for m in eval_history] == [0, 6]  # untrained, then every eval_every steps
    artifacts = {a.path for a in MlflowClient().list_artifacts(result.run_id)}
    assert {"samples.txt", "config.toml", "samples"} <= artifacts
    # the trained policy is the run's MLflow model, and the run folder loads as the same segmenter
    import mlflow
    from segrl import load_segmenter

    words = ["walked", "Jumping", "talks"]
    predicted = mlflow.pyfunc.load_model(f"runs:/{result.run_id}/model").predict(words)
    assert ["".join(p) for p in predicted] == words
    assert load_segmenter(result.run_dir).segment_words(words) == predicted
    assert load_segmenter(result.run_dir).kind == "agent"
    rows = segmenter_runs("segrl")
    assert [r["segmenter"] for r in rows] == ["reinforce-bilstm-morfessor-per-action"]
    assert rows[0]["kind"] == "agent"
    assert RunDir(result.run_dir).finished
    with pytest.raises(ConfigError, match="finished run"):
        train_reinforce(config)


def test_interrupted_run_resumes_exactly(mlflow_store, small_corpus_file):
    """Stopped at step 7 and resumed, a run ends with the same weights as an uninterrupted one."""
    straight = train_reinforce(small_config(small_corpus_file, mlflow_store / "a"))
    config = small_config(small_corpus_file, mlflow_store / "b")
    with pytest.raises(TrainingInterrupted):
        train_reinforce(config, on_step=lambda step, stats: step == 7)
    saved = load_checkpoint(RunDir(mlflow_store / "b" / "run").checkpoint_path, restore_rng=False)
    assert saved["step"] == 7
    resumed = train_reinforce(config)
    assert resumed.resumed_from == 7 and resumed.step == 12
    assert resumed.run_id == MlflowClient().get_run(resumed.run_id).info.run_id
    steps = [m.step for m in MlflowClient().get_metric_history(resumed.run_id, "train/reward")]
    assert steps[-1] == 12 and 8 in steps  # one MLflow run, continued after the interruption
    a = load_checkpoint(straight.run_dir / "checkpoint.pt", restore_rng=False)["learner"]
    b = load_checkpoint(resumed.run_dir / "checkpoint.pt", restore_rng=False)["learner"]
    for name, tensor in a["policy"].items():
        assert torch.equal(tensor, b["policy"][name]), name


def test_a_changed_config_does_not_resume_a_run(mlflow_store, small_corpus_file):
    config = small_config(small_corpus_file, mlflow_store)
    with pytest.raises(TrainingInterrupted):
        train_reinforce(config, on_step=lambda step, stats: step == 4)
    changed = small_config(small_corpus_file, mlflow_store, **{"reinforce.lr": 0.5})
    with pytest.raises(ConfigError, match=r"reinforce.lr: 0.003 -> 0.5"):
        train_reinforce(changed)
    longer = small_config(small_corpus_file, mlflow_store, **{"reinforce.steps": 14})
    assert train_reinforce(longer).step == 14  # more steps is a resumable change
    more = small_config(small_corpus_file, mlflow_store, **{"reinforce.steps": 16})
    continued = train_reinforce(more)  # a finished run asked for more steps continues
    assert continued.resumed_from == 14 and continued.step == 16


def test_default_run_folders(mlflow_store, small_corpus_file):
    config = small_config(small_corpus_file, mlflow_store, out=None)
    first = train_reinforce(config)
    assert first.run_dir.name == config.name
    second = train_reinforce(config)  # the first one finished: a new folder
    assert second.run_dir.name == f"{config.name}-2"


def test_gold_evaluator_trains_on_gold_words(mlflow_store, small_corpus_file):
    config = small_config(
        small_corpus_file, mlflow_store, **{"evaluator.name": "gold", "gold.max_words": None}
    )
    result = train_reinforce(config)
    # scored on held-out gold words (10% of the bundled set), against the gold and Morfessor
    assert result.metrics["gold_words"] == pytest.approx(4030, abs=1)
    assert "gold_boundary_f1" in result.metrics and "morfessor_boundary_f1" in result.metrics


def test_train_command_and_its_errors(mlflow_store, small_corpus_file, capsys):
    args = ["train", "--corpus", str(small_corpus_file), "--steps", "4", "--batch-size", "4"]
    args += ["--gold-max-words", "100", "--out", str(mlflow_store / "cli"), "--threads", "1"]
    args += [
        "--policy",
        "transformer",
        "--reward",
        "sequence",
        "--hide-spaces",
        "--eval-every",
        "2",
    ]
    assert main(args) == 0
    out, err = capsys.readouterr()
    assert "reinforce-transformer-morfessor-sequence-hidden" in out
    # the progress line (a plain line where stderr is no terminal) shows the evaluation at step 2:
    # its gold boundary F1 beside its agreement with Morfessor
    shown = next(line for line in err.splitlines() if ": step 2/4, " in line)
    assert ", boundary_f1=" in shown and ", morfessor_boundary_f1=" in shown
    assert "run folder:" in out
    assert main(["compare"]) == 0
    assert "reinforce-transformer-morfessor-sequence-hidden" in capsys.readouterr().out
    for bad, message in [
        (
            ["--evaluator", "bogus"],
            "command line: evaluator.name must be one of: morfessor, gold, lm; got 'bogus'",
        ),
        (
            ["--reward", "dense"],
            "command line: env.reward must be one of: sequence, per-action; got 'dense'",
        ),
        (
            ["--agent", "dqn"],
            "command line: agent must be one of: reinforce, ppo, ppo-batched; got 'dqn'",
        ),
        (["--policy", "cnn"], "policy.kind must be one of: bilstm, transformer; got 'cnn'"),
        (["--segmenter", "cnn"], "policy.kind must be one of: bilstm, transformer; got 'cnn'"),
    ]:
        code = main(["train", "--corpus", str(small_corpus_file), *bad])
        assert code == EXIT_USER_ERROR
        assert message in capsys.readouterr().err


@pytest.mark.slow
def test_killed_command_resumes_from_its_last_checkpoint(mlflow_store, small_corpus_file):
    """``segrl train`` killed with SIGKILL mid-run resumes from its last checkpoint when rerun, and
    logs each step once (the steps after the checkpoint were logged before the kill, and are
    trained again)."""
    out = mlflow_store / "killed"
    args = [sys.executable, "-m", "segrl", "train", "--corpus", str(small_corpus_file)]
    args += ["--steps", "400", "--batch-size", "8", "--checkpoint-every", "20", "--eval-every"]
    args += ["1000", "--gold-max-words", "100", "--out", str(out), "--threads", "1"]
    args += ["--set", "log_every=1"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    # the store's tables exist before the command starts: this test's client would otherwise create
    # them beside the command, outside segrl's lock, and one of the two fail (``already exists``)
    store = MlflowClient(ensure_reachable(f"sqlite:///{mlflow_store / 'mlflow.db'}"))
    process = subprocess.Popen(args, cwd=mlflow_store, env=env, stdout=subprocess.DEVNULL)
    checkpoint = out / "checkpoint.pt"

    def logged_past_checkpoint() -> bool:  # killed a few steps after a checkpoint, before the next
        info = RunDir(out).info
        if info.get("step", 0) < 20:
            return False
        steps = [m.step for m in store.get_metric_history(info["mlflow_run_id"], "train/reward")]
        return info["step"] + 3 <= max(steps) <= info["step"] + 10

    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not logged_past_checkpoint():
        assert process.poll() is None, "segrl train ended before it could be killed"
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert checkpoint.exists(), "no checkpoint before the kill"
    saved_step = load_checkpoint(checkpoint, restore_rng=False)["step"]
    assert 20 <= saved_step < 400
    config = build_config(
        TrainConfig,
        overrides={
            "data.corpus": str(small_corpus_file),
            "reinforce.steps": 400,
            "reinforce.batch_size": 8,
            "checkpoint_every": 20,
            "eval_every": 1000,
            "gold.max_words": 100,
            "out": str(out),
            "threads": 1,
            "log_every": 1,
        },
    )
    logged = store.get_metric_history(RunDir(out).info["mlflow_run_id"], "train/reward")
    result = train_reinforce(config)
    assert result.resumed_from == saved_step
    assert result.step == 400
    run = MlflowClient().get_run(result.run_id)
    assert run.info.status == "FINISHED"
    history = MlflowClient().get_metric_history(result.run_id, "train/reward")
    assert max(m.step for m in logged) > saved_step  # logged beyond the checkpoint
    assert sorted(m.step for m in history) == list(range(1, 401))  # each step once
