"""Bad inputs, as a new user gives them: each is refused with one line naming the file or option and
what to do (exit code 2), before anything is trained, and leaves no run folder and no MLflow run."""

from __future__ import annotations

import gzip
import importlib.util
import os
import random
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from segrl.cli import EXIT_USER_ERROR, main

from .conftest import write_small_corpus


def _garbled_gz(folder: Path) -> Path:
    """A .gz file whose header is valid and whose compressed data is not."""
    data = bytearray(gzip.compress(("the cat walked home . " * 200).encode()))
    data[20:60] = bytes(random.Random(0).randrange(256) for _ in range(40))
    path = folder / "garbled.txt.gz"
    path.write_bytes(bytes(data))
    return path


def _file(name: str, content: bytes) -> Callable[[Path], Path]:
    def make(folder: Path) -> Path:
        path = folder / name
        path.write_bytes(content)
        return path

    return make


def _corpus(folder: Path) -> Path:
    return write_small_corpus(folder / "small.txt")


def _greek_gold(folder: Path) -> Path:
    path = folder / "greek.tsv"
    path.write_text("λόγος\tλόγ @@ος\t100\nἄνθρωπος\tἄνθρωπ @@ος\t100\n", encoding="utf-8")
    return path


def _store_with_unwritable_artifacts(folder: Path) -> Path:
    """The default store, whose experiment keeps its artifacts where no folder can be made (under a
    file: unwritable even for root, whom permission bits do not stop)."""
    from mlflow.tracking import MlflowClient

    blocker = folder / "blocker"
    blocker.write_text("a file, not a folder")
    MlflowClient(f"sqlite:///{folder / 'mlflow.db'}").create_experiment(
        "segrl", artifact_location=str(blocker / "artifacts")
    )
    return blocker


def _read_only_store(folder: Path) -> Path:
    from mlflow.tracking import MlflowClient

    db = folder / "mlflow.db"
    MlflowClient(f"sqlite:///{db}").search_experiments()
    db.chmod(0o444)
    return db


NOISE = bytes(random.Random(0).randrange(256) for _ in range(300))


def _saved_agent(folder: Path) -> Path:
    from segrl.agents.policies import PolicyConfig, SegmenterPolicy
    from segrl.agents.segmenter import AgentSegmenter
    from segrl.data.corpus import PLACEHOLDER
    from segrl.data.vocab import CharVocab

    vocab = CharVocab.from_texts(["the cat sat"], PLACEHOLDER)
    policy = SegmenterPolicy(len(vocab), 2, 32, PolicyConfig(embedding_dim=8, hidden_dim=8), 1)
    return AgentSegmenter(policy, vocab).save(folder / "agent")


def _agent_with(name: str, content: bytes | dict) -> Callable[[Path], Path]:
    """A saved agent segmenter whose file ``name`` is ``content`` (bytes, or tensors torch saves)."""

    def make(folder: Path) -> Path:
        saved = _saved_agent(folder)
        if isinstance(content, bytes):
            (saved / name).write_bytes(content)
        else:
            torch.save(content, saved / name)
        return saved

    return make


def _classic_options(**options) -> Callable[[Path], Path]:
    """A Morfessor segmenter's folder whose ``segmenter.json`` has ``options`` edited in."""

    def make(folder: Path) -> Path:
        import json

        saved = _classic_with("morfessor.segmentations.txt", b"1 a\n")(folder)
        meta = json.loads((saved / "segmenter.json").read_text())
        meta["options"].update(options)
        (saved / "segmenter.json").write_text(json.dumps(meta))
        return saved

    return make


def _classic_with(name: str, content: bytes) -> Callable[[Path], Path]:
    """A Morfessor segmenter's folder (its ``segmenter.json`` as ``save`` writes it) whose file
    ``name`` is ``content``."""

    def make(folder: Path) -> Path:
        import json

        from segrl.baselines.morfessor import MODEL_FILE, MorfessorSegmenter
        from segrl.data.corpus import PLACEHOLDER

        saved = folder / "morfessor"
        saved.mkdir()
        meta = {"method": "morfessor", "options": MorfessorSegmenter().options, "alphabet": ["a"]}
        (saved / "segmenter.json").write_text(json.dumps({**meta, "placeholder": PLACEHOLDER}))
        (saved / MODEL_FILE).write_text("1 a\n", encoding="utf-8")
        (saved / name).write_bytes(content)
        return saved

    return make


