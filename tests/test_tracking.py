import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

import mlflow
import segrl
from segrl.config import BaselineConfig
from segrl.errors import TrackingError
from segrl.tracking.queries import compare_metrics, segmenter_runs
from segrl.tracking.runs import log_metrics, log_segmenter, start_run
from segrl.tracking.store import ensure_reachable, tracking_uri
from segrl.tracking.tags import RUN_TAGS_VARIABLE, SEGMENTER_TAG, source_label, version_tags
from segrl.tracking.ui import (
    EXPERIMENT_KIND_TAG,
    VIEW_NAME,
    VIEW_TAG,
    app_installed,
    create_app,
    runs_table_url,
    runs_view,
    view_page,
)

from .conftest import CHECKOUT, plant_modules


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_default_store_is_sqlite_in_the_working_folder(mlflow_store):
    assert tracking_uri() == f"sqlite:///{mlflow_store / 'mlflow.db'}"
    with start_run(BaselineConfig(), "exp", "r1") as run:
        log_metrics({"loss": 1.5}, step=3)
    assert (mlflow_store / "mlflow.db").exists()
    assert (mlflow_store / "mlruns").is_dir()
    client = MlflowClient(tracking_uri())
    logged = client.get_run(run.info.run_id)
    assert logged.data.params["data.max_len"] == "128"
    assert logged.data.params["method"] == "morfessor"
    assert [m.step for m in client.get_metric_history(run.info.run_id, "loss")] == [3]
    assert "config.toml" in [a.path for a in client.list_artifacts(run.info.run_id)]


def test_segmenter_runs_for_compare(mlflow_store):
    for f1 in (0.2, 0.4):
        with start_run({"x": 1}, "exp", "m"):
            log_segmenter("morfessor", "baseline", {"boundary_f1": f1}, "un-expect-ed\n")
    with start_run({"x": 1}, "exp", "c"):
        log_segmenter("characters", "baseline", {"boundary_f1": 0.1})
    with start_run({"x": 1}, "exp", "not a segmenter"):
        log_metrics({"boundary_f1": 0.9})
    latest = segmenter_runs("exp")
    assert [(r["segmenter"], r["boundary_f1"]) for r in latest] == [
        ("characters", 0.1),
        ("morfessor", 0.4),
    ]
    assert len(segmenter_runs("exp", latest_only=False)) == 3
    with pytest.raises(TrackingError, match="no experiment named 'other'"):
        segmenter_runs("other")


def test_a_segmenter_run_logs_its_scores_to_four_decimals(mlflow_store):
    """MLflow's tables show a metric as it was logged: the scores are logged rounded, the others
    (a model's bits per character, counts, the covered fraction) as they are."""
    metrics = {
        "boundary_f1": 2 / 3,
        "posterior/word_f1": 1 / 7,
        "boundary_f1_by_length/5-7": 0.123456,
        "gold_units_per_char": 0.33333333,
        "bits_per_char": 2.3456789,
        "covered_fraction": 39999 / 40000,  # rounded, it would read as the whole gold set
        "gold_words": 40000.0,
    }
    with start_run({"x": 1}, "exp", "m") as run:
        log_segmenter("morfessor", "baseline", metrics)
    assert MlflowClient(tracking_uri()).get_run(run.info.run_id).data.metrics == {
        "boundary_f1": 0.6667,
        "posterior/word_f1": 0.1429,
        "boundary_f1_by_length/5-7": 0.1235,
        "gold_units_per_char": 0.3333,
        "bits_per_char": 2.3456789,
        "covered_fraction": 0.999975,
        "gold_words": 40000.0,
    }
    (row,) = segmenter_runs("exp")
    assert row["boundary_f1"] == 0.6667 and row["bits_per_char"] == 2.3456789


