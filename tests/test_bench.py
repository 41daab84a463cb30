"""segrl bench: suites, cells, the summary tables, and whole benches run locally and on Ray."""

from __future__ import annotations

import contextlib
import csv
import json
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from segrl.benchmark import builtin_suites, load_suite, run_bench
from segrl.benchmark.cells import Cell
from segrl.benchmark.report import format_markdown, format_text, summarise
from segrl.errors import ConfigError, DataError
from segrl.jobs import RunDir
from segrl.units.config import build_units_config

from .conftest import CHECKOUT, SHARED_DATA, plant_modules


def _suite_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "suite.toml"
    path.write_text(body, encoding="utf-8")
    return path


TWO_TRIVIAL = """
name = "tiny"
seeds = [0, 1]
[[languages]]
name = "en"
options = "--gold-max-words 300 --max-sentences 400"
[[systems]]
name = "characters"
command = "baseline --method characters"
[[systems]]
name = "words"
command = "baseline --method words"
"""


def test_builtin_suites_load():
    from segrl.cli.bench import BUILT_IN

    assert sorted(BUILT_IN.split(", ")) == sorted(builtin_suites())  # what --help names
    assert {"quick", "sigmorphon", "transfer"} <= set(builtin_suites())
    quick = load_suite("quick")
    assert quick.seeds == (0, 1)
    assert [lang.corpus for lang in quick.languages] == [None]  # the bundled corpus
    assert {"morfessor", "unigram", "bpe", "slm", "agent"} <= {s.name for s in quick.systems}


def test_units_suite_runs_segrls_own_cpu_configs():
    suite = load_suite("units")
    units = [s for s in suite.systems if s.command[:2] == ("units", "train")]
    assert {s.name for s in units} == {
        "transformer-cpu",
        "nvib-cpu",
        "dcsa-cpu",
        "stride-cpu",
        "seqreduce-cpu",
    }
    for system in units:
        name = system.command[system.command.index("--config") + 1]
        config = build_units_config(path=name)  # by name, from any working directory
        assert system.name == f"{config.model}-cpu" and config.device == "cpu"


def test_sigmorphon_suite_resolves_its_gold_files():
    if not (SHARED_DATA / "sigmorphon2022").exists():
        pytest.skip("../shared/data/sigmorphon2022 is only beside the development checkout")
    suite = load_suite("sigmorphon", SHARED_DATA)
    assert [lang.name for lang in suite.languages] == ["en", "hu", "es", "cs"]
    assert suite.languages[1].corpus == "wordfreq:hu"
    assert Path(suite.languages[1].gold).name == "hun.word.dev.tsv"
    assert len(suite.seeds) == 3


def test_transfer_suite_reads_the_words_of_gold_files_as_corpora(tmp_path):
    """The transfer suite's Latin and Mongolian corpora are their gold files' words
    (``goldwords:PATH``), resolved under ``--data-dir`` like the gold paths, and missing there is
    the same clear error."""
    data = tmp_path / "data" / "sigmorphon2022"
    data.mkdir(parents=True)
    for name in ("eng", "hun", "spa", "ces", "lat"):
        (data / f"{name}.word.dev.tsv").write_text("walked\twalk @@ed\t100\n", encoding="utf-8")
    with pytest.raises(DataError, match="mon.word.train.tsv not found"):
        load_suite("transfer", tmp_path / "data")
    (data / "mon.word.train.tsv").write_text("нуруунд\tнуруу @@д\t100\n", encoding="utf-8")
    suite = load_suite("transfer", tmp_path / "data")
    assert [lang.name for lang in suite.languages] == [
        "en",
        "hu",
        "es",
        "cs",
        "bundled",
        "la",
        "mn",
    ]
    latin, mongolian = suite.languages[5:]
    assert latin.corpus == f"goldwords:{(data / 'lat.word.dev.tsv').resolve()}"
    assert mongolian.corpus == f"goldwords:{(data / 'mon.word.train.tsv').resolve()}"
    assert mongolian.gold == str((data / "mon.word.train.tsv").resolve())
    assert {"morfessor", "unigram", "slm", "slm-1500", "agent", "agent-6000"} <= {
        s.name for s in suite.systems
    }


def test_missing_data_dir_is_a_clear_error(tmp_path):
    with pytest.raises(DataError, match="--data-dir"):
        load_suite("sigmorphon", tmp_path / "nowhere")


