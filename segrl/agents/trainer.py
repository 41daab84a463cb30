"""The training job of every agent, around its learner: build the task, train with checkpoints,
evaluate as it goes, log everything to MLflow, register the final segmenter for ``segrl compare``.
``train_sentence_agent`` runs the learners that take whole sentences (``segrl.agents.reinforce``,
``segrl.agents.ppo_batched``); ``segrl.agents.sb3`` shares its set-up, job, evaluation and finish.

Reading guide (``segrl train --agent reinforce``, from the command to the update):

- **The loop** is ``train_sentence_agent`` below: ``for step in job.loop()``, one update of the
  learner, one co-training step of the evaluator, then ``job.end_step``, which logs, evaluates and
  checkpoints at the cadences the job (``segrl.jobs.Job``) was given once, in ``agent_job``.
- **The update** is ``Reinforce.step`` (``segrl.agents.reinforce``): sample every decision of a
  batch of sentences, get their rewards, ``reinforce_loss``, one Adam step, the baseline's own step.
  The batched PPO's is ``BatchedPPO.step`` (``segrl.agents.ppo_batched``); SB3's PPO runs its own
  loop, with the job as callbacks (``segrl.agents.sb3.train``).
- **The rewards** come from ``env.step`` of ``VectorSentenceSegmentEnv`` (``segrl.envs.vector``),
  which asks the task's evaluator (``segrl.evaluators``: ``score`` per sentence, ``action_rewards``
  per decision) for the whole batch at once (``segrl.envs.episodes``); the evaluator is built from
  the config by ``build_task`` (``segrl.agents.task``).
- Before the loop: ``prepare_job`` (config checked, inputs read, run folder, seeds) and, on a fresh
  run, ``start_fresh`` (the evaluator pre-trained, the step-0 evaluation); after it, ``finish``.

Inputs are read and checked, and the run folder chosen, before an MLflow run starts, so bad input
leaves nothing behind. A run resumes from its folder's checkpoint (see ``segrl.jobs``); the
first Ctrl-C stops at the next step boundary with a checkpoint.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch

from segrl.agents.config import RESUMABLE_CHANGES, TrainConfig
from segrl.agents.evaluation import evaluate_agent
from segrl.agents.policies import SegmenterPolicy
from segrl.agents.segmenter import AgentSegmenter, separator_id
from segrl.agents.task import TrainingTask, build_task, pretrain_evaluator
from segrl.config import validate_config
from segrl.data import Corpus, GoldWord
from segrl.envs.vector import VectorSentenceSegmentEnv
from segrl.jobs import RUNS_ROOT, Job, RunDir
from segrl.metrics import (
    BOUNDARY_F1,
    WORD_F1,
    evaluate_word_discovery,
    evaluate_word_segmenter,
)
from segrl.runtime import resolve_device, seed_everything, set_threads
from segrl.segmentation import render
from segrl.tracking.models import log_segmenter_model
from segrl.tracking.runs import log_data, log_metrics, log_segmenter, log_text, start_run
from segrl.tracking.store import ensure_reachable

AGENT_KIND = "agent"
SEGMENTER_DIR = "segmenter"
"""Where a finished run's folder keeps the trained segmenter."""


@dataclass
class TrainResult:
    """What a finished training run leaves: its final metrics and where everything is."""

    metrics: dict[str, float]
    run_dir: Path
    run_id: str
    step: int
    resumed_from: int | None
    """The checkpoint step training resumed from (None for a fresh run)."""


class SentenceLearner(Protocol):
    """What ``train_sentence_agent`` trains with: a learner that takes a batch of whole sentences per
    update (``SentenceSegment``), as ``Reinforce`` and ``BatchedPPO`` do."""

    @property
    def sentences_per_step(self) -> int:
        """Sentences per update (the batched environment's width)."""
        ...

    @property
    def steps(self) -> int:
        """Updates in all (the job's work budget)."""
        ...

    def step(
        self, env: VectorSentenceSegmentEnv, observation: Any
    ) -> tuple[Any, dict[str, float], Any]:
        """One update: ``(next observation, stats with "reward", the segmented batch)``."""
        ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


