"""The one training-job skeleton: every trainer (the agents, the unit models, ``segrl lm train``) keeps
its run in a run folder, resumes from it, stops on request, shows progress, keeps a work budget (and an
optional time limit), checkpoints at a fixed cadence and logs into one MLflow run.

A run folder holds ``config.toml`` (the full config), ``checkpoint.pt`` (the last checkpoint: models,
optimisers, step, data order, every RNG state), ``run.json`` (the MLflow run id, the step, whether the
run finished) and what the trainer saves at the end. Running the same command again with the same
``--out`` folder resumes from the checkpoint and keeps logging to the same MLflow run; a folder that
holds a finished run, or a checkpoint of another config, is refused, and so is a folder another
process is training into (held with ``segrl.files.lock_folder`` from ``open`` until the job ends).

A training loop reads::

    run = RunDir.open(config, config.out, default=Path("runs") / name, ignore=RESUMABLE)
    state = run.load()                                   # None on a fresh run
    with Job(run, config, steps, experiment, run_name, ...) as job:
        while step < steps:
            ...one update...
            step += 1
            if job.end_step(step, stats, save):          # checkpoint cadence, Ctrl-C, time limit
                break
"""

from __future__ import annotations

import contextlib
import json
import signal
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path
from typing import Any

from tqdm import tqdm

from segrl import tracking
from segrl.checkpoint import load_checkpoint, save_checkpoint
from segrl.config import flatten_config, load_config, save_config
from segrl.errors import ConfigError, ModelError
from segrl.files import check_writable_folder, lock_folder, unlock_folder

RUNS_ROOT = "runs"
CONFIG_FILE = "config.toml"
CHECKPOINT_FILE = "checkpoint.pt"
RUN_FILE = "run.json"


class TrainingInterrupted(KeyboardInterrupt):
    """Training stopped at a step boundary on request (Ctrl-C); its checkpoint is saved."""


