"""The tags segrl's runs carry: what a segmenter run is and what it trained on, the version of segrl
that ran it and the command that started it (MLflow's own source tags), and the tags a parent
process hands its jobs (``$SEGRL_RUN_TAGS``)."""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from segrl.errors import TrackingError
from segrl.version import __version__

SEGMENTER_TAG = "segrl.segmenter"
KIND_TAG = "segrl.kind"
RUN_KINDS = ("baseline", "agent", "lm", "units", "evaluated")
"""The values of ``KIND_TAG``: what produced a segmenter run (``evaluated``: ``segrl evaluate``)."""
CORPUS_TAG, CORPUS_FINGERPRINT_TAG = "segrl.corpus", "segrl.corpus_fingerprint"
GOLD_TAG, GOLD_FINGERPRINT_TAG = "segrl.gold", "segrl.gold_fingerprint"
CORPUS_LANGUAGE_TAG, GOLD_LANGUAGE_TAG = "segrl.corpus_language", "segrl.gold_language"
"""ISO 639-3 codes, or ``unknown`` (``segrl.data.languages``)."""
GOLD_COVERAGE_TAG = "segrl.gold_coverage"
"""How much of the gold set a run was scored on (``gold_coverage``): runs scored on a part of it
(``segrl evaluate --predictions``) or on another sample size are not ranked with the others."""


def gold_coverage(covered: int, size: int, unit: str = "words") -> str:
    """The ``GOLD_COVERAGE_TAG`` of a run scored on ``covered`` of the ``size`` words (or ``unit``)
    of a gold set: ``all 2000 words``, or ``500 of 40298 words (1.2%)``."""
    if covered == size:
        return f"all {size} {unit}"
    return f"{covered} of {size} {unit} ({covered / size:.1%})"


CORPUS_LABEL_TAG, GOLD_LABEL_TAG = "segrl.corpus_label", "segrl.gold_label"
"""Short labels of ``CORPUS_TAG`` and ``GOLD_TAG`` (``source_label``): the MLflow UI's columns."""
DATA_TAG = "segrl.data"
"""What a run trained on and was scored against, in one short line (``label_tags``): the MLflow UI
groups the runs by it."""
NO_SOURCE = "(none)"
"""A part of ``DATA_TAG`` a run has no source for (``segrl evaluate`` trains on no corpus)."""
_KIND = re.compile(r"([a-z]{2,}):(.*)")
"""A source's kind (``goldwords:``, ``wordfreq:``); a one-letter one would be a drive."""


def source_label(source: str) -> str:
    """A short label of a corpus or gold source (a ``CORPUS_TAG`` or ``GOLD_TAG``): its kind and the
    name of its file or folder, ``goldwords:mon.word.train.tsv`` for
    ``goldwords:/data/sigmorphon2022/mon.word.train.tsv`` and ``mon.txt`` for ``/data/mon.txt``; a
    named source as it is (``wordfreq:en``, ``synthetic:0``, ``segmented:bundled``); ``bundled``
    for the bundled corpus and the bundled gold set (one of each)."""
    found = _KIND.fullmatch(source)
    kind, rest = (found[1] + ":", found[2]) if found else ("", source)
    if kind == "bundled:":
        return "bundled"
    return kind + (PurePosixPath(rest).name or rest)


def label_tags(tags: Mapping[str, str]) -> dict[str, str]:
    """The labels of a run's data, from its tags: ``CORPUS_LABEL_TAG`` and ``GOLD_LABEL_TAG`` of its
    ``CORPUS_TAG`` and ``GOLD_TAG`` where it has them, and ``DATA_TAG``, those labels and its
    ``GOLD_COVERAGE_TAG`` (``wordfreq:en | eng.word.dev.tsv | all 2000 words``, ``NO_SOURCE`` for a
    part it lacks); none for a run with neither source."""
    labels = {
        label: source_label(tags[tag])
        for tag, label in ((CORPUS_TAG, CORPUS_LABEL_TAG), (GOLD_TAG, GOLD_LABEL_TAG))
        if tags.get(tag)
    }
    if not labels:
        return {}
    parts = [labels.get(CORPUS_LABEL_TAG), labels.get(GOLD_LABEL_TAG), tags.get(GOLD_COVERAGE_TAG)]
    return {**labels, DATA_TAG: " | ".join(part or NO_SOURCE for part in parts)}


RUN_TAGS_VARIABLE = "SEGRL_RUN_TAGS"
"""A JSON object of tags that every run this process starts gets too (``segrl bench`` sets it for
its cells: language, system, seed, corpus and gold hashes)."""
JOB_IDENTITY_SUFFIXES = (".system", ".cell")
"""Tags of ``$SEGRL_RUN_TAGS`` that name the job's own segmenter (``segrl.bench.system``): a
nested run, another segmenter of the same job, does not take them."""


@functools.cache
def version_tags() -> dict[str, str]:
    """``segrl.version``, and ``segrl.git_commit`` where segrl runs from a git checkout (with
    ``-dirty`` when it has uncommitted changes)."""
    tags = {"segrl.version": __version__}
    root = Path(__file__).resolve().parents[2]
    if (root / ".git").exists():
        try:
            commit = subprocess.run(
                ["git", "-C", str(root), "rev-parse", "HEAD"],
                capture_output=True, text=True, timeout=10, check=True,
            ).stdout.strip()  # fmt: skip
            dirty = subprocess.run(
                ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                capture_output=True, text=True, timeout=10, check=True,
            ).stdout.strip()  # fmt: skip
            tags["segrl.git_commit"] = commit + ("-dirty" if dirty else "")
        except (OSError, subprocess.SubprocessError):
            pass
    return tags


SOURCE_NAME_TAG, SOURCE_TYPE_TAG = "mlflow.source.name", "mlflow.source.type"
SOURCE_COMMIT_TAG = "mlflow.source.git.commit"
"""MLflow's own tags for what ran a run: the UI's Source column shows them."""
_command: str | None = None
"""The ``segrl`` command this process runs (``segrl train``), once the command line has said it."""


def set_command(command: str) -> None:
    """Name the command this process runs (``segrl units train``): every run it starts records it
    as its MLflow source."""
    global _command
    _command = command


def source_tags() -> dict[str, str]:
    """MLflow's source tags: the ``segrl`` command that ran (where the command line said which; from
    Python, MLflow's own, the script's path, stays), ``LOCAL``, and segrl's git commit where known."""
    tags = {SOURCE_TYPE_TAG: "LOCAL"}
    if _command:
        tags[SOURCE_NAME_TAG] = _command
    commit = version_tags().get("segrl.git_commit")
    if commit:
        tags[SOURCE_COMMIT_TAG] = commit.removesuffix("-dirty")
    return tags


def extra_run_tags() -> dict[str, str]:
    """The tags of ``$SEGRL_RUN_TAGS`` (a JSON object), as strings; none when unset."""
    text = os.environ.get(RUN_TAGS_VARIABLE, "").strip()
    if not text:
        return {}
    try:
        tags = json.loads(text)
    except json.JSONDecodeError as e:
        raise TrackingError(f"${RUN_TAGS_VARIABLE} is not a JSON object of tags ({e})") from None
    if not isinstance(tags, dict):
        raise TrackingError(f"${RUN_TAGS_VARIABLE} must be a JSON object of tags")
    return {str(k): str(v) for k, v in tags.items()}
