"""Cells of a benchmark: one (language, system, seed) each, run as a segrl command in its own process.

A cell's command is the system's command line with the language's corpus, gold set and data options,
the seed, one CPU thread, the bench's MLflow experiment and a run folder of its own. It runs as a child
process (started in the user's working folder, which is kept off its import path:
``segrl.processes``) whose MLflow run becomes a child of the bench's parent run (``MLFLOW_RUN_ID``) with the cell's
tags (``SEGRL_RUN_TAGS``). When it succeeds its metrics are written to ``result.json`` in the cell's
folder; a re-run of the bench skips every cell that has one, and a cell that was interrupted starts its
command again with the same run folder, so a training command resumes from its checkpoint.

Each cell's process is a session of its own: a Ctrl-C at the terminal reaches the bench alone, which
stops its cells through ``CellProcesses`` (one SIGINT each, as a Ctrl-C of the cell's own command).
"""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import threading
from dataclasses import dataclass
from importlib import metadata, resources
from pathlib import Path

from segrl.benchmark.suite import Language, System
from segrl.data.corpus import BUNDLED_CORPUS
from segrl.data.gold import BUNDLED_GOLD
from segrl.data.segmented import is_segmented
from segrl.data.synthetic import GENERATOR_VERSION, is_synthetic
from segrl.metrics import POSTERIOR_PREFIX
from segrl.processes import python_command, python_environment

METRICS = (
    "boundary_precision",
    "boundary_recall",
    "boundary_f1",
    "bpr_f1",
    "morph_f1",
    "units_per_char",
)
"""What every cell scored against gold words reports (the names every segmenter logs, as in
``segrl compare``)."""
WORD_METRICS = (
    "word_precision",
    "word_recall",
    "word_f1",
    "word_boundary_f1",
    "lexicon_f1",
    "units_per_char",
)
"""What every cell of a language whose corpus is segmented (``segmented:PATH``: word discovery)
reports. With either set an ``slm``'s posterior decoding adds the same under ``POSTERIOR_PREFIX``."""
CELL_TAG = "segrl.bench.cell"
RESULT_FILE = "result.json"
LOG_FILE = "log.txt"


