"""The one training-job skeleton: every trainer (the agents, the unit models, ``segrl lm train``) keeps
its run in a run folder, resumes from it, stops on request, shows progress, keeps a work budget of
steps (and an optional time limit), logs, evaluates and checkpoints at cadences given once, logs into
one MLflow run, and ends the same way.

A job resolves its config once, where it starts: every option left unset (None) is given the value
the job then knows it has (the corpus by its name, the device, the threads, the run folder, a
budget; ``NO_LIMIT`` where an option sets no limit), by one pure function per job
(``resolve_train_config``, ``resolve_lm_train_config``, ``resolve_units_config``) that ``RunDir.open``
calls with the run folder it chooses (``JobStart`` holds the rest of what the job knows). The job
trains with the resolved config, and logs it.

A run folder holds ``config.toml`` (the resolved config: every option with its value),
``requested.toml`` (the config as it was asked for, options left unset listed as such),
``checkpoint.pt`` (the last checkpoint: models, optimisers, step, data order, every RNG state),
``run.json`` (the MLflow run id, the step, whether the run finished, with which budget and metrics)
and what the trainer saves at the end. A job writes only into a new or empty folder or a run
folder (one that holds ``run.json``, ``checkpoint.pt`` or ``requested.toml``): an ``--out`` of
other files is refused before anything is written (the trainer's saved model would replace a
subfolder of the user's). Running the same command again with the same ``--out`` folder resumes
from the checkpoint and keeps logging to the same MLflow run; a folder that holds a finished run
is refused (unless the run kept its checkpoint and a larger budget is asked for: it
continues), as is a checkpoint of another config (the resolved configs are compared: a folder
written before configs were resolved has its saved config resolved the same way), and so is a
folder another process is training into (held with ``segrl.files.lock_folder`` from ``open`` until
the job ends).

A trainer builds its models and what it trains (a ``Trainable``: its checkpoint's part, its
evaluation, its end), then reads::

    run = RunDir.open(config, config.out, default=Path(RUNS_ROOT) / "name", ignore=RESUMABLE)
    cadence = Cadence(steps, log_every=10, eval_every=100, checkpoint_every=50)
    job = Job(run, trainable, cadence)          # experiment and run name: run.config.tracking
    with job:                                   # restores the checkpoint, if any; starts MLflow
        for step in job.loop():                 # from the resumed step + 1 to ``steps``
            stats = update()                    # the trainer's update: {"loss": ...}
            job.end_step(step, stats)           # log, evaluate, checkpoint where due; stop
        result = job.finish()                   # trainable.finish(job); run marked finished

``segrl.agents.sb3`` has no loop of its own: SB3's ``learn`` runs it, and callbacks call
``end_step`` after each PPO iteration.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import signal
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import torch
from tqdm import tqdm

from segrl.checkpoint import first_line, load_checkpoint, pickled_objects, save_checkpoint
from segrl.config import (
    NO_LIMIT,
    flatten_config,
    limit,
    load_config,
    save_config,
    unset_options,
)
from segrl.data import Corpus
from segrl.data.gold import BUNDLED_GOLD_SOURCE
from segrl.errors import ConfigError, Interrupted, ModelError, SegrlError, WriteError
from segrl.files import (
    LOCK_FILE,
    STANDARD_OUTPUT,
    check_own_folder,
    check_writable_folder,
    foreign_files,
    lock_folder,
    naming,
    unlock_folder,
    write_failure,
    write_remedy,
)
from segrl.processes import STOP_SIGNALS, handling
from segrl.runtime import resolve_device
from segrl.tracking.runs import (
    active_artifact_folder,
    active_run_id,
    end_run_killed,
    log_metrics,
    resuming,
    start_run,
)
from segrl.tracking.store import store_write_failure

C = TypeVar("C")
RUNS_ROOT = "runs"
CONFIG_FILE = "config.toml"
REQUESTED_FILE = "requested.toml"
"""Beside ``config.toml``: the config as it was asked for (``RunDir.open``)."""
CHECKPOINT_FILE = "checkpoint.pt"
RUN_FILE = "run.json"
RUN_STATE_FILES = frozenset({RUN_FILE, CHECKPOINT_FILE, REQUESTED_FILE})
"""The files that tell a run folder: a folder holding one of them is a run's (resumed, or refused
as finished or of another config); a job writes into no existing folder of other files."""


def outermost_missing(path: Path) -> Path | None:
    """The outermost of ``path`` and its parents that does not exist yet; None if ``path`` does."""
    missing = [p for p in (path, *path.parents) if not p.exists()]
    return missing[-1] if missing else None


@dataclass(frozen=True)
class JobStart:
    """What a job knows where it starts, besides its config: what the options its config leaves
    unset resolve from (each job's ``resolve_*_config``; ``RunDir.open`` adds the run folder)."""

    corpus: str
    """The corpus's source (``Corpus.settings["source"]``; the bundled one: ``bundled:...``)."""
    corpus_kind: str
    """``words`` (a word list) or ``text`` (running text)."""
    spaces_are_gold: bool
    """A segmented corpus (``segmented:PATH``): its spaces are the gold (word discovery)."""
    texts: int
    """Training texts an epoch (the LM's texts, the agent's episodes): budgets in updates."""
    device: str
    """Where the job trains (``auto`` resolved: ``cpu``, ``cuda``)."""
    threads: int
    """PyTorch's CPU threads where the job starts."""
    run_dir: str = ""
    """The run folder (``RunDir.open`` gives it: ``at``)."""

    @classmethod
    def of(cls, corpus: Corpus, device: str, texts: int) -> JobStart:
        """What a job on ``corpus`` knows before its run folder: ``device`` resolved (a
        ``ConfigError`` where it is not there), PyTorch's threads now, ``texts`` an epoch."""
        return cls(
            corpus=str(corpus.settings.get("source")),
            corpus_kind=corpus.kind,
            spaces_are_gold=corpus.gold_from_spaces,
            texts=texts,
            device=str(resolve_device(device)),
            threads=torch.get_num_threads(),
        )

    def at(self, run_dir: str | Path) -> JobStart:
        """This start with the run folder ``run_dir``."""
        return dataclasses.replace(self, run_dir=str(run_dir))


def resolve_job_tables(config: C, start: JobStart, run_name: str) -> C:
    """``config`` with what every job's config has resolved (a copy; ``config`` is not changed):
    ``out`` (the run folder), ``data`` (the corpus by its name; ``NO_LIMIT`` for no limit),
    ``gold`` (the bundled set by its name, ``BUNDLED_GOLD_SOURCE``; "" where the corpus's spaces are
    the gold; ``NO_LIMIT``) and ``tracking`` (``run_name`` unless one is given; "": not
    registered)."""
    data, gold, tracking = config.data, config.gold, config.tracking
    bundled_gold = "" if start.spaces_are_gold else BUNDLED_GOLD_SOURCE
    return dataclasses.replace(
        config,
        out=config.out or start.run_dir,
        data=dataclasses.replace(
            data,
            corpus=data.corpus or start.corpus,  # "" too names the bundled corpus
            max_words=_or_no_limit(data.max_words),
            max_sentences=_or_no_limit(data.max_sentences),
        ),
        gold=dataclasses.replace(
            gold, path=gold.path or bundled_gold, max_words=_or_no_limit(gold.max_words)
        ),
        tracking=dataclasses.replace(
            tracking,
            run_name=tracking.run_name or run_name,
            register=tracking.register or "",
        ),
    )


def _or_no_limit(value: int | None) -> int:
    return NO_LIMIT if value is None else value


@dataclass(frozen=True)
class Cadence:
    """A job's budget and the cadences of its loop, given once (``Job``)."""

    steps: int
    """The work budget (updates)."""
    log_every: int = 1
    """Log the means of the stats of the steps since the last log every this many steps and at the
    last one."""
    eval_every: int | None = None
    """Evaluate (``Trainable.evaluate``) every this many steps before the last (the end's evaluation
    follows the last step); None: never."""
    checkpoint_every: int = 100
    """Checkpoint after every this many steps, at the last one, and on a stop."""
    max_minutes: float | None = None
    """An optional time limit for this session (None or ``NO_LIMIT``: none): the loop ends
    (checkpointed) when it is reached, and the run ends as it would at its budget."""
    metric_step: int = 1
    """MLflow steps per job step (SB3 logs at decisions taken)."""


class Trainable(Protocol):
    """What a job trains, as the job sees it: its part of a checkpoint, its periodic evaluation and
    its end. The update itself is the body of the trainer's ``for step in job.loop()``."""

    label: str
    """The progress bar's label (the segmenter's or the model's name)."""
    shown: Collection[str]
    """Keys of the logged means or evaluation metrics shown beside the progress bar."""

    def state_dict(self) -> dict[str, Any]:
        """The trainer's part of a checkpoint (models, optimisers, data order); the job adds the
        step and the training seconds."""
        ...

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """A checkpoint's state into the freshly built trainer."""
        ...

    def evaluate(self, step: int, job: Job) -> Mapping[str, float]:
        """The periodic evaluation at MLflow step ``step`` (logged by it); ``job`` for what it may
        end (``Job.finish_early``)."""
        ...

    def finish(self, job: Job) -> dict[str, float]:
        """The end: the final evaluation and the saved model (logged by it), at ``job.step``."""
        ...


@dataclass
class TrainResult:
    """What a finished training job leaves: its final metrics and where everything is."""

    metrics: dict[str, float]
    run_dir: Path
    """The run folder (the trained model is saved in it)."""
    run_id: str
    """The MLflow run's id."""
    step: int
    """The last step made."""
    resumed_from: int | None
    """The checkpoint step training resumed from (None for a fresh run)."""


class TrainingInterrupted(Interrupted):
    """Training stopped at a step boundary on request (Ctrl-C, SIGTERM: ``signum``); its checkpoint
    is saved."""


class RunDir:
    """One run's folder (see the module docstring)."""

    def __init__(self, path: Path, ignore: Collection[str] = ()):
        self.path = Path(path)
        self.created: Path | None = None
        """The outermost folder that opening the run made (``discard_unstarted`` removes up to it)."""
        self.ignore = frozenset(ignore)
        """Dotted config keys that may change between a run and its resumption (budgets, cadences);
        a key ending in ``.`` stands for every key it starts (``"eval."``)."""
        self.config: Any = None
        """The config the job trains with: resolved where ``open`` was given a resolver."""
        self.requested: Any = None
        """The config as it was asked for, where ``open`` resolved it (else None)."""

    # --- finding or creating the folder --------------------------------------------------------------
    @classmethod
    def open(
        cls,
        config: Any,
        out: str | Path | None,
        default: str | Path,
        ignore: Collection[str] = (),
        steps: int | None = None,
        resolve: Callable[[Any, Path], Any] | None = None,
    ) -> RunDir:
        """The run folder for ``config``: ``out`` (resumed when it holds an unfinished run of the
        same config, or a finished one that kept its checkpoint and ``steps``, the budget, is now
        larger), else the first of ``default``, ``default-2``, ... that holds an unfinished run
        with the same config (resumed), or the first free one. An ``out`` that holds files but
        none of ``RUN_STATE_FILES`` (the user's) is refused, and such a default is passed over.

        ``resolve(config, folder)``: the job's config resolved for a run in ``folder`` (every option
        a value; pure): the folder's ``config`` then, the one compared with a saved run's (resolved
        the same way: a folder written before configs were resolved saved options unset) and saved
        as ``config.toml``, with ``config`` as asked beside it (``REQUESTED_FILE``)."""

        def at(path: Path) -> RunDir:
            run = cls(path, ignore)
            run.config = config
            if resolve is not None:
                run.config, run.requested = resolve(config, run.path), config
                unset = unset_options(run.config)
                if unset:
                    raise ConfigError(f"the resolved config left {', '.join(unset)} unset (None)")
            return run

        if out:
            check_own_folder(out, "--out", RUN_STATE_FILES, "the run folder of a run to resume")
            run = at(Path(out))
            if run.has_checkpoint:
                differences = run.config_differences(run.config, resolve)
                if differences:
                    raise ConfigError(
                        f"{run.path} holds a run with a different config "
                        f"({'; '.join(differences[:5])}); run with the same options to resume it, "
                        "or give another --out folder"
                    )
            if run.finished and not run.extends(steps):
                raise ConfigError(
                    f"{run.path} holds a finished run (step {run.info.get('step')}); give another "
                    "--out folder to train again"
                )
            holder = run.hold()
            if holder is not None:
                raise ConfigError(
                    f"{run.path} is in use: process {holder or '(starting)'} is training into it; "
                    "wait for it to end (then the same command resumes), or give another --out folder"
                )
            run.start()
            return run
        base = Path(default)
        check_writable_folder(base, "--out")
        for k in range(1, 10_000):
            run = at(base if k == 1 else base.with_name(f"{base.name}-{k}"))
            if foreign_files(run.path, RUN_STATE_FILES):  # a folder of the user's, not a run's
                continue
            if run.finished or (run.has_checkpoint and run.config_differences(run.config, resolve)):
                continue
            if run.hold() is not None:  # another process is training into it
                continue
            run.start()  # new, stopped before its first checkpoint, or resumed
            return run
        raise ConfigError(f"too many run folders named {base}-*; give --out")

    def hold(self) -> int | None:
        """Hold the folder for this process (``segrl.files.lock_folder``, which makes it), noting
        what it made; the id of the process that holds it instead, or None."""
        self.created = outermost_missing(self.path)
        return lock_folder(self.path)

    def start(self) -> None:
        """Create the folder; a run with no checkpoint yet (re)starts with ``config`` (saved; and
        ``requested`` beside it, where there is one)."""
        self.path.mkdir(parents=True, exist_ok=True)
        if not self.has_checkpoint:
            (self.path / RUN_FILE).unlink(missing_ok=True)
            save_config(self.config, self.path / CONFIG_FILE)
            if self.requested is not None:
                save_config(self.requested, self.path / REQUESTED_FILE)

    @contextlib.contextmanager
    def preparing(self) -> Iterator[None]:
        """Around what a job does between ``open`` and its ``Job`` (building the models from the
        resolved config): where that fails, the folder is let go of and a run that never began
        undone (``discard_unstarted``), as where its MLflow run cannot start."""
        try:
            yield
        except BaseException:
            unlock_folder(self.path)
            self.discard_unstarted()
            raise

    def discard_unstarted(self) -> None:
        """Undo ``start`` for a run that never began (no checkpoint, no MLflow run): its
        ``config.toml``, ``requested.toml`` and ``run.json`` go, and the folder too where nothing
        else is left in it."""
        if self.has_checkpoint:
            return
        for name in (CONFIG_FILE, REQUESTED_FILE, RUN_FILE, LOCK_FILE):
            (self.path / name).unlink(missing_ok=True)
        for folder in (self.path, *self.path.parents) if self.created else ():
            with contextlib.suppress(OSError):  # not empty: files of the user's, kept
                folder.rmdir()
            if folder == self.created:
                break

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
        with naming(self.path / RUN_FILE):
            tmp.write_text(json.dumps(info, indent=1), encoding="utf-8")
            tmp.replace(self.path / RUN_FILE)

    def config_differences(
        self, config: Any, resolve: Callable[[Any, Path], Any] | None = None
    ) -> list[str]:
        """``key: saved -> given`` for every option that differs and matters for resuming; with
        ``resolve`` (``open``'s), the saved config is resolved for this folder first."""
        saved_file = self.path / CONFIG_FILE
        if not saved_file.exists():
            return [f"{saved_file} is missing"]
        try:
            loaded = load_config(type(config), saved_file)
            saved = flatten_config(loaded if resolve is None else resolve(loaded, self.path))
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
        """Write the checkpoint (atomically); a full disk or a folder that became unwritable (or
        not a folder) is a ``WriteError`` naming the file, the cause and the last good checkpoint,
        which is left intact."""
        try:
            save_checkpoint(self.checkpoint_path, **state)
            self.update_info(step=state.get("step"))
        except OSError as e:
            what = f"cannot write the checkpoint of step {state.get('step')}"
            raise self.write_error(e, what, self.checkpoint_path) from None

    def write_error(self, failure: OSError, what: str, file: Path | None = None) -> WriteError:
        """The one line that says a write of this run failed: the file (``file``, else
        ``failure``'s), ``what`` could not be done and why, the last good checkpoint, and how to
        resume."""
        file = file or failure.filename or self.path
        folder = file if str(file) == STANDARD_OUTPUT else Path(file).parent
        last = self.info.get("step") if self.has_checkpoint else None
        kept = (
            f"the last good checkpoint is {self.checkpoint_path} (step {last})"
            if last is not None
            else "no checkpoint was saved yet"
        )
        return WriteError(
            f"{file}: {what} ({failure.strerror}); {kept}. "
            f"{write_remedy(failure, folder).capitalize()} and run the same command "
            "again to resume"
        )

    def finish(self, keep_checkpoint: bool = True, **values: Any) -> None:
        """Mark the run finished: a re-run with this folder is refused, unless it asks for a larger
        budget and the checkpoint was kept (``open``)."""
        self.update_info(finished=True, **values)
        if not keep_checkpoint:
            self.checkpoint_path.unlink(missing_ok=True)

    def extends(self, steps: int | None) -> bool:
        """Whether a budget of ``steps`` continues this finished run: it is larger than the one the
        run finished with, and the run kept its checkpoint."""
        finished_with = self.info.get("steps")
        return (
            self.has_checkpoint
            and steps is not None
            and finished_with is not None
            and steps > finished_with
        )


class StopRequest(threading.Event):
    """Set by the first stop signal (``segrl.processes.STOP_SIGNALS``); ``signum`` is which."""

    signum: int = signal.SIGINT


@contextlib.contextmanager
def stop_requests() -> Iterator[StopRequest]:
    """An event set by the first Ctrl-C (SIGINT) or SIGTERM, so a training loop can stop at a step
    boundary and checkpoint; a second interrupts at once. The handlers before are put back after.
    Outside the main thread, never set."""
    requested = StopRequest()

    def handler(signum, frame):
        if requested.is_set():
            raise Interrupted(signum=signum)
        requested.signum = signum
        requested.set()

    with handling(handler, STOP_SIGNALS):
        yield requested


class Job:
    """A training job: its MLflow run, resumption, stop requests, progress bar, and the cadences of
    its loop (logging, evaluation, checkpoints), given once; the trainer supplies its update (the
    body of ``loop``) and what it trains (a ``Trainable``: what to save, restore, evaluate and do
    at the end).

    Entering it restores the run folder's checkpoint, if there is one (every RNG state, then
    ``trainable.load_state_dict(state)``), and starts the MLflow run (the experiment and run name
    of the resolved config's ``tracking`` table, its options as parameters on a fresh run), or
    continues the one ``run.json`` names. A run interrupted by Ctrl-C or SIGTERM, or by a write that
    fails (a full disk, a read-only folder: a ``WriteError`` naming the file and the last good
    checkpoint), ends as KILLED in MLflow.

    Args:
        run: the run folder; its config (``RunDir.config``: resolved, every option a value) is the
            job's.
        trainable: what the job trains (``Trainable``).
        cadence: the budget and the cadences (``Cadence``).
        tags: MLflow tags of the run beside segrl's own.
        on_step: ``on_step(step, stats) -> bool``; True stops as a Ctrl-C does.
        log_prefix: the logged means' prefix (``train/``).
        map_location: where the checkpoint's tensors are loaded.
    """

    def __init__(
        self,
        run: RunDir,
        trainable: Trainable,
        cadence: Cadence,
        *,
        tags: Mapping[str, str] | None = None,
        on_step: Callable[[int, dict[str, float]], bool] | None = None,
        log_prefix: str = "train/",
        map_location: Any = None,
    ):
        self.run = run
        self.config = run.config
        self.trainable = trainable
        self.cadence = cadence
        self.steps = cadence.steps
        self.tags = dict(tags or {})
        self.on_step = on_step
        self.log_prefix = log_prefix
        self.map_location = map_location
        self.step = 0
        """The last step made (the checkpoint's step on a resumed run, until the loop starts)."""
        self.resumed_from: int | None = None
        """The checkpoint's step on a resumed run; None on a fresh one."""
        self.previous_seconds = 0.0
        """Training seconds of the sessions before this one."""
        self.interrupted = False
        self.stop = StopRequest()
        self.progress: tqdm | None = None
        self._end = False
        self._window: dict[str, list[float]] = defaultdict(list)
        self._shown: dict[str, str] = {}
        self._stack = contextlib.ExitStack()
        self._started = 0.0

    @property
    def session_seconds(self) -> float:
        """Seconds since this session's training started (``__enter__``)."""
        return time.perf_counter() - self._started

    @property
    def train_seconds(self) -> float:
        """Training seconds in all, across interruptions."""
        return self.previous_seconds + self.session_seconds

    # --- start ---------------------------------------------------------------------------------------
    def __enter__(self) -> Job:
        state = self.run.load(map_location=self.map_location)  # restores every RNG state
        if state is not None:
            try:
                self.trainable.load_state_dict(state)
            except SegrlError:
                raise
            except Exception as e:  # a state the fresh trainer does not take (SB3's zip, weights)
                found = pickled_objects(e)  # as the loaders say it, not torch's unsafe advice
                why = (
                    f"{found}, so this job cannot resume from it"
                    if found
                    else "a checkpoint this job cannot resume from "
                    f"({type(e).__name__}: {first_line(e)[:200]})"
                )
                raise ModelError(
                    f"{self.run.checkpoint_path}: {why}; give another --out folder, or move the "
                    "checkpoint aside to train from the start"
                ) from None
            self.step = self.resumed_from = state["step"]
            self.previous_seconds = state.get("elapsed_seconds", 0.0)
        resume_id = self.run.info.get("mlflow_run_id") if state is not None else None
        if state is not None and resume_id is None:
            print(
                f"warning: {self.run.path / RUN_FILE} names no MLflow run; the resumed run logs "
                "into a new MLflow run",
                flush=True,
            )
        try:
            self._stack.enter_context(
                start_run(
                    self.config,
                    self.config.tracking.experiment,
                    self.config.tracking.run_name,
                    self.tags,
                    resume_id,
                    requested=self.run.requested,
                )
            )
        except BaseException:  # no MLflow run to train into (an unwritable store): nothing begun
            unlock_folder(self.run.path)
            if state is None:
                self.run.discard_unstarted()
            raise
        if resume_id is not None:
            self._stack.enter_context(resuming(resume_id))
        self.stop = self._stack.enter_context(stop_requests())
        self.run.update_info(mlflow_run_id=active_run_id(), finished=False)
        self._started = time.perf_counter()
        if self.resumed_from is not None:
            print(
                f"resuming {self.run.path} from step {self.resumed_from} of {self.steps}",
                flush=True,
            )
        return self

    # --- the loop ------------------------------------------------------------------------------------
    def loop(self) -> Iterator[int]:
        """The numbers of the updates left (from the resumed step + 1 to ``steps``): the body makes
        update ``step`` and calls ``end_step``. It ends early where ``end_step`` says so; after a
        stop request it raises ``TrainingInterrupted`` (the checkpoint is saved)."""
        while self.step < self.steps and not self._end:
            yield self.step + 1
        self.raise_if_interrupted()

    def end_step(self, step: int, stats: Mapping[str, float]) -> bool:
        """After update ``step`` (``stats``: its numbers, averaged into the log): log, evaluate
        and checkpoint where due; True when the loop must end here (a stop request, the time limit,
        or ``finish_early``), checkpointed."""
        self.step = step
        if self.progress is None:
            self.progress = tqdm(  # disable=None: no bar where stderr is not a terminal
                total=self.steps,
                initial=step - 1,
                desc=self.trainable.label,
                unit="step",
                leave=False,
                disable=None,
            )
        self.progress.update(1)
        for key, value in stats.items():
            self._window[key].append(value)
        if self.logged(step):
            means = {f"{self.log_prefix}{k}": sum(v) / len(v) for k, v in self._window.items()}
            log_metrics(means, step=step * self.cadence.metric_step)
            self._window.clear()
            self._show({k[len(self.log_prefix) :]: v for k, v in means.items()})
        eval_every = self.cadence.eval_every
        if eval_every and step < self.steps and step % eval_every == 0:
            self._show(self.trainable.evaluate(step * self.cadence.metric_step, self))
        if self.stop.is_set() or (self.on_step is not None and self.on_step(step, dict(stats))):
            self.interrupted = self._end = True
        elif (minutes := limit(self.cadence.max_minutes)) is not None and (
            self.session_seconds > 60 * minutes
        ):
            self._end = True
        if step % self.cadence.checkpoint_every == 0 or step == self.steps or self._end:
            self.save()
        if self.interrupted:
            self.close_progress()
        return self._end

    def logged(self, step: int) -> bool:
        """Whether ``end_step`` logs at ``step`` (every ``log_every`` steps and at the last)."""
        return step % self.cadence.log_every == 0 or step == self.steps

    @property
    def ending(self) -> bool:
        """Whether the loop ends after the step just made (see ``end_step``)."""
        return self._end

    def finish_early(self) -> None:
        """End the loop after this step (early stopping); the run then ends as at its budget."""
        self._end = True

    def raise_if_interrupted(self) -> None:
        """``TrainingInterrupted`` after a stop request (the checkpoint is saved)."""
        if self.interrupted:
            raise TrainingInterrupted(
                f"stopped at step {self.step}; run again to resume", self.stop.signum
            )

    def save(self) -> None:
        """Checkpoint the last step made: the trainer's state, the step, the training seconds."""
        self.run.save(
            step=self.step, elapsed_seconds=self.train_seconds, **self.trainable.state_dict()
        )

    def _show(self, values: Mapping[str, float]) -> None:
        """The shown values beside the bar; without a bar (a log file), one plain line each time."""
        self._shown.update({k: f"{values[k]:.3f}" for k in self.trainable.shown if k in values})
        if self.progress is None:
            return
        if not self.progress.disable:
            self.progress.set_postfix(self._shown)
            return
        shown = "".join(f", {k}={v}" for k, v in self._shown.items())
        print(
            f"{self.trainable.label}: step {self.step}/{self.steps}{shown}",
            file=sys.stderr,
            flush=True,
        )

    def close_progress(self) -> None:
        if self.progress is not None:
            self.progress.close()
            self.progress = None

    # --- the end -------------------------------------------------------------------------------------
    def finish(self, keep_checkpoint: bool = True) -> TrainResult:
        """The end of every trainer: ``trainable.finish(job) -> metrics`` (the final evaluation and
        saved model, logged by it), then the run marked finished with its metrics and budget. The
        checkpoint stays (a larger budget continues the run, ``RunDir.open``) unless
        ``keep_checkpoint`` is False (where the budget shapes the whole run, as a schedule does)."""
        self.close_progress()
        metrics = self.trainable.finish(self)
        self.run.finish(keep_checkpoint, step=self.step, steps=self.steps, metrics=dict(metrics))
        return TrainResult(
            metrics, self.run.path, self.run.info["mlflow_run_id"], self.step, self.resumed_from
        )

    def __exit__(self, exc_type, exc, tb) -> bool:
        """End the MLflow run (KILLED, resumable, after a Ctrl-C, a SIGTERM or a failed write) and
        let go of the run folder. A full disk or an unwritable folder met while saving the model or
        logging an artifact, or a tracking store whose disk is full, is raised as a ``WriteError``
        naming the file and the last good checkpoint (a store with no room to record the run's end
        leaves it RUNNING, to be resumed)."""
        self.close_progress()
        unlock_folder(self.run.path)
        failure = None
        if not isinstance(exc, SegrlError | KeyboardInterrupt):
            failure = write_failure(exc) or store_write_failure(exc)
        if failure is not None and failure.filename is None:  # segrl's own writes name their file
            failure.filename = active_artifact_folder()
        if isinstance(exc, KeyboardInterrupt | WriteError) or failure is not None:
            end_run_killed()
        self._stack.__exit__(exc_type, exc, tb)
        if failure is not None:
            raise self.run.write_error(failure, "cannot write it") from None
        return False