def test_compare_reads_runs_logged_under_the_old_units_names():
    # segrl evaluate once logged its units per character of the gold words as units_per_char
    old = {"boundary_f1": 0.5, "units_per_char": 0.27}
    assert compare_metrics(old, "evaluated") == {"boundary_f1": 0.5, "gold_units_per_char": 0.27}
    # a training run's units_per_char is of held-out text: it is not shown as the gold one
    trained = {"units_per_char": 0.44, "gold_units_per_char": 0.27}
    assert compare_metrics(trained, "baseline") == {"gold_units_per_char": 0.27}
    assert compare_metrics({"units_per_char": 0.44}, "baseline") == {}
    # word discovery once logged the gold's own density as gold_units_per_char
    words = {"word_f1": 0.6, "units_per_char": 0.3, "gold_units_per_char": 0.25}
    assert compare_metrics(words, "agent") == {"word_f1": 0.6, "gold_units_per_char": 0.3}


def test_failed_run_is_marked_and_left_out_of_compare(mlflow_store):
    with pytest.raises(RuntimeError), start_run({"x": 1}, "exp", "boom"):
        log_segmenter("bpe", "baseline", {"boundary_f1": 0.3})
        raise RuntimeError("training diverged")
    runs = MlflowClient(tracking_uri()).search_runs(
        [mlflow.get_experiment_by_name("exp").experiment_id]
    )
    assert [r.info.status for r in runs] == ["FAILED"]
    assert segmenter_runs("exp") == []


def test_unreachable_server_fails_before_the_job_starts(mlflow_store, monkeypatch):
    import urllib.request

    uri = f"http://127.0.0.1:{closed_port()}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    requests = []
    real_urlopen = urllib.request.urlopen

    def counting_urlopen(url, *args, **kwargs):
        requests.append(url)
        return real_urlopen(url, *args, **kwargs)

    monkeypatch.setattr(urllib.request, "urlopen", counting_urlopen)
    ran = []
    message = f"cannot reach the MLflow tracking server at {uri}"
    with pytest.raises(TrackingError, match=message), start_run({"x": 1}, "exp"):
        ran.append(True)
    assert not ran
    assert requests == [f"{uri}/health"]  # one health request, not MLflow's minutes of retries


def test_broken_sqlite_store_is_a_clear_error(mlflow_store):
    (mlflow_store / "mlflow.db").write_bytes(b"this is not a database" * 100)
    with pytest.raises(TrackingError, match="not a readable sqlite database"):
        ensure_reachable()


