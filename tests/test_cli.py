import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from segrl.cli import EXIT_USER_ERROR, build_parser, main
from segrl.errors import ConfigError


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
    assert tags["segrl.gold_coverage"] == "all 50 words"  # the sample, all of it scored


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
    assert rows[0]["gold_units_per_char"] == 1.0


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
    assert config.evaluator.lm.lm.hidden_dim == 32  # the LM's option by its old name
    assert config.reinforce.steps == 9  # the flag wins over --set


def test_train_set_takes_the_lms_old_table_and_reward_names():
    """``--set`` with the LM evaluator's old names (``evaluator.lm.arch.*``,
    ``evaluator.lm.reward``) sets the new ones (``evaluator.lm.lm.*``, ``evaluator.lm.reward_variant``), and ``--lm-reward``
    sets the reward variant, not the reward mode."""
    from segrl.agents import TrainConfig
    from segrl.cli import build_parser
    from segrl.cli.common import config_from_args

    parser = build_parser()
    args = parser.parse_args(
        ["train", "--evaluator", "lm", "--reward", "sequence", "--set",
         "evaluator.lm.arch.hidden_dim=48", "--set", "evaluator.lm.reward=entropy"]
    )  # fmt: skip
    config = config_from_args(TrainConfig, args)
    assert config.evaluator.lm.lm.hidden_dim == 48
    assert (config.env.reward, config.evaluator.lm.reward_variant) == ("sequence", "entropy")
    args = parser.parse_args(["train", "--lm-reward", "flip", "--lm-context", "none"])
    config = config_from_args(TrainConfig, args)
    assert config.evaluator.lm.reward_variant == "flip" and config.evaluator.lm.lm.context == "none"


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


def _table_flags(parser, path=()):
    """(command, action) of every flag of every subcommand whose help is a config option's."""
    import argparse

    from segrl.cli.flags import OptionHelp

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _table_flags(sub, (*path, name))
        elif isinstance(action.help, OptionHelp):
            yield " ".join(path), action
        elif action.help is argparse.SUPPRESS and action.dest != "help" and "." in action.dest:
            yield " ".join(path), action  # an old name of a table flag


def test_every_table_flag_sets_a_documented_config_option_of_its_type():
    """Each flag declared in a table names an option its command's config has, of the type the
    row declares, and its help is that option's docstring (so they cannot diverge): a renamed
    option, a wrong type or a missing docstring fails here, not in a user's hands."""
    import argparse
    import types
    import typing

    from segrl.cli import build_parser
    from segrl.cli.flags import OptionHelp, comma_list, first_sentence, option_doc

    kinds = {int: int, float: float, None: str, comma_list: list}
    checked = set()
    for command, action in _table_flags(build_parser()):
        if not isinstance(action.help, OptionHelp):
            continue
        help = action.help
        module, _, name = help.config.partition(":")
        node = getattr(importlib.import_module(module), name)()
        *parents, leaf = help.row.key.split(".")
        for part in parents:
            node = getattr(node, part)
        hint = typing.get_type_hints(type(node))[leaf]
        union = typing.get_origin(hint) in (typing.Union, types.UnionType)
        expected = {
            str if typing.get_origin(o) is typing.Literal else (typing.get_origin(o) or o)
            for o in (typing.get_args(hint) if union else (hint,))
            if o is not type(None)
        }
        declared = bool if isinstance(action, argparse._StoreConstAction) else kinds[action.type]
        assert declared in expected, (command, action.option_strings, hint)
        doc, _default = option_doc(help.config, help.row.key)
        assert doc, f"{command} {action.option_strings[0]}: {help.row.key} has no docstring"
        text = help.text()
        assert first_sentence(doc).replace("%", "%%") in text
        checked.add(f"{command} {action.option_strings[0]}")
    assert {"train --steps", "train --lm-context", "lm train --lexicon-cost", "baseline --method",
            "units train --lr", "units probe --targets", "data --corpus"} <= checked  # fmt: skip
    assert len(checked) > 100


