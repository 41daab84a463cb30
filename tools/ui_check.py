"""``make ui-check``: the MLflow UI as a person sees it, in a real (headless) browser.

Logs three classic segmenters to a fresh store, serves it with ``segrl ui``, and takes screenshots
with headless Chromium (Debian's ``chromium`` package): the runs table of the ``segrl`` experiment
as ``segrl ui`` links it (boundary F1, precision, recall, units per character as columns, best
first), the comparison of the three runs, and one run's boundary-F1-by-length picture. Prints where
the screenshots are.

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

METHODS = ("characters", "words", "morfessor")
WINDOW = "1600,900"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="ui-check", help="folder for the screenshots")
    parser.add_argument("--max-sentences", default="600", help="corpus size of the three runs")
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
    with tempfile.TemporaryDirectory(prefix="segrl-ui-check-") as tmp:
        env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp}/mlflow.db"}
        segrl = [sys.executable, "-m", "segrl"]
        for method in METHODS:
            subprocess.run(
                [*segrl, "baseline", "--method", method, "--max-sentences", args.max_sentences],
                cwd=tmp, env=env, check=True, stdout=subprocess.DEVNULL,
            )  # fmt: skip
        port = _free_port()
        ui = subprocess.Popen(
            [*segrl, "ui", "--port", str(port)],
            cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            start_new_session=True,
        )  # fmt: skip
        try:
            runs_url = _runs_url(ui)
            base = f"http://127.0.0.1:{port}"
            _wait_for(f"{base}/health")
            experiment_id, run_ids = _runs(env["MLFLOW_TRACKING_URI"])
            compare = "#/compare-runs?" + urllib.parse.urlencode(
                {"runs": json.dumps(run_ids), "experiments": json.dumps([experiment_id])}
            )
            best = run_ids[0]
            picture = (
                f"#/experiments/{experiment_id}/runs/{best}/artifacts/boundary_f1_by_length.png"
            )
            shots = {
                "runs-table.png": runs_url,
                "compare-three-runs.png": f"{base}/{compare}",
                "run-picture.png": f"{base}/{picture}",
            }
            for name, url in shots.items():
                subprocess.run(
                    [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                     f"--window-size={WINDOW}", "--virtual-time-budget=20000",
                     f"--screenshot={out / name}", url],
                    check=True, capture_output=True, timeout=180,
                )  # fmt: skip
                print(f"{out / name}: {url}")
        finally:
            ui.send_signal(signal.SIGTERM)
            ui.wait(timeout=60)
    return 0


def _runs_url(ui: subprocess.Popen) -> str:
    """The runs-table link ``segrl ui`` prints."""
    assert ui.stdout is not None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = ui.stdout.readline()
        if "#/experiments/" in line:
            return next(word for word in line.split() if "#/experiments/" in word)
        if not line and ui.poll() is not None:
            break
    raise SystemExit("ui-check: segrl ui printed no link to the runs table")


def _runs(uri: str) -> tuple[str, list[str]]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("segrl")
    runs = client.search_runs(
        [experiment.experiment_id], order_by=["metrics.boundary_f1 DESC"], max_results=3
    )
    return experiment.experiment_id, [r.info.run_id for r in runs]


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