@dataclass(frozen=True)
class Cell:
    language: Language
    system: System
    seed: int

    @property
    def id(self) -> str:
        return f"{self.language.name}/{self.system.name}/seed-{self.seed}"

    @property
    def metrics(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The metrics this cell must report, and those it may (an ``slm``'s posterior decoding):
        word discovery's where the language's corpus is segmented, else the gold words'."""
        metrics = WORD_METRICS if is_segmented(self.language.corpus) else METRICS
        return metrics, tuple(f"{POSTERIOR_PREFIX}{m}" for m in metrics)

    def folder(self, root: Path) -> Path:
        return root / self.language.name / self.system.name / f"seed-{self.seed}"

    def argv(self, root: Path, experiment: str) -> list[str]:
        """The segrl command line of this cell (without the program)."""
        flags = self.system.flags
        args = list(self.system.command)
        if self.language.corpus is not None:
            args += ["--corpus", self.language.corpus]
        if self.language.gold is not None:
            args += ["--gold", self.language.gold]
        args += list(self.language.options)
        args += [flags["seed"], str(self.seed)]
        args += [
            "--experiment",
            experiment,
            "--run-name",
            f"{self.system.name}-{self.language.name}",
        ]
        if flags["out"]:
            args += [flags["out"], str(self.folder(root).resolve() / "run")]
        if flags["threads"]:
            args += [flags["threads"], "1"]
        return args


@dataclass(frozen=True)
class CellJob:
    """Everything a worker (a local thread or a Ray task) needs to run one cell."""

    cell: Cell
    root: str
    experiment: str
    parent_run_id: str
    tracking_uri: str
    cwd: str
    tags: dict[str, str]


class CellProcesses:
    """The processes of the cells a bench runs on this machine. Once ``stop`` is called no cell
    starts; each running one is sent SIGINT at every ``stop`` (the first stops a training command
    at a step boundary, checkpointed; a second at once)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: set[subprocess.Popen] = set()
        self.stopped = False

    def run(self, argv: list[str], **popen: object) -> int | None:
        """Run ``argv`` (in a session of its own) to its end: its exit code, or None where the
        bench was stopped before it could start."""
        with self._lock:
            if self.stopped:
                return None
            process = subprocess.Popen(argv, start_new_session=True, **popen)
            self._running.add(process)
        try:
            return process.wait()
        except BaseException:  # this worker interrupted (a cancelled Ray task): stop the cell
            process.send_signal(signal.SIGINT)
            process.wait()
            raise
        finally:
            with self._lock:
                self._running.discard(process)

    def stop(self) -> None:
        """Start no more cells, and send SIGINT to each running one."""
        with self._lock:
            self.stopped = True
            for process in self._running:
                process.send_signal(signal.SIGINT)


def run_cell(job: CellJob, processes: CellProcesses | None = None) -> dict:
    """Run one cell (unless its result is there already) and return its result: ``status``
    (``done``, ``skipped``, ``failed``, or ``stopped`` where ``processes`` was stopped before it
    started), the metrics, the run id, and the log file."""
    from segrl.tracking.queries import finished_run_with_tag
    from segrl.tracking.tags import RUN_TAGS_VARIABLE

    folder = job.cell.folder(Path(job.root))
    result_file = folder / RESULT_FILE
    if result_file.exists():
        result = json.loads(result_file.read_text(encoding="utf-8"))
        return {**result, "status": "skipped"}
    processes = processes or CellProcesses()
    argv = job.cell.argv(Path(job.root), job.experiment)
    log = folder / LOG_FILE
    base = {"cell": job.cell.id, "log": str(log), "command": "segrl " + " ".join(argv)}
    if processes.stopped:
        return {**base, "status": "stopped"}
    folder.mkdir(parents=True, exist_ok=True)
    env = {  # the working folder off the cells' import path: a segrl.py there does not run
        **python_environment(),
        "MLFLOW_TRACKING_URI": job.tracking_uri,
        "MLFLOW_RUN_ID": job.parent_run_id,
        RUN_TAGS_VARIABLE: json.dumps({**job.tags, CELL_TAG: job.cell.id}),
        "PYTHONUNBUFFERED": "1",
    }
    with log.open("w", encoding="utf-8") as out:
        out.write("segrl " + " ".join(argv) + "\n")
        out.flush()
        code = processes.run(
            python_command("-m", "segrl", *argv),
            cwd=job.cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    if code is None:  # stopped while its log was opened
        return {**base, "status": "stopped"}
    if code != 0:
        return {**base, "status": "failed", "returncode": code, "tail": _tail(log)}
    required, optional = job.cell.metrics
    found = finished_run_with_tag(
        job.parent_run_id, CELL_TAG, job.cell.id, required + optional, uri=job.tracking_uri
    )
    if found is None or not all(m in found for m in required):
        return {
            **base,
            "status": "failed",
            "returncode": code,
            "tail": "no finished run with metrics",
        }
    result = {**base, **found}
    tmp = result_file.with_name(f".{RESULT_FILE}.tmp")
    tmp.write_text(json.dumps(result, indent=2), encoding="utf-8")
    tmp.replace(result_file)
    return {**result, "status": "done"}


def _tail(log: Path, lines: int = 3) -> str:
    """The last non-empty lines of a cell's log (progress bars' carriage returns as new lines)."""
    text = log.read_text(encoding="utf-8", errors="replace").replace("\r", "\n")
    kept = [line.strip() for line in text.splitlines() if line.strip()]
    return " | ".join(kept[-lines:])


def source_hash(spec: str | None, kind: str) -> str:
    """A short hash of a corpus or gold source: the bytes of its file(s), the bundled file's, or, for
    ``wordfreq:LANG``, the name and wordfreq's version (its data ships with that version); for
    ``synthetic:SEED``, the spec and the generator's version."""
    h = hashlib.sha256()
    if spec is None:
        name = BUNDLED_CORPUS if kind == "corpus" else BUNDLED_GOLD
        h.update(resources.files("segrl.data").joinpath("bundled", name).read_bytes())
    elif is_synthetic(spec):  # made from its spec by the generator
        h.update(f"{spec}:{GENERATOR_VERSION}".encode())
    elif spec.startswith("wordfreq:"):
        try:
            h.update(f"{spec}:{metadata.version('wordfreq')}".encode())
        except metadata.PackageNotFoundError:  # not installed: the cell will say so
            h.update(spec.encode())
    else:
        path = Path(spec)
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in files:
            if file.exists():
                h.update(file.read_bytes())
    return h.hexdigest()[:16]