def test_a_store_missing_one_of_mlflows_tables_is_named_damaged(mlflow_store, capsys):
    """A store whose ``metrics`` table was dropped: one line naming the table, not MLflow's pages
    of SQLAlchemy tracebacks, and no run started."""
    import sqlite3

    from segrl.cli import main

    with start_run({"x": 1}, "exp"):
        pass
    db = mlflow_store / "mlflow.db"
    with sqlite3.connect(db) as conn:
        conn.execute("drop table metrics")
    with pytest.raises(TrackingError) as damaged:
        ensure_reachable()
    assert str(damaged.value).startswith(f"tracking store {db} is damaged: MLflow's table metrics")
    capsys.readouterr()
    assert main(["baseline", "--method", "characters", "--max-sentences", "50"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is damaged: MLflow's table metrics is missing" in err


def test_a_store_another_process_holds_is_named_as_locked(mlflow_store):
    """A store another writer holds locked (past sqlite's 5-second wait) is not called broken:
    moving it aside, as a broken one should be, would split its runs."""
    import sqlite3

    db = mlflow_store / "mlflow.db"
    with sqlite3.connect(db) as setup:
        setup.execute("create table t (x)")
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("begin exclusive")
    try:
        with pytest.raises(TrackingError) as locked:
            ensure_reachable()
    finally:
        holder.execute("rollback")
        holder.close()
    assert f"tracking store {db} is locked by another process" in str(locked.value)
    assert "move it aside" not in str(locked.value)


def _descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait_until_up(process: subprocess.Popen, base: str) -> None:
    """Wait for the MLflow UI that ``process`` serves at ``base`` to answer (two minutes at most)."""
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        assert process.poll() is None, "the MLflow UI exited"
        assert time.monotonic() < deadline, "the MLflow UI did not start in 120 s"
        time.sleep(0.5)


@pytest.mark.slow
def test_ui_serves_the_logged_run_and_stops_with_all_its_workers(mlflow_store):
    """``segrl ui`` serves the store over REST; SIGTERM stops it, its server and every worker. An
    ``mlflow.py`` or ``uvicorn.py`` in the working folder runs in none of them (the probe: ``python
    -m mlflow ui`` put the folder first on the server's import path, and MLflow's server starts its
    workers with ``python -m uvicorn``)."""
    with start_run({"x": 1}, "exp", "for-ui") as run:
        log_segmenter("unigram", "baseline", {"boundary_f1": 0.375}, "sample\n")
    markers = plant_modules(mlflow_store, ["mlflow", "uvicorn", "numpy"])
    port = closed_port()
    process = subprocess.Popen(  # -P: as the console script `segrl`, which imports nothing here
        [sys.executable, "-P", "-m", "segrl", "ui", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(CHECKOUT)},
    )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(process, base)
        with urllib.request.urlopen(
            f"{base}/api/2.0/mlflow/runs/get?run_id={run.info.run_id}"
        ) as r:
            data = json.load(r)["run"]
        metrics = {m["key"]: m["value"] for m in data["data"]["metrics"]}
        tags = {t["key"]: t["value"] for t in data["data"]["tags"]}
        assert metrics["boundary_f1"] == 0.375
        assert tags[SEGMENTER_TAG] == "unigram"
        with urllib.request.urlopen(
            f"{base}/api/2.0/mlflow/artifacts/list?run_id={run.info.run_id}"
        ) as r:
            files = [f["path"] for f in json.load(r)["files"]]
        assert "samples.txt" in files
        workers = _descendants(process.pid)
        assert workers  # the MLflow server (and its workers) run below segrl ui
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
        deadline = time.monotonic() + 30
        while any(_alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not [w for w in workers if _alive(w)], "workers outlived segrl ui"
        with pytest.raises(OSError):
            urllib.request.urlopen(f"{base}/health", timeout=2)
        assert [m.name for m in markers if m.exists()] == []
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


def test_where_to_look_names_a_bench_experiment_to_segrl_ui(mlflow_store):
    """A job's closing lines give the ``segrl ui`` command that links its own experiment's runs:
    ``--experiment`` where it is not the default one (``segrl bench`` logs to segrl-bench)."""
    from segrl.cli.common import where_to_look

    assert "View them: segrl ui   (" in where_to_look("segrl")
    assert "View them: segrl ui --experiment segrl-bench   (" in where_to_look("segrl-bench")
    assert "--experiment 'my runs'" in where_to_look("my runs")


def test_the_experiment_opens_on_its_runs_by_corpus_and_gold(mlflow_store):
    with start_run({"x": 1}, "exp", "a-run"):
        log_segmenter(
            "unigram", "baseline", {"boundary_f1": 0.5, "boundary_f1_by_length/1-4": 0.25}
        )
    client = MlflowClient(tracking_uri())
    experiment = client.get_experiment_by_name("exp")
    assert experiment.tags[EXPERIMENT_KIND_TAG] == "custom_model_development"
    saved = json.loads(experiment.tags[VIEW_TAG])  # a saved view: the UI's Views menu lists it
    assert saved["name"] == VIEW_NAME and isinstance(saved["createdAt"], int)
    view = json.loads(saved["state"])
    assert view == runs_view()
    assert view["selectedColumns"][:6] == [
        "tags.`segrl.corpus_label`",
        "tags.`segrl.corpus_language`",  # a corpus scored on gold of another language shows
        "tags.`segrl.gold_label`",
        "tags.`segrl.gold_language`",
        "tags.`segrl.gold_coverage`",
        "metrics.`boundary_f1`",  # the sort key, before the other metrics
    ]
    assert "metrics.`boundary_precision`" in view["selectedColumns"]
    # one tag, corpus, gold and the part of it scored: MLflow names the group by its value alone
    assert view["groupBy"]["groupByKeys"] == [{"mode": "tag", "groupByData": "segrl.data"}]
    widths = view["columnWidths"]
    # with MLflow's checkbox and Created columns (about 225 px), they fit the 1345 px of the
    # table in a window 1600 px wide, boundary F1 the last
    assert sum(widths[c] for c in ["attributes.`Run Name`", *view["selectedColumns"][:6]]) <= 1120
    assert view["orderByKey"] == "metrics.`boundary_f1`" and view["orderByAsc"] is False
    number = experiment.experiment_id
    assert runs_table_url("http://127.0.0.1:5000", "exp") == (
        f"http://127.0.0.1:5000/#/experiments/{number}/runs?workflowType=machine_learning"
        "&orderByKey=metrics.%60boundary_f1%60&orderByAsc=false"
    )  # no viewStateShareKey: MLflow shows a shared view with a banner on every visit
    assert runs_table_url("http://h:1", "exp", app=True) == f"http://h:1/segrl/runs/{number}"
    assert runs_table_url("http://h:1", "no-such-experiment") == "http://h:1"
    run = client.search_runs([experiment.experiment_id])[0]
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert "boundary_f1_by_length.png" in artifacts  # every segmenter run logs a picture
    assert run.data.tags["segrl.version"]
    # an experiment with an older segrl's view (no name: not in the Views menu) gets this one
    client.set_experiment_tag(number, VIEW_TAG, json.dumps({"selectedColumns": []}))
    with start_run({"x": 1}, "exp", "another"):
        pass
    assert json.loads(client.get_experiment(number).tags[VIEW_TAG])["name"] == VIEW_NAME


@pytest.mark.parametrize(
    ("source", "label"),
    [
        (
            "goldwords:/long/path/to/sigmorphon2022/mon.word.train.tsv",
            "goldwords:mon.word.train.tsv",
        ),
        ("/long/path/to/corpora/mon.txt", "mon.txt"),
        ("segmented:/data/brent/", "segmented:brent"),
        ("segmented:bundled", "segmented:bundled"),
        ("wordfreq:en", "wordfreq:en"),
        ("synthetic:3", "synthetic:3"),
        ("bundled:wikitext2_test.txt.gz", "bundled"),
        ("bundled:sigmorphon2022_eng_word_dev_surface.tsv.gz", "bundled"),
        ("eng.word.dev.tsv", "eng.word.dev.tsv"),
    ],
)
def test_a_source_is_labelled_by_its_kind_and_file_name(source, label):
    assert source_label(source) == label


def test_the_view_groups_runs_by_one_short_label_of_their_data(mlflow_store):
    """A corpus and a gold set given by long paths are labelled by their kinds and file names (the
    sources stay whole in their own tags), and the three parts of a view's group are one tag. A run
    logged before these labels gets them when the experiment's link is made (``segrl ui``)."""
    from segrl.config import DataConfig
    from segrl.data.corpus import load_corpus
    from segrl.data.gold import load_gold
    from segrl.tracking.runs import log_data, set_tags

    folder = mlflow_store / "long" / "path" / "to" / "sigmorphon2022"
    folder.mkdir(parents=True)
    stems, endings = ("walk", "jump", "talk", "play", "call"), ("ed", "s", "ing", "er")
    words = [f"{s}{e}\t{s} @@{e}" for s in stems for e in endings]
    (folder / "mon.word.train.tsv").write_text("\n".join(words) + "\n", encoding="utf-8")
    (folder / "mon.word.dev.tsv").write_text("\n".join(words[:3]) + "\n", encoding="utf-8")
    source, gold_file = (
        f"goldwords:{folder / 'mon.word.train.tsv'}",
        str(folder / "mon.word.dev.tsv"),
    )
    corpus = load_corpus(DataConfig(corpus=source, min_char_count=1))
    with start_run({"x": 1}, "exp", "new") as new:
        log_data(corpus, gold_file, load_gold(gold_file))
    with start_run({"x": 1}, "exp", "old") as old:  # tagged as segrl did before the labels
        set_tags({"segrl.corpus": "wordfreq:en", "segrl.gold": gold_file})
    with start_run({"x": 1}, "exp", "no data") as bare:
        pass
    client = MlflowClient(tracking_uri())
    tags = client.get_run(new.info.run_id).data.tags
    assert (tags["segrl.corpus"], tags["segrl.gold"]) == (source, gold_file)
    assert tags["segrl.corpus_label"] == "goldwords:mon.word.train.tsv"
    assert tags["segrl.gold_label"] == "mon.word.dev.tsv"
    assert tags["segrl.data"] == "goldwords:mon.word.train.tsv | mon.word.dev.tsv | all 3 words"
    assert "segrl.data" not in client.get_run(old.info.run_id).data.tags
    runs_table_url("http://127.0.0.1:5000", "exp")
    tags = client.get_run(old.info.run_id).data.tags
    assert tags["segrl.data"] == "wordfreq:en | mon.word.dev.tsv | (none)"  # no coverage tag then
    assert tags["segrl.corpus_label"] == "wordfreq:en" and tags["segrl.corpus"] == "wordfreq:en"
    assert "segrl.data" not in client.get_run(bare.info.run_id).data.tags  # not a segmenter's


def test_segrl_s_mlflow_app_serves_the_page_that_opens_the_view(mlflow_store):
    """The page segrl's MLflow app adds to MLflow's server (its Flask app, as gunicorn runs it):
    it keeps segrl's view of the experiment's runs in the browser, then opens the runs table."""
    app = create_app().test_client()
    page = app.get("/segrl/runs/7")
    assert page.status_code == 200 and page.mimetype == "text/html"
    text = page.get_data(as_text=True)
    settings = json.loads(text.split("const s = ", 1)[1].split(";\n", 1)[0])
    key, table = settings["view"]
    assert key == 'MLflowLocalStorage-1.1-ExperimentPage-["7"]-ReactComponentState'
    assert table["selectedColumns"] == runs_view()["selectedColumns"]
    assert table["groupBy"] == runs_view()["groupBy"] and "orderByKey" not in table
    assert settings["next"] == (
        "/#/experiments/7/runs?workflowType=machine_learning"
        "&orderByKey=metrics.%60boundary_f1%60&orderByAsc=false"
    )
    assert settings["defaults"]["mlflow.workflowType_v1"] == "machine_learning"
    assert app.get("/segrl/runs/7%3Cscript%3E").status_code == 404
    assert app.get("/health").status_code == 200  # MLflow's own routes stay
    with pytest.raises(ValueError, match="not an experiment ID"):
        view_page("1'; alert(1)")


@pytest.mark.slow
@pytest.mark.skipif(
    not app_installed(), reason="segrl's MLflow app is not installed (pip install -e . again)"
)
def test_segrl_ui_opens_the_view_in_a_browser(mlflow_store):
    """``segrl ui --experiment`` links its page of segrl's MLflow app for that experiment (a
    bench's, not the default one beside it); in Chromium the runs table then shows the corpus and
    gold columns, grouped by their labels (given to a run tagged before them), without a
    shared-view banner, on the classic pages."""
    with start_run({"x": 1}, "segrl", "a-default-run"):
        log_segmenter("unigram", "baseline", {"boundary_f1": 0.25})
    with start_run({"x": 1}, "segrl-bench", "a-run"):
        log_segmenter("unigram", "baseline", {"boundary_f1": 0.5})
        mlflow.set_tags(
            {
                "segrl.corpus": "wordfreq:en",
                "segrl.gold": "/long/path/to/sigmorphon2022/eng.word.dev.tsv",
                "segrl.gold_language": "eng",
                "segrl.gold_coverage": "all 2000 words",
            }
        )
    port = closed_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "segrl", "ui", "--port", str(port), "--experiment", "segrl-bench"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        link = process.stdout.readline().split("the segrl runs: ", 1)[1].strip()
        number = MlflowClient().get_experiment_by_name("segrl-bench").experiment_id
        assert number != MlflowClient().get_experiment_by_name("segrl").experiment_id
        assert link == f"{base}/segrl/runs/{number}"
        _wait_until_up(process, base)
        with urllib.request.urlopen(link) as r:
            assert "MLflowLocalStorage-1.1-ExperimentPage" in r.read().decode()
        browser = shutil.which("chromium") or shutil.which("google-chrome")
        if browser is None:
            pytest.skip("Chromium is not installed (apt-get install chromium)")
        dom = subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
             f"--user-data-dir={mlflow_store / 'browser'}", "--virtual-time-budget=30000", link],
            capture_output=True, text=True, timeout=180, check=True,
        ).stdout  # fmt: skip
        # the table draws the columns in sight: the corpus and gold set come first
        assert "Group: wordfreq:en | eng.word.dev.tsv | all 2000 words" in dom
        assert "viewing a shared view" not in dom
        assert "Model registry" in dom and "Agent versions" not in dom  # not the GenAI pages
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=60)