@pytest.mark.parametrize(
    ("system", "message"),
    [
        ('command = "train --max-minutes 5"', "budgets are steps or epochs"),
        ('command = "baseline --method bpe --corpus x.txt"', "--corpus is not allowed"),
        ('command = "ui"', "command must start with one of"),
        ('command = "baseline --method all"', "list each method"),
        ('command = "baseline"\ncolour = "red"', "unknown key colour"),
    ],
)
def test_bad_systems_are_refused(tmp_path, system, message):
    body = f'seeds = [0]\n[[languages]]\nname = "x"\n[[systems]]\nname = "s"\n{system}\n'
    with pytest.raises(ConfigError, match=message):
        load_suite(str(_suite_file(tmp_path, body)))


def test_selection_and_unknown_names(tmp_path):
    suite = load_suite(str(_suite_file(tmp_path, TWO_TRIVIAL)))
    picked = suite.select(systems=["words"], seeds=[3])
    assert [s.name for s in picked.systems] == ["words"]
    assert picked.seeds == (3,)
    with pytest.raises(ConfigError, match="no system morfessor"):
        suite.select(systems=["morfessor"])


def test_cell_command_lines(tmp_path):
    suite = load_suite("quick")
    agent = next(s for s in suite.systems if s.name == "agent")
    baseline = next(s for s in suite.systems if s.name == "bpe")
    cell = Cell(suite.languages[0], agent, 7)
    argv = cell.argv(tmp_path, "exp")
    assert argv[:2] == ["train", "--evaluator"]
    assert argv[argv.index("--train-seed") + 1] == "7"
    assert argv[argv.index("--threads") + 1] == "1"
    assert argv[argv.index("--out") + 1].endswith("en-bundled/agent/seed-7/run")
    assert "--gold-max-words" in argv
    plain = Cell(suite.languages[0], baseline, 1).argv(tmp_path, "exp")
    assert "--out" not in plain and "--threads" not in plain
    assert plain[plain.index("--train-seed") + 1] == "1"


def test_a_cell_on_gold_words_may_report_the_posterior_decoding_too():
    suite = load_suite("quick")
    required, optional = Cell(suite.languages[0], suite.systems[0], 0).metrics
    assert "boundary_f1" in required and "word_f1" not in required
    assert optional == tuple(f"posterior/{m}" for m in required)


def _result(system, seed, f1, p=0.5, r=0.5, u=0.3, status="done"):
    return {
        "language": "en",
        "gold_language": "eng",
        "system": system,
        "seed": seed,
        "status": status,
        "boundary_f1": f1,
        "boundary_precision": p,
        "boundary_recall": r,
        "units_per_char": u,
    }


def test_summary_means_and_standard_deviations():
    rows = summarise(
        [
            _result("a", 0, 0.40),
            _result("a", 1, 0.50),
            _result("a", 2, 0.60),
            _result("b", 0, 0.70),
            _result("b", 1, 0.0, status="failed"),
        ]
    )
    a, b = rows
    assert a["n_seeds"] == 3 and a["boundary_f1_mean"] == pytest.approx(0.5)
    assert a["boundary_f1_sd"] == pytest.approx(0.1)  # sample sd of 0.4, 0.5, 0.6
    assert b["n_seeds"] == 1 and b["failed"] == 1 and b["boundary_f1_sd"] == 0.0
    text = format_text(rows)
    assert text.startswith("== en (gold: eng)\n")
    assert "b (1 failed) *" in text and "0.500 ± 0.100" in text and "(1 failed)" in text
    markdown = format_markdown(rows)
    assert "### en (gold: eng)" in markdown
    assert "| **b (1 failed)** | 1 | 0.500 | 0.500 | **0.700** | - | - | 0.300 |" in markdown


def _runs(experiment: str) -> list:
    from mlflow.tracking import MlflowClient

    from segrl.tracking.store import tracking_uri

    client = MlflowClient(tracking_uri())
    exp = client.get_experiment_by_name(experiment)
    return client.search_runs([exp.experiment_id]) if exp else []


