"""One training loop for every unit model: ``train_unit_model(config)``.

Read top to bottom: load and check the inputs (before anything is logged), build the model and the
optimiser, then the job (``segrl.jobs.Job``), which resumes from the run folder's checkpoint when it
is there; then per step: a batch of training sentences, deletion noise, the model's loss (autocast
for bf16/fp16), clipped optimiser step, learning rate schedule. The job's cadences: every
``log_every`` steps the means of every loss term and diagnostic go to MLflow (``train/...``), with
the learning rate and training characters per second; every ``eval_every`` steps the validation
metrics (``valid/...``, segments scored on a sample of the gold words); every ``checkpoint_every``
steps a checkpoint. At the end (``Job.finish``): the validation metrics of the last step, the
test-set evaluation with the standard metric names (the run is registered for ``segrl compare`` as
kind ``units``), attention maps as images, the robustness curves, and the model folder
(``segrl.units.saving``) as an artifact; the checkpoint is dropped (the budget shapes the learning
rate schedule, so a finished run is not continued).

Batches and noise are functions of (seed, step), and the checkpoint holds every RNG state, so a run
interrupted and resumed gives the same model as one that never stopped (on CPU, same threads).

The job resolves its config once, where it opens its run folder (``resolve_units_config``), and
trains, saves and logs the resolved one: every option a value.
"""

from __future__ import annotations

import contextlib
import copy
import random
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from segrl.data import Corpus, GoldWord, check_gold_fits, load_corpus, load_gold
from segrl.data.batching import training_batches
from segrl.data.vocab import CharVocab
from segrl.errors import ConfigError, DataError, ModelError
from segrl.experiments.units_eval import UNITS_KIND, final_evaluation
from segrl.jobs import (
    CHECKPOINT_FILE,
    Cadence,
    Job,
    JobStart,
    RunDir,
    TrainResult,
    resolve_job_tables,
)
from segrl.model_files import is_model_uri, logged_segmenter_folder
from segrl.runtime import (
    resolve_device,
    seed_everything,
    set_threads,
)
from segrl.tracking.models import log_segmenter_model
from segrl.tracking.runs import log_data, log_metrics
from segrl.tracking.store import download_model, ensure_reachable
from segrl.tracking.tags import KIND_TAG
from segrl.units.base import UnitModel
from segrl.units.config import UnitsConfig
from segrl.units.evaluation import evaluate_unit_model
from segrl.units.registry import model_class
from segrl.units.saving import MODEL_FILE, build_model, load_unit_model, save_unit_model
from segrl.units.stepping import UnitTrainer


@contextlib.contextmanager
def trained_model_folder(source: str | Path) -> Iterator[Path]:
    """The folder of the trained unit model ``source`` names (``init_from``, ``segrl units finetune
    --from``): a model or run folder of ``segrl units train``, an MLflow model folder it logged, or
    an MLflow URI of one (``runs:/RUN_ID/model``, ``models:/NAME/VERSION``: its ``segmenter``
    artifact, downloaded into a temporary folder that goes on leaving)."""
    with contextlib.ExitStack() as stack:
        folder = Path(source)
        if is_model_uri(source):
            into = stack.enter_context(tempfile.TemporaryDirectory(prefix="segrl-model-"))
            folder = download_model(str(source), Path(into))
        folder = logged_segmenter_folder(folder)
        if not (folder / MODEL_FILE).exists():
            raise ModelError(
                f"{source}: no {MODEL_FILE} here; give the folder a finished `segrl units train` "
                "wrote (an interrupted run resumes with the same command), an MLflow model it "
                "logged, or its URI (runs:/RUN_ID/model, models:/NAME/VERSION)"
            )
        yield folder


def start_from_trained(
    model: UnitModel, folder: str | Path, vocab: CharVocab, device: torch.device
) -> None:
    """Initialise ``model`` from the trained model ``folder`` names (``config.init_from``: see
    ``trained_model_folder``)."""
    with trained_model_folder(folder) as local:
        source, source_vocab, _ = load_unit_model(local, device)
    if source_vocab != vocab:
        raise ConfigError(
            f"{folder} was trained on a corpus with another character vocabulary; fine-tune it on "
            "the corpus it was trained on (its data.* options)"
        )
    try:
        model.init_from_pretrained(source)
    except ModelError as e:
        raise ModelError(f"{folder}: {e}") from None