def test_a_table_flags_help_is_its_options_docstring_and_default(capsys):
    from segrl.cli import main

    with pytest.raises(SystemExit):
        main(["lm", "train", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    # LMConfig.context's docstring, and no default shown: lm train's is None, resolved by the corpus
    # (LMConfig's own is lstm)
    assert "--context KIND slm: what conditions each segment: lstm (an LSTM" in out
    assert "speller) --max-segment-length K" in out
    assert "--steps N Stop after this many updates in all (None: no limit)" in out


def test_old_flag_names_and_flag_types_still_work():
    from segrl.agents import TrainConfig
    from segrl.cli import build_parser
    from segrl.cli.common import config_from_args
    from segrl.experiments.lm_levels import LevelsConfig

    parser = build_parser()
    args = parser.parse_args(["train", "--segmenter", "transformer", "--hide-spaces",
                              "--lm-context", "lstm", "--lr", "0.5", "--steps", "3"])  # fmt: skip
    config = config_from_args(TrainConfig, args)
    assert config.policy.kind == "transformer" and config.env.hide_spaces is True
    assert config.evaluator.lm.lm.context == "lstm"
    assert (config.reinforce.lr, config.reinforce.steps) == (0.5, 3)
    args = parser.parse_args(["lm", "levels", "--levels", "bpe, words", "--hidden-dim", "32"])
    config = config_from_args(LevelsConfig, args, lm_command=None)
    assert config.levels == ["bpe", "words"] and config.lm.hidden_dim == 32
    assert config.lm.model == "segment-lstm"  # the study's model: the flag changed only a size
    args = parser.parse_args(["units", "probe", "f", "--targets", "bpe", "--no-untrained"])
    assert (args.targets, args.untrained) == (["bpe"], False)
    # lm train's budget is steps, as every job's; its old flag and key are read as it
    from segrl.config import build_config
    from segrl.experiments.lm_train import LMTrainConfig

    for flag in ("--steps", "--max-steps"):
        args = parser.parse_args(["lm", "train", flag, "7"])
        assert config_from_args(LMTrainConfig, args, lm_command=None).steps == 7
    assert build_config(LMTrainConfig, None, {"max_steps": 9}).steps == 9
    # the expected-length regulariser: lm train's model and the agent's LM evaluator
    args = parser.parse_args(["lm", "train", "--expected-length", "0.015"])
    assert config_from_args(LMTrainConfig, args, lm_command=None).lm.expected_length_weight == 0.015
    args = parser.parse_args(["train", "--lm-expected-length", "0.02"])
    assert config_from_args(TrainConfig, args).evaluator.lm.lm.expected_length_weight == 0.02


def test_a_flag_of_the_other_agent_is_refused_by_name():
    from segrl.cli.train import check_agent_flags

    parser = build_parser()
    check_agent_flags(parser.parse_args(["train", "--steps", "3"]), "reinforce")
    args = parser.parse_args(["train", "--steps", "3", "--lr", "0.1"])
    with pytest.raises(ConfigError, match=r"^--agent ppo does not read --steps, --lr \(flags of "
                       r"reinforce\); its own are --ppo-steps, --num-envs, "):  # fmt: skip
        check_agent_flags(args, "ppo")
    args = parser.parse_args(["train", "--ppo-lr", "0.1", "--clip-coef", "0.3"])
    with pytest.raises(
        ConfigError, match=r"^--agent reinforce does not read --ppo-lr, --clip-coef"
    ):
        check_agent_flags(args, "reinforce")


def test_units_flags_of_every_jobs_run_options_reach_the_config():
    """``--device``, ``--threads`` and ``--train-seed`` set ``segrl units train``'s run options, which
    sit at the top of its config (``RunOptions``), as ``--steps`` sets ``train.steps``."""
    from segrl.cli.units import units_config_from_args

    args = build_parser().parse_args(
        ["units", "train", "--device", "cpu", "--threads", "1", "--train-seed", "3", "--steps", "4"]
    )
    config = units_config_from_args(args)
    assert (config.device, config.threads, config.seed, config.train.steps) == ("cpu", 1, 3, 4)