@pytest.mark.slow
def test_bench_runs_logs_and_resumes(mlflow_store, tmp_path, capsys):
    from segrl.cli import main

    suite = _suite_file(tmp_path, TWO_TRIVIAL)
    out = tmp_path / "bench"
    args = ["bench", "--suite", str(suite), "--out", str(out), "--workers", "2"]
    assert main(args) == 0
    printed, err = capsys.readouterr()
    assert "== en (gold: eng)" in printed and "characters" in printed
    # stderr is no terminal here: no bar drawn with \r, a line per cell instead
    assert "\r" not in err and err.count("[bench tiny] ") == 4, err
    rows = list(csv.DictReader((out / "results.csv").open()))
    chars = next(r for r in rows if r["system"] == "characters")
    assert float(chars["units_per_char_mean"]) == pytest.approx(1.0)
    assert float(chars["boundary_recall_mean"]) == pytest.approx(1.0)
    assert chars["n_seeds"] == "2"
    assert (out / "f1.png").stat().st_size > 1000
    runs = _runs("segrl-bench")
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 1 and len(children) == 4
    assert {r.data.tags["mlflow.parentRunId"] for r in children} == {parents[0].info.run_id}
    assert all(len(r.data.tags["segrl.corpus_hash"]) == 16 for r in children)
    assert parents[0].data.metrics["en/words/boundary_f1"] == pytest.approx(0.0)
    # a second run skips every finished cell: no new runs, the same parent
    assert main(args) == 0
    assert len(_runs("segrl-bench")) == 5
    cells = json.loads((out / "cells.json").read_text())
    assert {c["status"] for c in cells} == {"skipped"}


@pytest.mark.slow
def test_quick_suite_end_to_end(mlflow_store, tmp_path):
    """What CI checks: the built-in quick suite runs every kind of system (classic, slm, agent,
    unit model)."""
    outcome = run_bench(load_suite("quick"), tmp_path / "quick", workers=2)
    assert not outcome.failed, outcome.failed
    by_system = {row["system"]: row for row in outcome.rows}
    # every system, and the slm's posterior decoding as a row of its own
    assert set(by_system) == {s.name for s in load_suite("quick").systems} | {"slm-posterior"}
    assert 0 < by_system["slm-posterior"]["boundary_f1_mean"] < 1
    assert all(row["n_seeds"] == 2 for row in outcome.rows)
    assert by_system["characters"]["units_per_char_mean"] == pytest.approx(1.0)
    assert 0 < by_system["morfessor"]["boundary_f1_mean"] < 1
    assert 0 < by_system["seqreduce"]["units_per_char_mean"] < 0.6  # ceil(n / 4) units at most


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


RAY_AUTH_VARIABLES = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")


def _bench_on_ray(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, auth: dict[str, str], command_line: bool
) -> None:
    """Start a Ray head on 127.0.0.1 with the environment ``auth`` (Ray's token variables) and a
    home folder of its own, run a two-cell suite on it with the same environment (from this
    process, or as ``segrl bench --ray`` in a process of its own: Ray reads its token variables
    once per process), and stop it by its CLI. Ray keeps state in ``~/.ray`` (an ``auth_token``
    written by an earlier ``segrl bench --ray local``): a home of the test's own keeps what a
    user's earlier runs left there out of it."""
    import os

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in RAY_AUTH_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in auth.items():
        monkeypatch.setenv(name, value)
    pytest.importorskip("ray", reason="the optional cluster extra (ray) is not installed")
    ray_cli = Path(sys.executable).parent / "ray"
    if not ray_cli.exists():
        ray_cli = shutil.which("ray")
    env = dict(os.environ)
    port = _free_port()
    # Ray's socket paths must stay short: a temp folder under /tmp, not pytest's long tmp_path
    temp = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))
    start = [
        str(ray_cli),
        "start",
        "--head",
        "--num-cpus",
        "2",
        "--port",
        str(port),
        "--node-ip-address",
        "127.0.0.1",
        "--include-dashboard",
        "false",
        "--temp-dir",
        str(temp),
    ]
    started = subprocess.run(start, capture_output=True, text=True, timeout=180, env=env)
    assert started.returncode == 0, started.stderr[-2000:]
    try:
        suite_file = _suite_file(tmp_path, TWO_TRIVIAL)
        if command_line:
            bench = [sys.executable, "-m", "segrl", "bench", "--suite", str(suite_file)]
            bench += [
                "--seeds",
                "0",
                "--out",
                str(tmp_path / "bench"),
                "--ray",
                f"127.0.0.1:{port}",
            ]
            done = subprocess.run(bench, capture_output=True, text=True, timeout=600, env=env)
            assert done.returncode == 0, done.stderr[-2000:]
        else:
            suite = load_suite(str(suite_file)).select(seeds=[0])
            outcome = run_bench(suite, tmp_path / "bench", ray_address=f"127.0.0.1:{port}")
            assert not outcome.failed, outcome.failed
            assert {r["status"] for r in outcome.results} == {"done"}
        assert len(_runs("segrl-bench")) == 3  # the parent and two cells
    finally:
        subprocess.run([str(ray_cli), "stop", "--force"], capture_output=True, timeout=120, env=env)
        shutil.rmtree(temp, ignore_errors=True)