def _agent_meta_with(key: str, value: object) -> Callable[[Path], Path]:
    """A saved agent segmenter whose ``agent_segmenter.json`` has ``key`` edited to ``value``."""

    def make(folder: Path) -> Path:
        import json

        saved = _saved_agent(folder)
        meta = json.loads((saved / "agent_segmenter.json").read_text(encoding="utf-8"))
        (saved / "agent_segmenter.json").write_text(json.dumps({**meta, key: value}))
        return saved

    return make


def _classic_described(meta: dict) -> Callable[[Path], Path]:
    """A folder whose ``segmenter.json`` is ``meta``."""

    def make(folder: Path) -> Path:
        import json

        saved = folder / "classic"
        saved.mkdir()
        (saved / "segmenter.json").write_text(json.dumps(meta), encoding="utf-8")
        return saved

    return make


def _units_config_edited(old: str, new: str) -> Callable[[Path], Path]:
    """A saved unit model whose ``config.toml`` has ``old`` replaced by ``new``."""

    def make(folder: Path) -> Path:
        saved = _units_without_config(folder)  # then written again, edited
        from segrl.config import save_config
        from segrl.units.config import build_units_config

        save_config(build_units_config("transformer"), saved / "config.toml")
        text = (saved / "config.toml").read_text(encoding="utf-8")
        assert old in text
        (saved / "config.toml").write_text(text.replace(old, new, 1), encoding="utf-8")
        return saved

    return make


def _classic_with_counts_input(folder: Path) -> Path:
    """A Morfessor segmenter's folder with ``in.txt`` beside its files: a counts list whose second
    line is not ``count word``."""
    saved = _classic_with("extra.txt", b"")(folder)
    (saved / "in.txt").write_text("3 walked\nwalked three times\n", encoding="utf-8")
    return saved


def _units_without_config(folder: Path) -> Path:
    from segrl.data.corpus import PLACEHOLDER
    from segrl.data.vocab import CharVocab
    from segrl.units.config import build_units_config
    from segrl.units.saving import build_model, save_unit_model

    vocab = CharVocab.from_texts(["the cat sat"], PLACEHOLDER)
    config = build_units_config("transformer")
    saved = save_unit_model(folder / "units", build_model(config, len(vocab)), vocab, config)
    (saved / "config.toml").unlink()
    return saved


def _too_long(folder: Path) -> Path:
    """A path with a name longer than any file system allows."""
    return folder / ("a" * 300)


def _path_too_long(folder: Path) -> Path:
    """A path of short enough names that is longer in all than Linux takes (4,096 bytes)."""
    return folder.joinpath(*["d" * 200] * 25)


SMALL = ["--min-char-count", "1", "--gold-max-words", "50"]