def test_a_nested_run_is_another_segmenter_of_the_job(mlflow_store, monkeypatch):
    tags = {
        "segrl.bench.system": "agent",
        "segrl.bench.cell": "en-agent-0",
        "segrl.bench.seed": "0",
    }
    monkeypatch.setenv(RUN_TAGS_VARIABLE, json.dumps(tags))
    with (
        start_run({"x": 1}, "exp", "student") as student,
        start_run({"x": 1}, "exp", "teacher", nested=True) as teacher,
    ):
        pass
    client = MlflowClient(tracking_uri())
    child = client.get_run(teacher.info.run_id).data.tags
    parent = client.get_run(student.info.run_id).data.tags
    assert child["mlflow.parentRunId"] == student.info.run_id
    assert child["segrl.bench.seed"] == "0" and "segrl.bench.system" not in child
    assert "segrl.bench.cell" not in child and parent["segrl.bench.system"] == "agent"
    with (
        pytest.raises(TrackingError, match="needs an active run"),
        start_run({"x": 1}, "exp", "alone", nested=True),
    ):
        pass


def _log_curve(name: str, values: dict[int, float]) -> str:
    # A client of the store segrl reads, not mlflow's process-wide active store and experiment,
    # which earlier tests may have pointed elsewhere.
    client = MlflowClient(tracking_uri())
    experiment = client.get_experiment_by_name("curves")
    experiment_id = experiment.experiment_id if experiment else client.create_experiment("curves")
    run = client.create_run(experiment_id, run_name=name)
    for step, value in values.items():
        client.log_metric(run.info.run_id, "eval/boundary_f1", value, step=step)
    client.set_terminated(run.info.run_id)
    return run.info.run_id


