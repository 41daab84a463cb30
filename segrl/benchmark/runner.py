"""Run a benchmark suite: every cell (language x system x seed) on local worker processes or on a Ray
cluster, one MLflow parent run with a child run per cell, and the tables of ``segrl.benchmark.report``.

    from segrl.benchmark import load_suite, run_bench
    outcome = run_bench(load_suite("quick"), workers=2)
    print(outcome.table)
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from segrl.benchmark.cells import Cell, CellJob, CellProcesses, run_cell, source_hash
from segrl.benchmark.report import (
    SPACES_GOLD,
    format_markdown,
    format_text,
    plot_f1,
    summarise,
    write_csv,
)
from segrl.benchmark.suite import Suite
from segrl.data.corpus import corpus_path
from segrl.data.languages import gold_language
from segrl.data.segmented import (
    BUNDLED_UTTERANCES,
    is_segmented,
    segmented_location,
    split_files,
)
from segrl.data.synthetic import is_synthetic
from segrl.errors import ConfigError, Interrupted, TrackingError
from segrl.files import check_writable_folder, lock_folder, unlock_folder
from segrl.processes import handling, raise_interrupt
from segrl.tracking.runs import end_run_killed, log_artifact, log_metrics, start_run
from segrl.tracking.store import absolute_tracking_uri

STATE_FILE = "bench.json"
DEFAULT_EXPERIMENT = "segrl-bench"


class BenchInterrupted(Interrupted):
    """A bench stopped by Ctrl-C or SIGTERM (``signum``): no queued cell started, the running ones
    were stopped, and the parent run ended KILLED; the message says how to resume."""


@dataclass
class BenchOutcome:
    folder: Path
    parent_run_id: str
    rows: list[dict]
    """``segrl.benchmark.report.summarise`` of the results: mean and sd per language and system."""
    results: list[dict]
    """One per cell: its status, metrics and log."""
    table: str
    wall_seconds: float
    failed: list[dict] = field(default_factory=list)


def cells_of(suite: Suite) -> list[Cell]:
    """Every cell, language by language, system by system, seed by seed."""
    return [
        Cell(language, system, seed)
        for language in suite.languages
        for system in suite.systems
        for seed in suite.seeds
    ]


def check_sources(suite: Suite) -> None:
    """Every language's corpus and gold set that is a path exists, before any cell starts: a
    ``ConfigError`` naming the suite, the language and the path otherwise."""
    for language in suite.languages:
        if is_segmented(language.corpus):  # its split files, and no second gold set
            location = segmented_location(language.corpus)
            if location != BUNDLED_UTTERANCES:
                split_files(location)
            if language.gold is not None:
                raise ConfigError(
                    f"suite {suite.name}, language {language.name!r}: a segmented corpus is its "
                    "own gold (its spaces); leave out its gold"
                )
        gold = None if language.gold is None or is_synthetic(language.gold) else Path(language.gold)
        for kind, path in (("corpus", corpus_path(language.corpus)), ("gold", gold)):
            if path is None or path.exists():
                continue
            raise ConfigError(
                f"suite {suite.name}, language {language.name!r}: its {kind} {path} does not "
                "exist (check the suite's path or --data-dir)"
            )


def run_bench(
    suite: Suite,
    out: str | Path | None = None,
    workers: int = 1,
    ray_address: str | None = None,
    experiment: str = DEFAULT_EXPERIMENT,
) -> BenchOutcome:
    """Run (or finish) every cell of ``suite`` and write ``results.csv``, ``results.md``,
    ``results.txt`` and ``f1.png`` into ``out`` (default ``runs/bench/<suite name>``), all logged to
    the parent MLflow run. A re-run with the same ``out`` skips the finished cells and continues the
    same parent run."""
    if workers < 1:
        raise ConfigError(f"--workers must be at least 1, got {workers}")
    check_sources(suite)
    folder = Path(out or Path("runs") / "bench" / suite.name)
    check_writable_folder(folder, "--out")
    folder.mkdir(parents=True, exist_ok=True)
    holder = lock_folder(folder)
    if holder is not None:
        raise ConfigError(
            f"{folder} is in use: process {holder or '(starting)'} is running a bench into it; wait "
            "for it to end (then the same command finishes what is left), or give another --out"
        )
    try:  # held until the bench ends, however it ends
        return _run_bench_in(folder, suite, workers, ray_address, experiment)
    finally:
        unlock_folder(folder)


def _run_bench_in(
    folder: Path, suite: Suite, workers: int, ray_address: str | None, experiment: str
) -> BenchOutcome:
    """``run_bench`` in its bench folder, which this process holds."""
    started = time.perf_counter()
    cells = cells_of(suite)
    hashes = {
        language.name: (source_hash(language.corpus, "corpus"), source_hash(language.gold, "gold"))
        for language in suite.languages
    }
    state_file = folder / STATE_FILE
    resume = _previous_parent(state_file, suite)
    params = {
        "suite": suite.name,
        "suite_source": suite.source,
        "seeds": ",".join(map(str, suite.seeds)),
        "languages": ",".join(lang.name for lang in suite.languages),
        **{f"system.{s.name}": " ".join(s.command) for s in suite.systems},
        **{f"corpus.{lang.name}": lang.corpus or "bundled" for lang in suite.languages},
        **{f"gold.{lang.name}": lang.gold or "bundled" for lang in suite.languages},
    }
    with start_run(
        params if resume is None else {},
        experiment,
        run_name=f"bench-{suite.name}",
        tags={"segrl.bench.suite": suite.name},
        resume_run_id=resume,
    ) as parent:
        parent_id = parent.info.run_id
        store = absolute_tracking_uri()  # the cells may run in other folders (Ray)
        _write_json(state_file, {"suite": suite.name, "parent_run_id": parent_id})
        jobs = [
            CellJob(
                cell=cell,
                root=str(folder.resolve()),
                experiment=experiment,
                parent_run_id=parent_id,
                tracking_uri=store,
                cwd=str(Path.cwd()),
                tags={
                    "segrl.bench.suite": suite.name,
                    "segrl.bench.language": cell.language.name,
                    "segrl.bench.system": cell.system.name,
                    "segrl.bench.seed": str(cell.seed),
                    "segrl.corpus_hash": hashes[cell.language.name][0],
                    "segrl.gold_hash": hashes[cell.language.name][1],
                },
            )
            for cell in cells
        ]
        execute = _on_ray(ray_address) if ray_address else _locally(workers)
        results = []
        # disable=None: no bar where stderr is not a terminal; a line per cell there instead
        progress = tqdm(total=len(jobs), desc=f"bench {suite.name}", unit="cell", disable=None)
        try:  # SIGTERM stops the bench as Ctrl-C does
            with (
                handling(raise_interrupt, [signal.SIGTERM]),
                contextlib.closing(execute(jobs)) as finished,  # closed: the cells are stopped
            ):
                for job, result in finished:
                    results.append(
                        {
                            **result,
                            "language": job.cell.language.name,
                            "gold_language": SPACES_GOLD
                            if is_segmented(job.cell.language.corpus)
                            else gold_language(job.cell.language.gold),
                            "system": job.cell.system.name,
                            "seed": job.cell.seed,
                        }
                    )
                    progress.set_postfix_str(f"{job.cell.id}: {result['status']}")
                    progress.update()
                    if progress.disable:
                        print(
                            f"[bench {suite.name}] {len(results)}/{len(jobs)} {job.cell.id}: "
                            f"{result['status']}",
                            file=sys.stderr,
                            flush=True,
                        )
        except KeyboardInterrupt as stopped:
            progress.close()
            end_run_killed()
            raise BenchInterrupted(
                f"bench {suite.name} stopped after {len(results)} of {len(jobs)} cells, its MLflow "
                f"parent run KILLED; run the same command (the same --out, {folder}) to resume: "
                "finished cells are skipped, stopped training cells resume from their "
                "checkpoints, the same parent run continues",
                getattr(stopped, "signum", signal.SIGINT),
            ) from None
        progress.close()
        order = {job.cell.id: i for i, job in enumerate(jobs)}
        results.sort(key=lambda r: order[r["cell"]])
        rows = summarise(results)
        table = format_text(rows)
        wall = time.perf_counter() - started
        (folder / "results.txt").write_text(table, encoding="utf-8")
        (folder / "results.md").write_text(
            format_markdown(rows, f"segrl bench --suite {suite.name}"), encoding="utf-8"
        )
        write_csv(rows, folder / "results.csv")
        plot_f1(rows, folder / "f1.png")
        _write_json(folder / "cells.json", results)
        for name in ("results.txt", "results.md", "results.csv", "f1.png", "cells.json"):
            log_artifact(folder / name)
        log_metrics(
            {
                f"{row['language']}/{row['system']}/{metric}": row[f"{metric}_mean"]
                for row in rows
                for metric in (
                    "boundary_f1",
                    "boundary_precision",
                    "boundary_recall",
                    "word_f1",
                    "word_boundary_f1",
                    "lexicon_f1",
                    "units_per_char",
                )
                if row[f"{metric}_mean"] == row[f"{metric}_mean"]
            }
        )
    failed = [r for r in results if r["status"] == "failed"]
    return BenchOutcome(folder, parent_id, rows, results, table, wall, failed)


Executor = Callable[[Sequence[CellJob]], Iterator[tuple[CellJob, dict]]]


def _locally(workers: int) -> Executor:
    """Cells on ``workers`` threads, each running its cell's process; when the bench ends early (a
    Ctrl-C), queued cells never start and running ones are stopped (``CellProcesses``)."""

    def execute(jobs: Sequence[CellJob]) -> Iterator[tuple[CellJob, dict]]:
        processes = CellProcesses()
        pool = ThreadPoolExecutor(max_workers=workers)
        try:
            futures = {pool.submit(run_cell, job, processes): job for job in jobs}
            for future in as_completed(futures):
                yield futures[future], future.result()
        finally:
            _stop(pool, processes)

    return execute


def _stop(pool: ThreadPoolExecutor, processes: CellProcesses) -> None:
    """Start no more cells, stop the running ones, and wait for them to end; a Ctrl-C meanwhile
    stops them again (a training command then stops at once)."""
    processes.stop()
    while True:
        try:
            pool.shutdown(wait=True, cancel_futures=True)
            return
        except KeyboardInterrupt:
            processes.stop()


def _on_ray(address: str) -> Executor:
    try:
        import ray
    except ImportError:
        raise ConfigError(
            "--ray needs the optional 'ray' package: pip install 'segrl[cluster]'"
        ) from None

    def execute(jobs: Sequence[CellJob]) -> Iterator[tuple[CellJob, dict]]:
        try:
            ray.init(address=address, log_to_driver=False, ignore_reinit_error=True)
        except (ConnectionError, RuntimeError, ValueError) as e:
            raise ConfigError(f"--ray {address}: cannot connect to the Ray cluster ({e})") from None
        try:
            remote = ray.remote(num_cpus=1)(run_cell)
            pending = {remote.remote(job): job for job in jobs}
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    yield pending.pop(ref), ray.get(ref)
        finally:
            ray.shutdown()

    return execute


def _previous_parent(state_file: Path, suite: Suite) -> str | None:
    """The parent run of an earlier, unfinished or finished, run of this bench in this folder."""
    if not state_file.exists():
        return None
    try:
        state = json.loads(state_file.read_text(encoding="utf-8"))
        run_id = state["parent_run_id"]
    except (json.JSONDecodeError, KeyError, TypeError):
        raise TrackingError(
            f"{state_file}: damaged; delete it to start the bench's MLflow parent run anew "
            "(finished cells are still skipped)"
        ) from None
    if state.get("suite") != suite.name:
        raise ConfigError(
            f"{state_file}: this folder holds the bench of suite {state.get('suite')!r}; "
            f"give another --out for suite {suite.name!r}"
        )
    return run_id


def _write_json(path: Path, data: object) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")
    os.replace(tmp, path)