# (id, command line with {f} for the made file and {corpus} for a small good corpus, file maker,
#  a fragment the message must contain)
CASES = [
    ("gz-data", ["data", "--corpus", "{f}"], _garbled_gz, "damaged"),
    ("gz-baseline", ["baseline", "--corpus", "{f}"], _garbled_gz, "garbled.txt.gz"),
    ("gz-train", ["train", "--corpus", "{f}", "--steps", "1"], _garbled_gz, "garbled.txt.gz"),
    (
        "config-binary",
        ["baseline", "--config", "{f}"],
        _file("c.toml", bytes(range(256))),
        "c.toml",
    ),
    (
        "config-latin1",
        ["baseline", "--config", "{f}"],
        _file("l.toml", 'method = "caf\xe9"\n'.encode("latin-1")),
        "not a UTF-8",
    ),
    (
        "vocab-size-0",
        ["baseline", "--method", "bpe", "--vocab-size", "0", "--corpus", "{corpus}", *SMALL],
        None,
        "--vocab-size",
    ),
    ("flag-of-another-agent", ["train", "--agent", "ppo", "--steps", "5"], None, "--ppo-steps"),
    ("set-bad-value", ["train", "--set", "reinforce.lr=oops"], None, "reinforce.lr must be float"),
    ("set-unknown-key", ["train", "--set", "reinforce.rl=0.1"], None, "unknown option"),
    ("threads-negative", ["train", "--threads", "-1", "--steps", "1"], None, "--threads"),
    ("threads-zero", ["train", "--threads", "0", "--steps", "1"], None, "--threads"),
    (
        "threads-beyond-the-machine",
        ["train", "--threads", "100000", "--steps", "1"],
        None,
        "--threads 100000 is more threads than this machine's",
    ),
    ("lr-nan", ["train", "--lr", "nan", "--steps", "1"], None, "lr must be a finite number"),
    (
        "set-inf",
        ["train", "--set", "reinforce.max_grad_norm=inf", "--steps", "1"],
        None,
        "reinforce.max_grad_norm must be a finite number, got inf",
    ),
    ("out-unwritable", ["train", "--out", "/proc/segrl-run", "--steps", "1"], None, "--out"),
    (
        "units-threads",
        ["units", "train", "--threads", "0", "--corpus", "{corpus}", "--steps", "1"],
        None,
        "threads",
    ),
    ("lm-threads", ["lm", "train", "--threads", "-2", "--max-steps", "1"], None, "--threads"),
    (
        "tiny-corpus",
        ["baseline", "--corpus", "{f}"],
        _file("tiny.txt", b"One cat.\nTwo dogs.\nRed fox.\n"),
        "--min-char-count",
    ),
    (
        "gold-of-another-script",
        ["baseline", "--method", "characters", "--corpus", "{corpus}", "--gold", "{f}", *SMALL[:2]],
        _greek_gold,
        "greek.tsv",
    ),
    (
        "counts-bad-line",
        ["data", "--corpus", "{f}", "--corpus-format", "counts"],
        _file("c.txt", b"3 cat\nx dog\n"),
        "c.txt:2",
    ),
    (
        "not-utf8",
        ["data", "--corpus", "{f}"],
        _file("l1.txt", "caf\xe9 noir\n".encode("latin-1")),
        "UTF-8",
    ),
    (
        "missing-corpus",
        ["baseline", "--corpus", "{f}"],
        lambda d: d / "nowhere.txt",
        "no such file",
    ),
    ("empty-corpus", ["baseline", "--corpus", "{f}"], _file("empty.txt", b"\n  \n"), "empty.txt"),
    ("gold-wrong-format", ["data", "--gold", "{f}"], _file("g.tsv", b"just some text\n"), "g.tsv"),
    ("toml-typo", ["baseline", "--config", "{f}"], _file("t.toml", b"methd = 'bpe'\n"), "methd"),
    ("wordfreq-unknown-language", ["data", "--corpus", "wordfreq:xx"], None, "no list for"),
    (
        "compare-unknown-kind",
        ["compare", "--kind", "foo"],
        None,
        "--kind must be one of: baseline, agent, lm, units, evaluated; got 'foo'",
    ),
    (
        "corpus-language-not-the-bundled-gold's",
        ["baseline", "--method", "characters", "--corpus", "wordfreq:fi", "--max-words", "300"],
        None,
        "wordfreq:fi: the corpus is in fin but the bundled gold set is in eng; give a gold set in "
        "fin with --gold FILE",
    ),
    (
        "store-artifacts-unwritable",
        ["baseline", "--method", "characters", "--corpus", "{corpus}", *SMALL],
        _store_with_unwritable_artifacts,
        "cannot write its artifact folder",
    ),
    (
        "train-store-artifacts-unwritable",
        ["train", "--evaluator", "gold", "--steps", "2", "--corpus", "{corpus}", *SMALL],
        _store_with_unwritable_artifacts,
        "cannot write its artifact folder",
    ),
    (
        "agent-description-noise",
        ["segment", "--model", "{f}"],
        _agent_with("agent_segmenter.json", NOISE),
        "agent_segmenter.json: damaged",
    ),
    (
        "agent-vocab-noise",
        ["segment", "--model", "{f}"],
        _agent_with("vocab.json", NOISE),
        "vocab.json",
    ),
    (
        "classic-description-noise",
        ["segment", "--model", "{f}"],
        _classic_with("segmenter.json", NOISE),
        "segmenter.json: not a segrl segmenter description",
    ),
    (
        "segment-counts-line",
        ["segment", "--model", "{f}", "--input-format", "counts", "{f}/in.txt"],
        _classic_with_counts_input,
        "in.txt:2: a word-count list has 'count word' or 'word<TAB>count' on every line, "
        "got 'walked three times'. Fix the line, or give --input-format text or words.",
    ),
    (
        "policy-noise",
        ["segment", "--model", "{f}"],
        _agent_with("policy.pt", NOISE),
        "policy.pt: damaged or not a segmenter policy",
    ),
    (
        "policy-empty",
        ["evaluate", "--model", "{f}"],
        _agent_with("policy.pt", b""),
        "policy.pt: an empty file",
    ),
    (
        "policy-foreign",
        ["segment", "--model", "{f}"],
        _agent_with("policy.pt", {"weight": np.zeros(3, dtype=np.float32)}),
        "policy.pt: holds pickled Python objects",
    ),
    (
        "policy-of-another-model",
        ["segment", "--model", "{f}"],
        _agent_with("policy.pt", {"weight": torch.zeros(2, 3), "bias": torch.zeros(2)}),
        "policy.pt: weights that do not fit the policy agent_segmenter.json describes",
    ),
    (
        "morfessor-empty",
        ["segment", "--model", "{f}"],
        _classic_with("morfessor.segmentations.txt", b""),
        "morfessor.segmentations.txt: no segmentations",
    ),
    (
        "morfessor-count-negative",
        ["segment", "--model", "{f}"],
        _classic_with("morfessor.segmentations.txt", b"3 a\n-5 abc\n"),
        "morfessor.segmentations.txt: cannot read the Morfessor model (line 2: count -5",
    ),
    (
        "morfessor-count-zero",
        ["segment", "--model", "{f}"],
        _classic_with("morfessor.segmentations.txt", b"0 abc\n"),
        "(line 1: count 0, where a count is at least 1)",
    ),
    (
        "morfessor-corpusweight-word",
        ["segment", "--model", "{f}"],
        _classic_options(corpusweight="heavy"),
        "segmenter.json: options that make no morfessor segmenter (corpusweight must be a number",
    ),
    (
        "units-without-config",
        ["segment", "--model", "{f}"],
        _units_without_config,
        "without the config.toml",
    ),
    (
        "agent-max-len-wrong-type",
        ["segment", "--model", "{f}"],
        _agent_meta_with("max_len", "long"),
        "agent_segmenter.json: max_len must be int, got 'long'",
    ),
    (
        "agent-separator-not-in-vocab",
        ["segment", "--model", "{f}"],
        _agent_meta_with("separator_id", 99),
        "agent_segmenter.json: separator_id 99 is not an id of vocab.json",
    ),
    (
        "classic-method-unknown",
        ["segment", "--model", "{f}"],
        _classic_described({"method": "bogus"}),
        "segmenter.json: a 'bogus' segmenter, which this segrl does not know",
    ),
    (
        "classic-options-wrong",
        ["segment", "--model", "{f}"],
        _classic_described({"method": "sentencepiece", "options": {"model_type": "x"}}),
        "segmenter.json: options that make no sentencepiece segmenter",
    ),
    (
        "units-config-wrong-type",
        ["segment", "--model", "{f}"],
        _units_config_edited("max_len = 256", 'max_len = "long"'),
        "config.toml: arch.max_len must be int, got 'long'",
    ),
    (
        "units-config-out-of-range",
        ["segment", "--model", "{f}"],
        _units_config_edited("heads = 1", "heads = 3"),
        "config.toml: options that build no transformer model",
    ),
    (
        "units-config-eval-batch",
        ["segment", "--model", "{f}"],
        _units_config_edited("batch_size = 128", "batch_size = 0"),
        "config.toml: eval.batch_size must be at least 1",
    ),
    (
        "vocab-size-below-characters",
        ["baseline", "--method", "bpe", "--vocab-size", "2", "--corpus", "{corpus}", *SMALL],
        None,
        "--vocab-size 2 is too small for bpe on this corpus",
    ),
    (
        "model-uri-without-client",
        ["segment", "--model", "s3://bucket/model"],
        None,
        "s3://bucket/model: reading s3: URIs needs boto3",
        pytest.mark.skipif(
            importlib.util.find_spec("botocore") is not None, reason="the s3 client is installed"
        ),
    ),
    ("segment-name-too-long", ["segment", "--model", "{f}"], _too_long, "cannot open it"),
    ("data-name-too-long", ["data", "--corpus", "{f}"], _too_long, "longer than the file"),
    (  # no name in it is too long: the message said one was
        "data-path-too-long",
        ["data", "--corpus", "{f}"],
        _path_too_long,
        "the path is longer than the system allows (4095 bytes); give a shorter path",
    ),
    (  # refused by the up-front check of --out, before anything runs
        "baseline-out-path-too-long",
        ["baseline", "--method", "characters", "--corpus", "{corpus}", "--out", "{f}", *SMALL],
        _path_too_long,
        "the path is longer than the system allows (4095 bytes); give a folder you can write",
    ),
    (
        "evaluate-name-too-long",
        ["evaluate", "--predictions", "{f}"],
        _too_long,
        "longer than the file system allows",
    ),
    (
        "evaluate-predictions-cover-little-gold",
        ["evaluate", "--predictions", "{f}"],
        _file("pred.txt", b"anti-cataplectic-s\nhaberdash-ed\n"),
        "(0.0%, below --min-coverage 0.5) read as separator (saw '-')",
    ),
    (
        "evaluate-predictions-format-misread",
        ["evaluate", "--predictions", "{f}", "--predictions-format", "sigmorphon"],
        _file("pred.txt", b"un@@ expect@@ ed@@ ly\n"),
        "which looks bpe (saw '@@'); give that --predictions-format",
    ),
    (
        "evaluate-predictions-format-other",
        ["evaluate", "--predictions", "{f}", "--predictions-format", "morfessor"],
        _file("pred.txt", b"anti-cataplectic-s\nhaberdash-ed\n"),
        "read as --predictions-format morfessor, though it looks separator (saw '-')",
    ),
    (
        "evaluate-predictions-other-separator",
        ["evaluate", "--predictions", "{f}", "--predictions-format", "separator"]
        + ["--separator", "+"],
        _file("pred.txt", b"anti-cataplectic-s\nhaberdash-ed\n"),
        "read as --predictions-format separator with --separator +, though its words look "
        "separated by '-' (--predictions-format separator --separator -)",
    ),
    (
        "evaluate-predictions-no-marker",
        ["evaluate", "--predictions", "{f}", "--predictions-format", "separator"]
        + ["--separator", "+"],
        _file("pred.txt", b"anticataplectics\nhaberdashed\n"),
        "read as --predictions-format separator with --separator +; give the predictions",
    ),
    (
        "evaluate-min-coverage",
        ["evaluate", "--predictions", "{f}", "--min-coverage", "50"],
        _file("pred.txt", b"walk ed\n"),
        "--min-coverage 50: give a fraction from 0 to 1",
    ),
    ("train-out-name-too-long", ["train", "--out", "{f}/run"], _too_long, "--out"),
    ("segment-threads", ["segment", "--model", "m", "--threads", "0"], None, "--threads"),
    (
        "store-read-only",
        ["baseline", "--method", "characters", "--corpus", "{corpus}", *SMALL],
        _read_only_store,
        "is read-only",
        pytest.mark.skipif(
            os.geteuid() == 0, reason="root writes a read-only file; run the tests as a user"
        ),
    ),
]