@pytest.mark.slow
def test_bench_on_a_local_ray_cluster(mlflow_store, tmp_path, monkeypatch):
    _bench_on_ray(tmp_path, monkeypatch, {}, command_line=False)


@pytest.mark.slow
def test_bench_on_a_token_authenticated_ray_cluster(mlflow_store, tmp_path, monkeypatch):
    """A cluster started with token authentication takes the cells of a bench given the same
    token in its environment (docs/benchmark.md)."""
    import secrets

    token = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
    _bench_on_ray(tmp_path, monkeypatch, token, command_line=True)


@pytest.mark.parametrize(
    ("replace", "fragment"),
    [
        (
            ('command = "baseline --method words"', 'command = "baseline --methd words"'),
            "suite tiny, system 'words' on 'en': ",
        ),
        (
            ('name = "en"\n', 'name = "en"\ngold = "no-such-folder/gold.tsv"\n'),
            "suite tiny, language 'en': its gold no-such-folder/gold.tsv does not exist",
        ),
        (
            ('command = "baseline --method words"', 'command = "baseline --method nonsense"'),
            "suite tiny, system 'words' on 'en': unknown segmenter 'nonsense'",
        ),
        (
            ('command = "baseline --method words"', 'command = "train --steps -5"'),
            "system 'words' on 'en': reinforce.steps must be at least 1, got -5",
        ),
        (
            ('command = "baseline --method words"', 'command = "lm train --set bogus.key=1"'),
            "system 'words' on 'en': command line: unknown option 'bogus'",
        ),
        (
            ('command = "baseline --method words"', 'command = "units train --set train.lr=-1"'),
            "system 'words' on 'en': train.lr must be positive, got -1.0",
        ),
    ],
    ids=["flag-typo", "missing-gold", "method", "steps", "set-unknown", "units-value"],
)
def test_a_suite_is_checked_before_any_cell_runs(mlflow_store, tmp_path, capsys, replace, fragment):
    """A misspelt flag in a system's command, a value its job would refuse (an unknown method or
    option, a step count below 1), or a gold path that does not exist (one outside ``{data_dir}``,
    which the suite's loader checks), stops the bench before its parent run or any cell starts: one
    line naming the system or language, exit 2."""
    from segrl.cli import main

    suite = _suite_file(tmp_path, TWO_TRIVIAL.replace(*replace))
    code = main(["bench", "--suite", str(suite), "--data-dir", str(tmp_path)])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("segrl: error: "), err
    assert fragment in lines[0]
    assert _runs("segrl-bench") == []


def test_named_corpus_sources_are_not_checked_as_paths(tmp_path):
    """``wordfreq:`` and ``hf:`` corpora are names, not files: the up-front check leaves them to
    their loaders, while a missing corpus file is refused."""
    from segrl.benchmark.runner import check_sources

    body = TWO_TRIVIAL.replace('name = "en"\n', 'name = "en"\ncorpus = "CORPUS"\n')
    for named in ("wordfreq:en", "hf:wikitext"):
        check_sources(load_suite(str(_suite_file(tmp_path, body.replace("CORPUS", named)))))
    missing = load_suite(str(_suite_file(tmp_path, body.replace("CORPUS", "no-such.txt"))))
    with pytest.raises(ConfigError, match="its corpus no-such.txt does not exist"):
        check_sources(missing)


def test_cells_import_nothing_from_the_working_folder(mlflow_store, small_corpus_file, monkeypatch):
    """The probe: a ``segrl.py`` (or ``numpy.py``) in the folder a bench runs from ran in every
    cell, whose ``python -m segrl`` put that folder first on its import path. The cells now run
    segrl's own modules and succeed, and nothing planted ran."""
    monkeypatch.setenv("PYTHONPATH", str(CHECKOUT))  # the cells run this checkout's segrl
    markers = plant_modules(mlflow_store, ["segrl", "numpy", "mlflow"])
    body = TWO_TRIVIAL.replace("seeds = [0, 1]", "seeds = [0]").replace(
        'name = "en"\n', f'name = "en"\ncorpus = "{small_corpus_file}"\n'
    )
    suite = load_suite(str(_suite_file(mlflow_store, body)))
    outcome = run_bench(suite, out=mlflow_store / "bench")
    assert [r["status"] for r in outcome.results] == ["done", "done"], outcome.results
    assert [m.name for m in markers if m.exists()] == []


