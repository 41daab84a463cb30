import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from segrl.cli import EXIT_USER_ERROR, main


def run_cli(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "segrl", *args], capture_output=True, text=True, cwd=cwd, timeout=600
    )


def test_baseline_then_compare(mlflow_store, small_corpus_file, capsys):
    common = ["--corpus", str(small_corpus_file), "--gold-max-words", "300"]
    assert main(["baseline", "--method", "characters", *common]) == 0
    assert main(["baseline", "--method", "words", *common, "--run-name", "w"]) == 0
    out = capsys.readouterr().out
    assert "[characters] boundary P/R/F1" in out
    assert "segrl ui" in out
    assert main(["compare"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].endswith(f"corpus {small_corpus_file}, gold bundled (eng, 300 words):")
    rows = {line.split()[0]: line.split() for line in table[3:]}
    assert set(rows) == {"characters", "words"}
    assert rows["characters"][-2] == "1.000"  # units per character of the all-characters segmenter
    assert len(rows["characters"][-1]) == 32  # its run id
    assert rows["words"][4] == "0.000"  # boundary F1 of the no-split segmenter


def test_runs_name_the_languages_of_corpus_and_gold(mlflow_store, small_corpus_file):
    from mlflow.tracking import MlflowClient

    from segrl.tracking.queries import segmenter_runs

    args = ["--corpus", str(small_corpus_file), "--gold-max-words", "50"]
    assert main(["baseline", "--method", "characters", *args]) == 0
    tags = MlflowClient().get_run(segmenter_runs("segrl")[0]["run_id"]).data.tags
    assert tags["segrl.gold_language"] == "eng"
    assert tags["segrl.corpus_language"] == "unknown"  # a file: its language is not known


def test_bad_inputs_exit_non_zero_without_traceback(mlflow_store, tmp_path):
    latin = tmp_path / "latin.txt"
    latin.write_bytes(b"ok .\n" + "caf\xe9\n".encode("latin-1"))
    for args, message in [
        (["baseline", "--corpus", str(tmp_path / "missing.txt")], "missing.txt: no such file"),
        (["baseline", "--corpus", str(latin)], "latin.txt:2: not valid UTF-8"),
        (["baseline", "--method", "bogus"], "unknown segmenter 'bogus'"),
        (["baseline", "--gold", str(latin)], "latin.txt:2: not valid UTF-8"),
        (["data", "--max-len", "nope"], "invalid int value"),
    ]:
        result = run_cli(*args, cwd=mlflow_store)
        assert result.returncode == EXIT_USER_ERROR, (args, result.stderr)
        assert message in result.stderr
        assert "Traceback" not in result.stderr
    # nothing was logged: bad input is caught before a run starts
    assert not (mlflow_store / "mlruns").exists()


def test_unreachable_tracking_server(mlflow_store, monkeypatch, small_corpus_file, capsys):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")
    assert (
        main(["baseline", "--method", "words", "--corpus", str(small_corpus_file)])
        == EXIT_USER_ERROR
    )
    assert "cannot reach the MLflow tracking server" in capsys.readouterr().err


def test_data_command(capsys):
    assert main(["data", "--gold-max-words", "10"]) == 0
    out = capsys.readouterr().out
    assert "fingerprint:" in out
    assert "gold: 10 words" in out


@pytest.mark.slow
def test_all_baselines_on_the_bundled_corpus(mlflow_store, capsys):
    assert main(["baseline", "--method", "all", "--gold-max-words", "5000"]) == 0
    out = capsys.readouterr().out
    assert "morfessor" in out and "unigram" in out
    rows = {
        line.split()[0]: line.split()
        for line in out.splitlines()
        if line.split()[:2][1:] == ["baseline"]
    }
    # Morfessor beats the all-characters segmenter on boundary F1 against the gold set
    assert float(rows["morfessor"][4]) > float(rows["characters"][4])


@pytest.mark.slow
def test_mlproject_entry_point_logs_child_runs(mlflow_store, small_corpus_file):
    from segrl.tracking.queries import segmenter_runs

    project = Path(__file__).resolve().parents[1] / "mlflow"
    shutil.copytree(project, mlflow_store / "project")
    mlflow_cli = Path(sys.executable).with_name("mlflow")
    result = subprocess.run(
        [
            str(mlflow_cli),
            "run",
            "project",
            "-e",
            "baseline",
            "--env-manager",
            "local",
            "--experiment-name",
            "segrl",
            "-P",
            "method=characters",
            "-P",
            f"corpus={small_corpus_file}",
        ],
        capture_output=True,
        text=True,
        cwd=mlflow_store,
        timeout=600,
        env={
            **os.environ,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        },
    )
    assert result.returncode == 0, result.stderr[-2000:]
    rows = segmenter_runs("segrl")
    assert [r["segmenter"] for r in rows] == ["characters"]
    assert rows[0]["units_per_char"] == 1.0


def test_train_set_reaches_the_config_and_flags_win():
    from segrl.agents import TrainConfig
    from segrl.cli import build_parser
    from segrl.cli.common import config_from_args

    args = build_parser().parse_args(
        ["train", "--set", "reinforce.lr=0.25", "--set", "evaluator.lm.hidden_dim=32", "--set",
         "reinforce.steps=7", "--steps", "9"]
    )  # fmt: skip
    config = config_from_args(TrainConfig, args)
    assert config.reinforce.lr == 0.25
    assert config.evaluator.lm.arch.hidden_dim == 32  # the LM's option by its old name
    assert config.reinforce.steps == 9  # the flag wins over --set


@pytest.mark.parametrize(
    "command",
    [
        ["baseline", "--method", "characters"],
        ["data"],
        ["lm", "train"],
        ["lm", "levels"],
        ["train"],
        ["units", "train", "--model", "stride"],
    ],
    ids=lambda c: " ".join(c[:2]),
)
def test_every_config_driven_command_takes_set(mlflow_store, capsys, command):
    """``--set`` reaches the config of every config-driven command (one function adds it, with
    ``--config``): a value of the wrong type is refused with the key it was given for."""
    from segrl.cli import main

    key, kind = ("train.lr", "float") if command[0] == "units" else ("data.max_len", "int")
    assert main([*command, "--set", f"{key}=long"]) == 2
    err = capsys.readouterr().err
    assert err == f"segrl: error: command line: {key} must be {kind}, got 'long'\n", err
