"""``make ui-check``: the MLflow UI as a person sees it, in a real (headless) browser.

The store is yours where ``MLFLOW_TRACKING_URI`` is set; otherwise a fresh sample store with runs
on two corpora: three classic segmenters on the bundled corpus, Morfessor on ``wordfreq:en``, and a
short agent run. It serves the store with ``segrl ui`` (a tracking server is shot as it is) and
takes screenshots with headless Chromium (Debian's ``chromium`` package), in one new browser
profile: the runs table of the experiment as ``segrl ui`` links it, the comparison of the three
best runs on the corpus and gold set with the most runs, the best run's page and its
boundary-F1-by-length picture (its Artifacts tab; runs scored on a part of their gold set left out),
and the experiment's logged models. Prints where they are.

    python tools/ui_check.py --out docs/img
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

from segrl.tracking.store import DEFAULT_EXPERIMENT, absolute_tracking_uri
from segrl.tracking.ui import runs_table_url, scored_on_part, view_group

PICTURE = "boundary_f1_by_length.png"
WINDOW = "1600,900"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="ui-check", help="folder for the screenshots")
    parser.add_argument("--max-sentences", default="600", help="corpus size of the sample runs")
    parser.add_argument("--experiment", default=DEFAULT_EXPERIMENT, help="the experiment shot")
    args = parser.parse_args()
    browser = next(
        (
            found
            for name in ("chromium", "chromium-browser", "google-chrome")
            if (found := shutil.which(name))
        ),
        None,
    )
    if browser is None:
        print("ui-check: no Chromium found; install it (apt-get install chromium)", file=sys.stderr)
        return 2
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    users = absolute_tracking_uri() if os.environ.get("MLFLOW_TRACKING_URI", "").strip() else ""
    with tempfile.TemporaryDirectory(prefix="segrl-ui-check-") as tmp:
        env = {**os.environ, "MLFLOW_TRACKING_URI": users or f"sqlite:///{tmp}/mlflow.db"}
        if users:
            print(f"ui-check: your store {users}, experiment '{args.experiment}'")
        else:
            _log_sample_runs(tmp, env, args.max_sentences, args.experiment)
        uri = env["MLFLOW_TRACKING_URI"]
        ui = None
        if uri.startswith(("http://", "https://")):
            base = uri.rstrip("/")
            runs_url = runs_table_url(base, args.experiment, uri)
        else:
            port = _free_port()
            ui = subprocess.Popen(
                [sys.executable, "-m", "segrl", "ui", "--port", str(port), "--experiment",
                 args.experiment],
                cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                start_new_session=True,
            )  # fmt: skip
            base = f"http://127.0.0.1:{port}"
            runs_url = _runs_url(ui)
        try:
            _wait_for(f"{base}/health")
            shots = {"runs-table.png": runs_url, **_run_pages(base, uri, args.experiment)}
            profile = Path(tmp) / "browser"  # one person: the runs table is opened first
            for name, url in shots.items():
                subprocess.run(
                    [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                     f"--user-data-dir={profile}", f"--window-size={WINDOW}",
                     "--virtual-time-budget=20000", f"--screenshot={out / name}", url],
                    check=True, capture_output=True, timeout=180,
                )  # fmt: skip
                print(f"{out / name}: {url}")
        finally:
            if ui is not None:
                ui.send_signal(signal.SIGTERM)
                ui.wait(timeout=60)
    return 0


def _log_sample_runs(folder: str, env: dict[str, str], max_sentences: str, experiment: str) -> None:
    """Runs on two corpora: classic segmenters on the bundled one and on ``wordfreq:en``, and a
    few updates of an agent (its picture and metrics, not a result)."""
    segrl = [sys.executable, "-m", "segrl"]
    common = ["--experiment", experiment]
    commands = [
        *(
            ["baseline", "--method", method, "--max-sentences", max_sentences]
            for method in ("characters", "words", "morfessor")
        ),
        ["baseline", "--method", "morfessor", "--corpus", "wordfreq:en", "--max-words", "3000"],
        ["train", "--steps", "5", "--eval-every", "5", "--threads", "1",
         "--max-sentences", max_sentences],
    ]  # fmt: skip
    for command in commands:
        print(f"ui-check: segrl {' '.join(command)}", flush=True)
        subprocess.run(
            [*segrl, *command, *common], cwd=folder, env=env, check=True, stdout=subprocess.DEVNULL
        )


def _run_pages(base: str, uri: str, experiment: str) -> dict[str, str]:
    """The comparison of the three best runs of the view's largest group (corpus, gold set and the
    part of it scored), the best run's page and its picture; runs scored on a part of their gold set
    (a predictions file's words) are left out, as ``segrl compare`` tabulates them apart. And the
    experiment's logged models (each named ``model``, beside its run)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    found = client.get_experiment_by_name(experiment)
    if found is None:
        raise SystemExit(f"ui-check: no experiment '{experiment}' in {uri}")
    runs = client.search_runs(
        [found.experiment_id], order_by=["metrics.boundary_f1 DESC"], max_results=20
    )
    runs = [r for r in runs if "boundary_f1" in r.data.metrics and not scored_on_part(r)]
    if not runs:
        raise SystemExit(f"ui-check: no run of '{experiment}' has a boundary_f1 on all its gold")
    ids = [r.info.run_id for r in runs]
    groups: dict[str | None, list[str]] = {}  # the runs of each of the view's groups, best first
    for r in runs:
        groups.setdefault(view_group(r), []).append(r.info.run_id)
    largest = max(groups.values(), key=len)
    compare = "#/compare-runs?" + urllib.parse.urlencode(
        {"runs": json.dumps(largest[:3]), "experiments": json.dumps([found.experiment_id])}
    )
    best = next(
        (i for i in ids if PICTURE in {a.path for a in client.list_artifacts(i)}),
        ids[0],
    )
    run = f"#/experiments/{found.experiment_id}/runs/{best}"
    return {
        "compare-three-runs.png": f"{base}/{compare}",
        "run-page.png": f"{base}/{run}",
        "run-picture.png": f"{base}/{run}/artifacts/{PICTURE}",
        "models.png": f"{base}/#/experiments/{found.experiment_id}/models",
    }


def _runs_url(ui: subprocess.Popen) -> str:
    """The runs-table link ``segrl ui`` prints."""
    assert ui.stdout is not None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = ui.stdout.readline()
        if "the segrl runs: " in line:
            return line.split("the segrl runs: ", 1)[1].split()[0]
        if not line and ui.poll() is not None:
            break
    raise SystemExit("ui-check: segrl ui printed no link to the runs table")


def _wait_for(url: str, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"ui-check: {url} did not answer in {seconds:.0f} s")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    sys.exit(main())