ONE_LONG_CELL_FIRST = """
name = "tiny"
seeds = [0]
[[languages]]
name = "en"
corpus = "{corpus}"
options = "--gold-max-words 50 --min-char-count 1"
[[systems]]
name = "agent"
command = "train --evaluator gold --steps 1000000 --batch-size 2 --checkpoint-every 2"
[[systems]]
name = "characters"
command = "baseline --method characters"
[[systems]]
name = "words"
command = "baseline --method words"
"""


@pytest.mark.slow
@pytest.mark.parametrize("stop", ["ctrl-c", "sigterm"])
def test_ctrl_c_stops_the_bench_and_its_queued_cells(stop, mlflow_store, small_corpus_file):
    """A Ctrl-C (SIGINT to the bench's process group, as a terminal sends it), or a SIGTERM to the
    bench alone (``kill``, a scheduler), while the first of three cells trains: that cell stops at a
    checkpoint, the queued two never start, the parent run ends KILLED, and the message says how to
    resume; the same command then continues it."""
    import os
    import signal

    suite = _suite_file(mlflow_store, ONE_LONG_CELL_FIRST.format(corpus=small_corpus_file))
    out = mlflow_store / "bench"
    command = [sys.executable, "-m", "segrl", "bench", "--suite", str(suite), "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    said = mlflow_store / "stderr.txt"
    with said.open("w") as stderr:
        bench = subprocess.Popen(
            command,
            cwd=mlflow_store,
            env=env,
            stderr=stderr,
            start_new_session=True,
            # as from a terminal: a Ctrl-C is a KeyboardInterrupt even where this test runs with
            # SIGINT ignored (a shell's background job), which a child would otherwise inherit
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
    training = out / "en" / "agent" / "seed-0" / "run"
    while not (training / "checkpoint.pt").exists():  # the first cell is training
        with contextlib.suppress(subprocess.TimeoutExpired):
            pytest.fail(f"the bench ended first: {bench.wait(timeout=0.1)}, {said.read_text()}")
    if stop == "ctrl-c":
        os.killpg(bench.pid, signal.SIGINT)
    else:
        bench.send_signal(signal.SIGTERM)
    code = bench.wait(timeout=300)
    err = said.read_text()
    assert code == (130 if stop == "ctrl-c" else 143), err
    lines = [line for line in err.splitlines() if line.startswith("segrl:")]
    by = "" if stop == "ctrl-c" else " by SIGTERM"
    assert lines == [
        f"segrl: interrupted{by}: bench tiny stopped after 0 of 3 cells, its MLflow parent run "
        "KILLED; "
        f"run the same command (the same --out, {out}) to resume: finished cells are skipped, "
        "stopped training cells resume from their checkpoints, the same parent run continues"
    ], err
    assert "Traceback" not in err
    assert not (out / "en" / "characters").exists() and not (out / "en" / "words").exists()
    stopped = RunDir(training)
    assert not stopped.finished and stopped.info["step"] >= 2
    runs = {r.info.run_id: r for r in _runs("segrl-bench")}
    parent_id = json.loads((out / "bench.json").read_text())["parent_run_id"]
    assert runs[parent_id].info.status == "KILLED"
    assert runs[stopped.info["mlflow_run_id"]].info.status == "KILLED"
    assert len(runs) == 2  # the parent and the one cell that started
    again = subprocess.run(
        [*command, "--systems", "characters,words"], cwd=mlflow_store, env=env, capture_output=True
    )
    assert again.returncode == 0, again.stderr[-2000:]
    runs = {r.info.run_id: r for r in _runs("segrl-bench")}
    assert runs[parent_id].info.status == "FINISHED" and len(runs) == 4


def test_two_benches_on_one_folder(mlflow_store, tmp_path):
    """A bench folder another process is running a bench into is refused in one line naming that
    process; once it is let go, the same bench runs."""
    from segrl.cli import main

    suite = _suite_file(tmp_path, TWO_TRIVIAL)
    out = tmp_path / "bench"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from segrl.files import lock_folder; "
            f"lock_folder({str(out)!r}); print('held', flush=True); time.sleep(600)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        args = ["bench", "--suite", str(suite), "--out", str(out), "--seeds", "0"]
        with pytest.raises(
            ConfigError, match=f"is in use: process {holder.pid} is running a bench"
        ):
            run_bench(load_suite(str(suite), tmp_path).select(None, None, [0]), out)
        assert not (out / "cells.json").exists()
    finally:
        holder.kill()
        holder.wait()
    assert main(args) == 0
    assert (out / "cells.json").exists()