@pytest.mark.parametrize(
    ("args", "make", "fragment"), [pytest.param(*c[1:4], id=c[0], marks=c[4:]) for c in CASES]
)
def test_bad_input_is_one_clear_line(mlflow_store, capsys, args, make, fragment):
    made = make(mlflow_store) if make else None
    corpus = _corpus(mlflow_store) if "{corpus}" in args else None
    argv = [a.replace("{f}", str(made)).replace("{corpus}", str(corpus)) for a in args]
    capsys.readouterr()  # what making the inputs printed (MLflow creating a store) is not judged
    code = main(argv)
    err = capsys.readouterr().err
    warned = "segrl: warning: "  # a corpus file of unknown language meets the bundled gold
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith(warned)]
    assert code == EXIT_USER_ERROR, err
    assert len(lines) == 1 and lines[0].startswith("segrl: error: "), err
    assert fragment in lines[0]
    assert "Traceback" not in err
    assert not (mlflow_store / "runs").exists()
    db = mlflow_store / "mlflow.db"
    if db.exists():
        with sqlite3.connect(db) as conn:
            assert conn.execute("select count(*) from runs").fetchone() == (0,)


def test_environment_options_and_actions_are_checked():
    import gymnasium as gym

    import segrl  # noqa: F401  (registers the environments)

    env = gym.make("segrl/CharSegment-v0", evaluator="morfessor").unwrapped
    with pytest.raises(ValueError, match="unknown reset option 'txt'"):
        env.reset(seed=0, options={"txt": "the cat"})
    env.reset(seed=0, options={"text": "walking home"})
    for action in (1.7, "1", np.array([1]), True):
        with pytest.raises(ValueError, match="is not in Discrete"):
            env.step(action)
    _obs, _reward, _done, _trunc, _info = env.step(np.int64(1))