class RunDir:
    """One run's folder (see the module docstring)."""

    def __init__(self, path: Path, ignore: Collection[str] = ()):
        self.path = Path(path)
        self.ignore = frozenset(ignore)
        """Dotted config keys that may change between a run and its resumption (budgets, cadences);
        a key ending in ``.`` stands for every key it starts (``"eval."``)."""

    # --- finding or creating the folder --------------------------------------------------------------
    @classmethod
    def open(
        cls,
        config: Any,
        out: str | Path | None,
        default: str | Path,
        ignore: Collection[str] = (),
    ) -> RunDir:
        """The run folder for ``config``: ``out`` (resumed when it holds an unfinished run of the
        same config), else the first of ``default``, ``default-2``, ... that holds an unfinished run
        with the same config (resumed), or the first free one."""
        if out:
            check_writable_folder(out, "--out")
            run = cls(Path(out), ignore)
            if run.finished:
                raise ConfigError(
                    f"{run.path} holds a finished run (step {run.info.get('step')}); give another "
                    "--out folder to train again"
                )
            if run.has_checkpoint:
                differences = run.config_differences(config)
                if differences:
                    raise ConfigError(
                        f"{run.path} holds an unfinished run with a different config "
                        f"({'; '.join(differences[:5])}); run with the same options to resume it, "
                        "or give another --out folder"
                    )
            holder = lock_folder(run.path)
            if holder is not None:
                raise ConfigError(
                    f"{run.path} is in use: process {holder or '(starting)'} is training into it; "
                    "wait for it to end (then the same command resumes), or give another --out folder"
                )
            run.start(config)
            return run
        base = Path(default)
        check_writable_folder(base, "--out")
        for k in range(1, 10_000):
            run = cls(base if k == 1 else base.with_name(f"{base.name}-{k}"), ignore)
            if run.finished or (run.has_checkpoint and run.config_differences(config)):
                continue
            if lock_folder(run.path) is not None:  # another process is training into it
                continue
            run.start(config)  # new, stopped before its first checkpoint, or resumed
            return run
        raise ConfigError(f"too many run folders named {base}-*; give --out")

    def start(self, config: Any) -> None:
        """Create the folder; a run with no checkpoint yet (re)starts with ``config``."""
        self.path.mkdir(parents=True, exist_ok=True)
        if not self.has_checkpoint:
            (self.path / RUN_FILE).unlink(missing_ok=True)
            save_config(config, self.path / CONFIG_FILE)

    # --- state ---------------------------------------------------------------------------------------
    @property
    def checkpoint_path(self) -> Path:
        return self.path / CHECKPOINT_FILE

    @property
    def has_checkpoint(self) -> bool:
        return self.checkpoint_path.exists()

    @property
    def info(self) -> dict[str, Any]:
        try:
            return json.loads((self.path / RUN_FILE).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            return {}

    @property
    def finished(self) -> bool:
        return bool(self.info.get("finished"))

    def update_info(self, **values: Any) -> None:
        info = {**self.info, **values}
        tmp = self.path / f".{RUN_FILE}.tmp"
        tmp.write_text(json.dumps(info, indent=1), encoding="utf-8")
        tmp.replace(self.path / RUN_FILE)

    def config_differences(self, config: Any) -> list[str]:
        """``key: saved -> given`` for every option that differs and matters for resuming."""
        saved_file = self.path / CONFIG_FILE
        if not saved_file.exists():
            return [f"{saved_file} is missing"]
        try:
            saved = flatten_config(load_config(type(config), saved_file))
        except ConfigError as e:
            return [str(e)]
        given = flatten_config(config)
        return [
            f"{key}: {saved.get(key)!r} -> {given.get(key)!r}"
            for key in sorted(set(saved) | set(given))
            if not self._ignored(key) and saved.get(key) != given.get(key)
        ]

    def _ignored(self, key: str) -> bool:
        return key in self.ignore or any(
            prefix.endswith(".") and key.startswith(prefix) for prefix in self.ignore
        )

    def load(self, map_location: Any = None) -> dict[str, Any] | None:
        """The last checkpoint (restoring every RNG state), or None for a fresh run."""
        if not self.has_checkpoint:
            return None
        return load_checkpoint(self.checkpoint_path, map_location=map_location)

    def save(self, **state: Any) -> None:
        """Write the checkpoint (atomically); a folder that became unwritable is a ``ModelError``
        naming the file and the last good checkpoint, which is left intact."""
        try:
            save_checkpoint(self.checkpoint_path, **state)
            self.update_info(step=state.get("step"))
        except OSError as e:
            last = self.info.get("step")
            kept = f"the last good checkpoint (step {last}) is intact" if last else "none was saved"
            raise ModelError(
                f"{self.checkpoint_path}: cannot write the checkpoint of step {state.get('step')} "
                f"({e.strerror}); {kept}. Make {self.path} writable and run again to resume."
            ) from None

    def finish(self, **values: Any) -> None:
        """Mark the run finished (a re-run with this folder is refused) and drop its checkpoint."""
        self.update_info(finished=True, **values)
        self.checkpoint_path.unlink(missing_ok=True)


@contextlib.contextmanager
def stop_requests() -> Iterator[threading.Event]:
    """An event set by the first Ctrl-C (SIGINT), so a training loop can stop at a step boundary and
    checkpoint; a second Ctrl-C interrupts at once. Outside the main thread, never set."""
    requested = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield requested
        return

    def handler(signum, frame):
        if requested.is_set():
            raise KeyboardInterrupt
        requested.set()

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield requested
    finally:
        signal.signal(signal.SIGINT, previous)


class Job:
    """A training job's MLflow run, stop requests, progress bar, checkpoint cadence and limits.

    Entering it starts the MLflow run, or continues the one ``run.json`` names when ``resumed_from``
    is a step; a run interrupted by Ctrl-C ends as KILLED in MLflow. ``end_step`` is what every loop
    calls after an update.

    Args:
        run: the run folder.
        config: the job's config (logged as parameters on a fresh run).
        steps: the work budget (updates); ``initial`` of the progress bar is ``resumed_from``.
        checkpoint_every: checkpoint after every this many steps (and at the last one).
        max_minutes: an optional time limit for this session; checkpointed when it is reached.
        on_step: ``on_step(step, stats) -> bool``; True stops as a Ctrl-C does.
    """

    def __init__(
        self,
        run: RunDir,
        config: Any,
        *,
        steps: int,
        experiment: str,
        run_name: str,
        tags: Mapping[str, str] | None = None,
        resumed_from: int | None = None,
        checkpoint_every: int = 100,
        max_minutes: float | None = None,
        on_step: Callable[[int, dict[str, float]], bool] | None = None,
        desc: str = "training",
    ):
        self.run = run
        self.config = config
        self.steps = steps
        self.experiment = experiment
        self.run_name = run_name
        self.tags = dict(tags or {})
        self.resumed_from = resumed_from
        self.checkpoint_every = checkpoint_every
        self.max_minutes = max_minutes
        self.on_step = on_step
        self.desc = desc
        self.stop = threading.Event()
        self.progress: tqdm | None = None
        self._stack = contextlib.ExitStack()
        self._started = 0.0

    @property
    def session_seconds(self) -> float:
        """Seconds since this session's training started (``__enter__``)."""
        return time.perf_counter() - self._started

    def __enter__(self) -> Job:
        resume_id = self.run.info.get("mlflow_run_id") if self.resumed_from is not None else None
        if self.resumed_from is not None and resume_id is None:
            print(
                f"warning: {self.run.path / RUN_FILE} names no MLflow run; the resumed run logs "
                "into a new MLflow run",
                flush=True,
            )
        self._stack.enter_context(
            tracking.start_run(self.config, self.experiment, self.run_name, self.tags, resume_id)
        )
        if resume_id is not None:
            self._stack.enter_context(tracking.resuming(resume_id))
        self.stop = self._stack.enter_context(stop_requests())
        self.run.update_info(mlflow_run_id=tracking.active_run_id())
        self._started = time.perf_counter()
        return self

    def start_progress(self, initial: int = 0) -> tqdm:
        """The progress bar over the job's steps (started when the loop starts)."""
        self.progress = tqdm(
            total=self.steps, initial=initial, desc=self.desc, unit="step", leave=False
        )
        return self.progress

    def end_step(self, step: int, stats: dict[str, float], save: Callable[[], None]) -> bool:
        """After update ``step``: checkpoint where due; on a stop request (Ctrl-C, or ``on_step``
        returning True) checkpoint and raise ``TrainingInterrupted``; True once the time limit is
        reached (checkpointed)."""
        stopping = self.stop.is_set() or (self.on_step is not None and self.on_step(step, stats))
        if step % self.checkpoint_every == 0 or step == self.steps or stopping:
            save()
        if stopping:
            self.close_progress()
            raise TrainingInterrupted(f"stopped at step {step}; run again to resume")
        if self.max_minutes is not None and self.session_seconds > 60 * self.max_minutes:
            save()
            return True
        return False

    def close_progress(self) -> None:
        if self.progress is not None:
            self.progress.close()
            self.progress = None

    def __exit__(self, exc_type, exc, tb) -> bool:
        self.close_progress()
        unlock_folder(self.run.path)
        if exc_type is not None and issubclass(exc_type, KeyboardInterrupt):
            tracking.end_run_killed()
        self._stack.__exit__(exc_type, exc, tb)
        return False