def train_sentence_agent(
    config: TrainConfig,
    make_learner: Callable[[SegmenterPolicy, torch.device], SentenceLearner],
    corpus: Corpus | None = None,
    gold: list[GoldWord] | None = None,
    on_step: Callable[[int, dict[str, float]], bool] | None = None,
) -> TrainResult:
    """Train a segmenter policy with a learner that takes a batch of whole sentences per step
    (``SentenceSegment``): REINFORCE, the batched PPO.

    ``make_learner(policy, device)`` gives the ``SentenceLearner`` that trains ``policy``.
    """
    device, task, run = prepare_job(config, corpus, gold)
    setup = task.setup
    policy = SegmenterPolicy(
        setup.vocab_size,
        setup.n_actions,
        setup.max_len,
        config.policy,
        separator_id(task.corpus.vocab),
        reads_teacher=bool(setup.config.teacher_features),
    )
    learner = make_learner(policy.to(device), device)
    env = VectorSentenceSegmentEnv(learner.sentences_per_step, seed=config.seed, setup=setup)
    observation = env.reset()
    segmenter = AgentSegmenter(
        policy, task.corpus.vocab, config.env.hide_spaces, device, task.evaluator.teacher
    )

    def save() -> dict[str, Any]:
        return {
            "learner": learner.state_dict(),
            "evaluator": task.evaluator.state_dict(),
            "env": env.state_dict(),
        }

    def restore(state: dict[str, Any]) -> None:
        nonlocal observation
        learner.load_state_dict(state["learner"])
        task.evaluator.load_state_dict(state["evaluator"])
        observation = env.load_state_dict(state["env"])

    job = agent_job(config, run, learner.steps, save, restore, segmenter, task, on_step)
    with job:
        if job.resumed_from is None:
            start_fresh(segmenter, task, config)
        for step in job.loop():
            observation, stats, batch = learner.step(env, observation)  # the update
            stats.update({f"evaluator/{k}": v for k, v in task.evaluator.update(batch).items()})
            job.end_step(step, stats)
        metrics = job.finish(lambda step: finish(segmenter, task, run, config, step, job))
    return TrainResult(metrics, run.path, run.info["mlflow_run_id"], job.step, job.resumed_from)


def prepare_job(
    config: TrainConfig, corpus: Corpus | None, gold: list[GoldWord] | None
) -> tuple[torch.device, TrainingTask, RunDir]:
    """What every agent's job does before it builds its model: check the config and the tracking
    store, read and check the inputs, open the run folder, set the threads, seed everything."""
    validate_config(config)
    ensure_reachable()
    device = resolve_device(config.device)
    task = build_task(config, corpus, gold)
    run = open_run(config)
    set_threads(config.threads)
    seed_everything(config.seed)
    return device, task, run


def open_run(config: TrainConfig) -> RunDir:
    """The run folder of an agent's training job (``--out``, else ``runs/<name>``)."""
    default = Path(RUNS_ROOT) / (config.tracking.run_name or config.name)
    return RunDir.open(config, config.out, default, RESUMABLE_CHANGES, config.steps)


def agent_job(
    config: TrainConfig,
    run: RunDir,
    steps: int,
    save: Callable[[], dict[str, Any]],
    restore: Callable[[dict[str, Any]], None],
    segmenter: AgentSegmenter,
    task: TrainingTask,
    on_step: Callable[[int, dict[str, float]], bool] | None,
    metric_step: int = 1,
) -> Job:
    """The ``segrl.jobs.Job`` of an agent's training, whatever the agent: the config's cadences,
    the periodic evaluation (``evaluate_and_log``), MLflow's experiment, run name (the segmenter's
    name, ``config.name``, unless ``--run-name``) and tags."""
    return Job(
        run,
        config,
        steps=steps,
        experiment=config.tracking.experiment,
        run_name=config.tracking.run_name or config.name,
        save=save,
        restore=restore,
        evaluate=lambda step: evaluate_and_log(segmenter, task, step),
        tags={"segrl.agent": config.agent, "segrl.run_dir": str(run.path.resolve())},
        log_every=config.log_every,
        eval_every=config.eval_every,
        checkpoint_every=config.checkpoint_every,
        max_minutes=config.max_minutes,
        on_step=on_step,
        metric_step=metric_step,
        show=("reward", "morfessor_boundary_f1"),
        desc=config.name,
    )