def test_curves_put_runs_side_by_side_by_step(mlflow_store, capsys):
    from segrl.cli import main

    _log_curve("collapse", {0: 0.26, 50: 0.10, 100: 0.0})
    _log_curve("marginal", {0: 0.5})  # an older run of the same name, not shown
    newest = _log_curve("marginal", {0: 0.26, 100: 0.47})
    assert (
        main(
            [
                "curves",
                "collapse",
                newest,
                "--metrics",
                "eval/boundary_f1,eval/missing",
                "--plot",
                "curves.png",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[1].split() == ["step", "collapse", newest]
    assert lines[3].split() == ["0", "0.260", "0.260"]
    assert lines[4].split() == ["50", "0.100", "-"]
    assert lines[5].split() == ["100", "0.000", "0.470"]
    assert "eval/missing: not logged by any of the runs" in out
    assert (mlflow_store / "curves.png").read_bytes()[:4] == b"\x89PNG"


def test_curves_every_keeps_the_last_step():
    from segrl.curves import curve_rows

    rows = curve_rows({"a": {"m": {0: 1.0, 10: 2.0, 15: 3.0}}}, "m", every=10)
    assert [r["step"] for r in rows] == [0, 10, 15]
    with pytest.raises(ValueError):
        curve_rows({}, "m", every=0)


def test_curves_of_an_unknown_run_is_a_clear_error(mlflow_store, capsys):
    from segrl.cli import EXIT_USER_ERROR, main

    _log_curve("collapse", {0: 0.26})
    assert main(["curves", "collapse", "no-such-run"]) == EXIT_USER_ERROR
    assert "no run named 'no-such-run'" in capsys.readouterr().err


def test_every_kind_of_segmenter_run_is_a_run_kind():
    from segrl.experiments.agent_train import AGENT_KIND
    from segrl.experiments.units_eval import UNITS_KIND
    from segrl.lm.decoding import LM_KIND
    from segrl.scoring import EVALUATED_KIND
    from segrl.tracking.tags import RUN_KINDS

    assert set(RUN_KINDS) == {"baseline", AGENT_KIND, EVALUATED_KIND, LM_KIND, UNITS_KIND}


def test_a_run_is_named_as_compare_names_its_segmenter_and_records_its_source(
    mlflow_store, small_corpus_file, capsys
):
    """One rule for every kind of run: its MLflow run name is the segmenter's name ``segrl compare``
    shows (not the run folder's, not a model version's number); MLflow's source tags name the
    command and segrl's commit; the logged model keeps the name ``runs:/RUN_ID/model`` finds."""
    from segrl.cli import main

    corpus = ["--corpus", str(small_corpus_file), "--gold-max-words", "100"]
    train = ["train", *corpus, "--evaluator", "gold", "--steps", "2", "--batch-size", "4"]
    assert main([*train, "--threads", "1", "--out", str(mlflow_store / "my-folder")]) == 0
    baseline = ["baseline", "--method", "characters", *corpus, "--min-char-count", "1"]
    assert main([*baseline, "--register", "chars"]) == 0
    assert main(["evaluate", "--model", "models:/chars/1", "--log"]) == 0
    capsys.readouterr()

    rows = {row["kind"]: row for row in segmenter_runs()}
    assert rows["agent"]["segmenter"] == "reinforce-bilstm-gold-per-action"
    assert rows["baseline"]["segmenter"] == "characters"
    assert rows["evaluated"]["segmenter"] == "chars-v1"  # models:/chars/1, not "1"
    for row in rows.values():
        assert row["run_name"] == row["segmenter"]
    assert main(["compare"]) == 0
    shown = capsys.readouterr().out
    assert all(row["segmenter"] in shown for row in rows.values())

    client = MlflowClient()
    commit = version_tags().get("segrl.git_commit", "").removesuffix("-dirty")
    for kind, command in [("agent", "train"), ("baseline", "baseline"), ("evaluated", "evaluate")]:
        tags = client.get_run(rows[kind]["run_id"]).data.tags
        assert tags["mlflow.source.name"] == f"segrl {command}"
        assert tags["mlflow.source.type"] == "LOCAL"
        assert tags.get("mlflow.source.git.commit", "") == commit
    if (Path(segrl.__file__).parents[1] / ".git").exists():  # this test runs from a checkout
        assert len(commit) == 40

    agent_run = rows["agent"]["run_id"]
    model = mlflow.pyfunc.load_model(f"runs:/{agent_run}/model")
    assert ["".join(s) for s in model.predict(["walked", "jumping"])] == ["walked", "jumping"]
    (logged,) = mlflow.search_logged_models(
        filter_string=f"source_run_id = '{agent_run}'", output_format="list"
    )
    assert logged.name == "model"  # MLflow finds runs:/RUN_ID/model by it (log_segmenter_model)
    assert logged.tags["segrl.segmenter"] == "reinforce-bilstm-gold-per-action"
    assert logged.tags["segrl.kind"] == "agent"
    # its page in the UI names the segmenter (the list of models shows its run, named the same)
    description = "segrl segmenter `reinforce-bilstm-gold-per-action` (agent)"
    assert logged.tags["mlflow.note.content"] == description


@pytest.mark.parametrize(
    ("model", "name"),
    [
        ("models:/english-morphs/12", "english-morphs-v12"),
        ("models:/english-morphs@champion", "english-morphs@champion"),
        ("models:/english-morphs/latest", "english-morphs-latest"),
        ("runs:/0123abcd/model", "0123abcd"),
        ("runs/slm/best/", "best"),
    ],
)
def test_a_scored_model_is_named_after_its_registered_name_and_version(model, name):
    from segrl.cli.segment import _model_name

    assert _model_name(model) == name


def test_ctrl_c_inside_a_run_ends_it_killed_and_an_error_failed(mlflow_store):
    """Ctrl-C while a run logs (``segrl baseline`` saving its model) ends the run KILLED, as the
    training jobs end theirs; any other error still ends it FAILED."""
    with pytest.raises(KeyboardInterrupt), start_run({"x": 1}, "exp") as stopped:
        raise KeyboardInterrupt
    with pytest.raises(ValueError), start_run({"x": 2}, "exp") as broken:
        raise ValueError("a bug")
    client = MlflowClient()
    assert client.get_run(stopped.info.run_id).info.status == "KILLED"
    assert client.get_run(broken.info.run_id).info.status == "FAILED"
    assert mlflow.active_run() is None