def check_inputs(corpus: Corpus, config: UnitsConfig) -> None:
    if not corpus.train:
        raise DataError(f"{corpus.settings.get('source')}: no training sentences")
    if not corpus.valid or not corpus.test:
        raise DataError(
            f"{corpus.settings.get('source')}: the valid or test split is empty; give a larger "
            "corpus or raise data.valid_fraction / data.test_fraction"
        )
    longest = max(len(s) for s in corpus.sentences)
    max_len = getattr(config.arch, "max_len", None)
    if max_len is not None and longest + 1 > max_len:
        raise ConfigError(
            f"sentences of up to {longest} characters do not fit arch.max_len={max_len}; raise it"
        )


def resolve_units_config(config: UnitsConfig, start: JobStart) -> UnitsConfig:
    """``config`` as ``segrl units train`` trains it, every option a value (a copy: ``config`` is
    not changed; a resolved config resolves to itself): the device and threads the job runs with,
    no model to start from ("" for ``init_from``: random initialisation), the model's own
    (``UnitModel.resolve_arch``), and every job's tables
    (``resolve_job_tables``: run folder, corpus and gold set by their names, the run's name: the
    model's)."""
    config = copy.deepcopy(config)
    resolved = replace(
        config,
        init_from=config.init_from or "",
        device=start.device,
        threads=start.threads if config.threads is None else config.threads,
        arch=model_class(config.model).resolve_arch(config.arch),
    )
    return resolve_job_tables(resolved, start, config.model)


def train_unit_model(
    config: UnitsConfig,
    corpus: Corpus | None = None,
    gold: list[GoldWord] | None = None,
) -> TrainResult:
    """Train ``config.model`` as ``config`` says (resuming from its run folder's checkpoint when
    there is one), evaluate it and log everything to MLflow. Returns the test metrics and the run
    folder, which holds the trained model (``TrainResult.run_dir``)."""
    train = config.train
    # Inputs first: a bad corpus, gold file, option or store stops the run before anything is logged.
    ensure_reachable()
    corpus = corpus or load_corpus(config.data)
    gold = gold if gold is not None else load_gold(config.gold.path, config.gold.max_words)
    check_inputs(corpus, config)
    check_gold_fits(gold, corpus, config.gold.path)
    device = resolve_device(config.device)
    folder = config.run_folder
    if (folder / MODEL_FILE).exists() and not (folder / CHECKPOINT_FILE).exists():
        raise ConfigError(
            f"{folder} already holds a trained model; choose another --out folder or run name, "
            "or evaluate it with `segrl units eval`"
        )
    set_threads(config.threads)
    start = JobStart.of(corpus, config.device, len(corpus.train))
    run = RunDir.open(
        config,
        folder,
        folder,
        config.RESUMABLE,
        resolve=lambda given, at: resolve_units_config(given, start.at(at)),
    )
    config, train = run.config, run.config.train  # resolved: every option a value, as logged
    with run.preparing():  # a model it cannot start from leaves no run folder behind
        seed_everything(config.seed)
        vocab = corpus.vocab
        model = build_model(config, len(vocab)).to(device)
        trainer = UnitTrainer(model, vocab, train, device, config.seed)
        if config.init_from and not run.has_checkpoint:
            start_from_trained(model, config.init_from, vocab, device)
    training = UnitTraining(config, model, trainer, run, corpus, gold)
    cadence = Cadence(
        train.steps,
        log_every=config.log_every,
        eval_every=config.eval_every,
        checkpoint_every=config.checkpoint_every,
    )
    job = Job(run, training, cadence, tags={KIND_TAG: UNITS_KIND}, map_location=device)
    with job:
        if job.resumed_from is None:
            log_data(corpus, config.gold.path, gold)
            log_metrics({"parameters": sum(p.numel() for p in model.parameters())})
        batches = training_batches(corpus.train, train.batch_size, config.seed, job.step)
        speed = _Speed()
        model.train()
        batch = trainer.batch(next(batches), job.step)
        made = job.step
        try:
            for step in job.loop():  # update ``step`` follows the ``step - 1`` made so far
                started = time.perf_counter()
                out = trainer.update(batch, progress=(step - 1) / train.steps)
                made = step
                chars = sum(len(t) for t in batch.texts)
                batch = trainer.batch(next(batches), step)  # on the CPU while the device computes
                values = trainer.values(out, step - 1, str(folder))
                speed.add(chars, time.perf_counter() - started)
                job.end_step(step, values)
                if job.logged(step):  # beside the means: the learning rate and the speed
                    extra = {"train/lr": trainer.scheduler.get_last_lr()[0], **speed.flush()}
                    log_metrics(extra, step=step)
        except KeyboardInterrupt:  # a second Ctrl-C, mid-step: keep the last completed update
            job.step = made  # one made whole whose numbers were not yet read counts too
            if job.step > (job.resumed_from or 0):
                job.save()
            raise
        return job.finish(keep_checkpoint=False)