def start_fresh(segmenter: AgentSegmenter, task: TrainingTask, config: TrainConfig) -> None:
    """What a fresh run (not a resumed one) does before its first step, whatever the agent: log the
    corpus settings, pre-train the evaluator on the untrained policy's segmentations (the LM
    evaluator; nothing for the others), evaluate at step 0."""
    log_data(task.corpus, config.gold.path, task.gold)
    started = time.perf_counter()
    pretrained = pretrain_evaluator(task, segmenter, config.seed)
    if pretrained:
        seconds = time.perf_counter() - started
        print(f"[{config.name}] evaluator pre-trained ({seconds:.0f}s)", flush=True)
    log_metrics({f"pretrain/{k}": v for k, v in pretrained.items()}, step=0)
    evaluate_and_log(segmenter, task, step=0)


def evaluate_and_log(segmenter: AgentSegmenter, task: TrainingTask, step: int) -> dict[str, float]:
    """Evaluate on the periodic held-out texts and gold sample; log as ``eval/...`` at ``step``."""
    utterances = task.text if task.corpus.gold_from_spaces else None
    metrics, samples = evaluate_agent(
        segmenter,
        task.heldout,
        task.references,
        task.gold_sample,
        task.text,
        task.evaluator,
        utterances,
    )
    log_metrics({f"eval/{k}": v for k, v in metrics.items()}, step=step)
    log_text(samples, f"samples/step_{step:06d}.txt")
    return metrics


def finish(
    segmenter: AgentSegmenter,
    task: TrainingTask,
    run: RunDir,
    config: TrainConfig,
    step: int,
    job: Job,
) -> dict[str, float]:
    """The final evaluation (test text, whole gold set), the segmenter saved and registered: what
    an agent's job does at its end (``Job.finish``)."""
    train_seconds = job.train_seconds
    utterances = task.final_text if task.corpus.gold_from_spaces else None
    metrics, samples = evaluate_agent(
        segmenter,
        task.final_heldout,
        task.references,
        task.gold,
        task.final_text,
        task.evaluator,
        utterances,
    )
    metrics["train_seconds"] = train_seconds
    metrics["train_steps"] = float(step)
    log_segmenter(config.name, AGENT_KIND, metrics, samples)
    saved = segmenter.save(run.path / SEGMENTER_DIR)
    log_segmenter_model(saved, config.tracking.register)
    summary = ", ".join(
        f"{key} {metrics[key]:.3f}"
        for key in (WORD_F1, BOUNDARY_F1, *(f"{name}_boundary_f1" for name in task.references))
        if key in metrics
    )
    print(f"[{config.name}] step {step}: {summary} ({train_seconds:.0f}s)", flush=True)
    log_teacher_segmentations(task, config)
    return metrics


def log_teacher_segmentations(task: TrainingTask, config: TrainConfig) -> None:
    """Where the evaluator is a co-trained ``slm``, its own segmentations of the gold words
    (Viterbi, and posterior decoding: a split where p(boundary) > 0.5) as segmenters of their own,
    child runs of the agent's, so that ``segrl compare`` shows the student beside its teacher."""
    from segrl.lm.segmenter import LM_KIND, LMSegmenter
    from segrl.lm.slm import SLM

    lm = getattr(task.evaluator, "lm", None)
    discovery = task.corpus.gold_from_spaces
    if not isinstance(lm, SLM) or not (task.gold or discovery):
        return
    found = []
    for decoding in ("viterbi", "posterior"):
        name = f"{config.name}/lm-{decoding}"
        segmenter = LMSegmenter(lm, decoding=decoding)
        with start_run(config, config.tracking.experiment, name, nested=True):
            log_data(task.corpus, config.gold.path, task.gold)
            if discovery:
                metrics = evaluate_word_discovery(segmenter.segment_words, task.final_text)
                texts = [s.replace(" ", "") for s in task.final_text[:25]]
            else:
                metrics = evaluate_word_segmenter(
                    segmenter.segment_words, task.gold, task.final_text
                )
                texts = task.final_text[:25]
            samples = "\n".join(render(segmenter.segment_sentence(s)) for s in texts)
            log_segmenter(name, LM_KIND, metrics, samples + "\n")
        headline = WORD_F1 if discovery else BOUNDARY_F1
        found.append(f"{decoding} {metrics[headline]:.3f}")
    print(f"[{config.name}] its LM's own {headline}: {', '.join(found)}", flush=True)
