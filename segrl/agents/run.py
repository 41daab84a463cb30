"""The folder of one training run, which makes an interrupted run resumable.

A run folder holds ``config.toml`` (the full config), ``checkpoint.pt`` (the last checkpoint: models,
optimisers, step, sentence order, every RNG state), ``run.json`` (the MLflow run id, whether the run
finished) and, at the end, ``segmenter/`` (the trained segmenter). Running the same job again with the
same folder resumes from the checkpoint and keeps logging to the same MLflow run.

Without an explicit folder, a run goes to ``runs/<name>``: the first of ``runs/<name>``,
``runs/<name>-2``, ... that holds an unfinished run with the same config (resumed), else the first
free one. An explicit folder with a different config, or a finished run, is an error.
"""

from __future__ import annotations

import contextlib
import json
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from segrl.agents.config import RESUMABLE_CHANGES, TrainConfig
from segrl.checkpoint import load_checkpoint, save_checkpoint
from segrl.config import flatten_config, load_config, save_config
from segrl.errors import ConfigError

RUNS_ROOT = "runs"
CONFIG_FILE = "config.toml"
CHECKPOINT_FILE = "checkpoint.pt"
RUN_FILE = "run.json"
SEGMENTER_DIR = "segmenter"


class TrainingInterrupted(KeyboardInterrupt):
    """Training stopped at a step boundary on request (Ctrl-C); its checkpoint is saved."""


class RunDir:
    """One run's folder (see the module docstring)."""

    def __init__(self, path: Path):
        self.path = path

    # --- finding or creating the folder --------------------------------------------------------------
    @classmethod
    def open(cls, config: TrainConfig, root: str | Path = RUNS_ROOT) -> RunDir:
        """The run folder for ``config``: ``config.out``, or one under ``root`` (see module docs)."""
        if config.out:
            run = cls(Path(config.out))
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
            run.start(config)
            return run
        base = Path(root) / (config.tracking.run_name or config.name)
        for k in range(1, 10_000):
            run = cls(base if k == 1 else base.with_name(f"{base.name}-{k}"))
            if run.finished:
                continue
            if not run.has_checkpoint:  # new, or stopped before its first checkpoint
                run.start(config)
                return run
            if not run.config_differences(config):
                return run
        raise ConfigError(f"too many run folders named {base}-*; give --out")

    def start(self, config: TrainConfig) -> None:
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
    def segmenter_path(self) -> Path:
        return self.path / SEGMENTER_DIR

    @property
    def has_checkpoint(self) -> bool:
        return self.checkpoint_path.exists()

    @property
    def info(self) -> dict[str, Any]:
        try:
            return json.loads((self.path / RUN_FILE).read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError):
            return {}

    @property
    def finished(self) -> bool:
        return bool(self.info.get("finished"))

    def update_info(self, **values: Any) -> None:
        info = {**self.info, **values}
        tmp = self.path / f".{RUN_FILE}.tmp"
        tmp.write_text(json.dumps(info, indent=1), encoding="utf-8")
        tmp.replace(self.path / RUN_FILE)

    def config_differences(self, config: TrainConfig) -> list[str]:
        """``key: saved -> given`` for every option that differs and matters for resuming."""
        saved_file = self.path / CONFIG_FILE
        if not saved_file.exists():
            return [f"{saved_file} is missing"]
        try:
            saved = flatten_config(load_config(TrainConfig, saved_file))
        except ConfigError as e:
            return [str(e)]
        given = flatten_config(config)
        return [
            f"{key}: {saved.get(key)!r} -> {given.get(key)!r}"
            for key in sorted(set(saved) | set(given))
            if key not in RESUMABLE_CHANGES and saved.get(key) != given.get(key)
        ]

    def load(self) -> dict[str, Any] | None:
        """The last checkpoint (restoring every RNG state), or None for a fresh run."""
        return load_checkpoint(self.checkpoint_path) if self.has_checkpoint else None

    def save(self, **state: Any) -> None:
        save_checkpoint(self.checkpoint_path, **state)
        self.update_info(step=state.get("step"))


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