class UnitTraining:
    """A unit model as its job sees it (``segrl.jobs.Trainable``): model, optimiser and vocabulary
    checkpointed; validation metrics on a fixed sample of gold words; at the end, the test-set
    evaluation and the model folder saved and logged."""

    shown = ("loss",)

    def __init__(
        self,
        config: UnitsConfig,
        model: UnitModel,
        trainer: UnitTrainer,
        run: RunDir,
        corpus: Corpus,
        gold: list[GoldWord],
    ):
        self.config = config
        self.model = model
        self.trainer = trainer
        self.run = run
        self.corpus = corpus
        self.gold = gold
        self.label = f"units {config.model}"
        n_gold = min(config.eval.gold_words_during_training, len(gold))
        self.valid_gold = random.Random(config.seed).sample(gold, n_gold)

    def state_dict(self) -> dict[str, Any]:
        vocab = self.corpus.vocab.to_dict()
        return {"model": self.model.state_dict(), **self.trainer.state_dict(), "vocab": vocab}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state["vocab"] != self.corpus.vocab.to_dict():
            raise ConfigError(
                f"{self.run.checkpoint_path} was trained on a corpus with another vocabulary"
            )
        self.model.load_state_dict(state["model"])
        self.trainer.load_state_dict(state)

    def evaluate(self, step: int, job: Job | None = None) -> dict[str, float]:
        config, train = self.config, self.config.train
        metrics = evaluate_unit_model(
            self.model, self.corpus.vocab, self.corpus.valid, self.valid_gold,
            config.eval.batch_size, train.precision, train.deletion_prob, config.seed,
        )  # fmt: skip
        log_metrics({f"valid/{k}": v for k, v in metrics.items()}, step=step)
        return metrics

    def finish(self, job: Job) -> dict[str, float]:
        config, model, vocab, run = self.config, self.model, self.corpus.vocab, self.run
        self.evaluate(job.step)
        metrics, _ = final_evaluation(model, vocab, self.corpus, self.gold, config)
        save_unit_model(run.path, model, vocab, config, run.requested)
        with tempfile.TemporaryDirectory() as tmp:  # the model's files, not the run's checkpoint
            saved = save_unit_model(Path(tmp) / "segmenter", model, vocab, config, run.requested)
            log_segmenter_model(saved, config.tracking.register)
        return metrics


class _Speed:
    """Training characters per second since the last log (the updates' time, the next batch's
    making included; evaluations and checkpoints left out)."""

    def __init__(self) -> None:
        self.chars = 0
        self.seconds = 0.0

    def add(self, chars: int, seconds: float) -> None:
        self.chars += chars
        self.seconds += seconds

    def flush(self) -> dict[str, float]:
        out = {"train/chars_per_second": self.chars / self.seconds if self.seconds else 0.0}
        self.__init__()
        return out