def test_two_commands_create_a_new_store_at_once(tmp_path):
    """Both succeed: the store's tables are created once, under a lock."""
    corpus = write_small_corpus(tmp_path / "small.txt")
    command = [sys.executable, "-m", "segrl", "baseline", "--corpus", str(corpus), *SMALL]
    env = {"PATH": "/usr/bin:/bin", "SEGRL_CACHE_DIR": str(tmp_path / "cache")}
    procs = [
        subprocess.Popen(
            [*command, "--method", method],
            cwd=tmp_path,
            env={**env, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for method in ("characters", "words")
    ]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    assert [code for code, _ in results] == [0, 0], results
    with sqlite3.connect(tmp_path / "mlflow.db") as conn:
        assert conn.execute("select count(*) from runs").fetchone() == (2,)


def test_unwritable_run_folder_mid_run_names_the_file(tmp_path):
    from segrl.errors import WriteError
    from segrl.jobs import RunDir

    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    run.save(step=1, weights=[1.0])
    # the folder disappears and a file takes its place: writing into it fails
    for child in run.path.iterdir():
        child.unlink()
    run.path.rmdir()
    run.path.write_text("not a folder")
    with pytest.raises(WriteError, match=r"checkpoint\.pt: cannot write the checkpoint of step 2"):
        run.save(step=2, weights=[2.0])


def test_a_stdin_line_over_the_limit_is_refused(corpus, monkeypatch, capsys, tmp_path):
    """stdin has the line limit of a file (a 1 MB word would keep a segmenter busy for minutes)."""
    import io

    from segrl.baselines.trivial import CharacterSegmenter

    monkeypatch.setattr("segrl.data.corpus.MAX_LINE_CHARS", 50)
    folder = CharacterSegmenter().train(corpus).save(tmp_path / "chars")
    stdin = io.BytesIO(b"short\n" + b"y" * 60 + b"\n")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(stdin))
    assert main(["segment", "--model", str(folder), "--quiet"]) == EXIT_USER_ERROR
    captured = capsys.readouterr()
    assert captured.err.startswith("segrl: error: <stdin>:2: line longer than 50 characters")
    assert len(captured.err.splitlines()) == 1
    assert captured.out == ""
