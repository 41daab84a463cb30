"""Reading runs back from the store: the finished segmenter runs ``segrl compare`` tabulates (with
what each trained on and was scored against), a job's finished child run, and runs' metric
histories for ``segrl curves``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mlflow.tracking import MlflowClient

import mlflow
from segrl.config import NO_LIMIT
from segrl.data.languages import gold_language
from segrl.errors import TrackingError
from segrl.metrics import COMPARE_COLUMNS, GOLD_UNITS_PER_CHAR, UNITS_PER_CHAR, WORD_F1
from segrl.tracking.store import DEFAULT_EXPERIMENT, ensure_reachable
from segrl.tracking.tags import KIND_TAG, SEGMENTER_TAG


def segmenter_runs(experiment: str = DEFAULT_EXPERIMENT, latest_only: bool = True) -> list[dict]:
    """Finished segmenter runs of ``experiment``, newest first: one dict per run with ``segmenter``,
    ``kind``, ``corpus`` and ``gold`` (what it was trained on and scored against), ``run_name``,
    ``run_id``, ``start_time`` and every metric of ``COMPARE_COLUMNS`` it logged. With
    ``latest_only`` only the newest run of each segmenter on each (corpus, gold) is kept."""
    uri = ensure_reachable()
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        raise TrackingError(
            f"no experiment named {experiment!r} in {uri}; run `segrl baseline` first, or pass "
            "--experiment (and check MLFLOW_TRACKING_URI and the folder you run in)"
        )
    rows: list[dict] = []
    seen: set[tuple[str, str, str]] = set()
    runs = client.search_runs(
        [exp.experiment_id],
        filter_string="attributes.status = 'FINISHED'",
        order_by=["attributes.start_time DESC"],
        max_results=10_000,
    )
    for run in runs:
        name = run.data.tags.get(SEGMENTER_TAG)
        corpus, gold = run_data_labels(run.data.params, run.data.tags.get(KIND_TAG, ""))
        if not name or (latest_only and (name, corpus, gold) in seen):
            continue
        seen.add((name, corpus, gold))
        metrics = compare_metrics(run.data.metrics, run.data.tags.get(KIND_TAG, ""))
        rows.append(
            {
                "segmenter": name,
                "corpus": corpus,
                "gold": gold,
                "kind": run.data.tags.get(KIND_TAG, ""),
                "run_name": run.info.run_name,
                "run_id": run.info.run_id,
                "start_time": run.info.start_time,
                **metrics,
            }
        )
    return rows


def compare_metrics(metrics: Mapping[str, float], kind: str) -> dict[str, float]:
    """The metrics of ``COMPARE_COLUMNS`` a run logged, read as they are named now in runs logged
    before: ``segrl evaluate`` (kind ``evaluated``) once logged its units per character of the gold
    words as ``units_per_char``, and word discovery the gold's own as ``gold_units_per_char``
    (a word-discovery run's ``units_per_char`` is of the gold utterances)."""
    found = dict(metrics)
    if WORD_F1 in found and UNITS_PER_CHAR in found:
        found[GOLD_UNITS_PER_CHAR] = found[UNITS_PER_CHAR]
    elif kind == "evaluated" and UNITS_PER_CHAR in found:
        found.setdefault(GOLD_UNITS_PER_CHAR, found.pop(UNITS_PER_CHAR))
    return {k: found[k] for k in COMPARE_COLUMNS if k in found}


def run_data_labels(params: Mapping[str, str], kind: str) -> tuple[str, str]:
    """(corpus, gold) of a run, from the options it logged: the corpus (with its size and format
    options where they are not the defaults) and the gold file (with its language, its sample size,
    and the part of it a predictions file covered)."""
    if kind == "evaluated":  # scored after the fact: its training corpus is not known here
        corpus = "(scored by segrl evaluate)"
    else:
        corpus = _unset(params.get("data.corpus")) or "bundled"
        for key, label in (("data.max_sentences", "sentences"), ("data.max_words", "words")):
            if _unset(params.get(key)):
                corpus += f" ({label} {params[key]})"
    path = _unset(params.get("gold.path"))
    gold = f"{path or 'bundled'} ({gold_language(path)}"
    if _unset(params.get("gold.max_words")):
        gold += f", {params['gold.max_words']} words"
    if "gold.covered" in params and params["gold.covered"] != params.get("gold.words"):
        gold += f", {params['gold.covered']} of {params['gold.words']} words"
    return corpus, gold + ")"


def _unset(value: str | None) -> str | None:
    """A logged option's value; None for one left unset (older runs logged the string "None"), for
    a limit that is none (``NO_LIMIT``, as resolved configs log it) and for the bundled corpus and
    gold set by their names (``bundled:...``, as resolved configs log them)."""
    if value in (None, "", "None", str(NO_LIMIT)) or value.startswith("bundled:"):
        return None
    return value


def finished_run_with_tag(
    parent_run_id: str, key: str, value: str, metrics: Sequence[str], uri: str | None = None
) -> dict[str, Any] | None:
    """The newest finished child run of ``parent_run_id`` whose tag ``key`` is ``value``, in the
    store at ``uri`` (default: the one in use): its ``run_id`` and the named ``metrics`` it logged;
    None where there is none."""
    client = MlflowClient(ensure_reachable(uri))
    experiment = client.get_run(parent_run_id).info.experiment_id
    runs = client.search_runs(
        [experiment],
        filter_string=(
            f"tags.`mlflow.parentRunId` = '{parent_run_id}' and tags.`{key}` = '{value}' "
            "and attributes.status = 'FINISHED'"
        ),
        order_by=["attributes.start_time DESC"],
        max_results=1,
    )
    if not runs:
        return None
    logged = runs[0].data.metrics
    return {"run_id": runs[0].info.run_id, **{m: logged[m] for m in metrics if m in logged}}


def metric_histories(
    runs: Sequence[str], metrics: Sequence[str], experiment: str | None = None
) -> dict[str, dict[str, dict[int, float]]]:
    """``{run: {metric: {step: value}}}`` for each of ``runs`` (a run ID, or a run name: the newest run
    of that name, in ``experiment`` or in any experiment) and each of ``metrics`` it logged (a metric
    it never logged maps to ``{}``). A run that is not in the store is a ``TrackingError``."""
    uri = ensure_reachable()
    client = MlflowClient(uri)
    if experiment is None:
        experiments = [e.experiment_id for e in client.search_experiments()]
    else:
        found = client.get_experiment_by_name(experiment)
        if found is None:
            raise TrackingError(f"no experiment named {experiment!r} in {uri}")
        experiments = [found.experiment_id]
    histories: dict[str, dict[str, dict[int, float]]] = {}
    for run in runs:
        run_id = _find_run(client, run, experiments)
        if run_id is None:
            raise TrackingError(
                f"no run named {run!r} (nor with that ID) in {uri}"
                + (f", experiment {experiment!r}" if experiment else "")
                + "; `segrl compare` lists the runs (its run_id column), the MLflow UI their names"
            )
        histories[run] = {
            m: {point.step: point.value for point in client.get_metric_history(run_id, m)}
            for m in metrics
        }
    return histories


def _find_run(client: MlflowClient, run: str, experiments: Sequence[str]) -> str | None:
    """The ID of the newest run named ``run`` in ``experiments``, else of the run with ID ``run``."""
    quoted = run.replace("'", "\\'")
    named = client.search_runs(
        list(experiments),
        filter_string=f"attributes.run_name = '{quoted}'",
        order_by=["attributes.start_time DESC"],
        max_results=1,
    )
    if named:
        return named[0].info.run_id
    try:
        found = client.get_run(run)
    except mlflow.exceptions.MlflowException:
        return None
    return found.info.run_id if found.info.experiment_id in experiments else None
