"""The training job of every agent, around its learner: build the task, train with checkpoints,
evaluate as it goes, log everything to MLflow, register the final segmenter for ``segrl compare``.
``train_sentence_agent`` runs the learners that take whole sentences (``segrl.agents.reinforce``,
``segrl.agents.ppo_batched``), as ``train_reinforce`` and ``train_ppo_batched``; SB3's PPO
(``segrl.experiments.sb3_train``) shares its set-up, job, evaluation and finish.

Reading guide (``segrl train --agent reinforce``, from the command to the update):

- **The loop** is ``train_sentence_agent`` below: ``for step in job.loop()``, one update of the
  learner, one co-training step of the evaluator, then ``job.end_step``, which logs, evaluates and
  checkpoints at the cadences the job (``segrl.jobs.Job``) was given once, in ``agent_job``; what
  it trains, as the job sees it, is an ``AgentTraining`` (checkpoint, evaluation, end).
- **The update** is ``Reinforce.step`` (``segrl.agents.reinforce``): sample every decision of a
  batch of sentences, get their rewards, ``reinforce_loss``, one Adam step, the baseline's own step.
  The batched PPO's is ``BatchedPPO.step`` (``segrl.agents.ppo_batched``); SB3's PPO runs its own
  loop, with the job as callbacks (``segrl.experiments.sb3_train``).
- **The rewards** come from ``env.step`` of ``VectorSentenceSegmentEnv`` (``segrl.envs.vector``),
  which asks the task's evaluator (``segrl.evaluators``: ``score`` per sentence, ``action_rewards``
  per decision) for the whole batch at once (``segrl.envs.episodes``); the evaluator is built from
  the config by ``build_task`` (``segrl.agents.task``).
- Before the loop: ``prepare_job`` (config checked, inputs read, run folder, the config resolved
  there once, ``resolve_train_config``, seeds) and, on a fresh run, ``start_fresh`` (the evaluator
  pre-trained, the step-0 evaluation); after it, ``finish``. Everything after ``prepare_job`` reads
  the resolved config (``RunDir.config``): every option a value, as MLflow and ``config.toml``
  show it.

Inputs are read and checked, and the run folder chosen, before an MLflow run starts, so bad input
leaves nothing behind. A run resumes from its folder's checkpoint (see ``segrl.jobs``); the
first Ctrl-C stops at the next step boundary with a checkpoint.
"""

from __future__ import annotations

import copy
import importlib
import math
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

import torch

from segrl.agents.config import TrainConfig, can_read_teacher
from segrl.agents.evaluation import evaluate_agent
from segrl.agents.policies import SegmenterPolicy
from segrl.agents.ppo_batched import make_batched_ppo
from segrl.agents.reinforce import make_reinforce
from segrl.agents.segmenter import AgentSegmenter, separator_id
from segrl.agents.task import TrainingTask, build_task, pretrain_evaluator
from segrl.config import NO_LIMIT, validate_config
from segrl.data import Corpus, GoldWord, load_corpus
from segrl.envs.setup import has_decision
from segrl.envs.vector import VectorSentenceSegmentEnv
from segrl.errors import ConfigError
from segrl.evaluators.registry import STUDENT_PER_ACTION_REWARD, evaluator_patience
from segrl.jobs import RUNS_ROOT, Cadence, Job, JobStart, RunDir, TrainResult, resolve_job_tables
from segrl.lm.config import WORD_DISCOVERY_EVALUATOR_CONTEXT, resolve_lm_config
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


def train(config: TrainConfig, **options: Any) -> TrainResult:
    """Run the training job of ``config.agent`` (its ``AgentSpec.job``); ``options`` are the job's
    (``corpus``, ``gold``, ``on_step``)."""
    module, _, function = config.agent_spec.job.partition(":")
    return getattr(importlib.import_module(module), function)(config, **options)


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
    make_learner: Callable[[TrainConfig, SegmenterPolicy, torch.device], SentenceLearner],
    corpus: Corpus | None = None,
    gold: list[GoldWord] | None = None,
    on_step: Callable[[int, dict[str, float]], bool] | None = None,
) -> TrainResult:
    """Train a segmenter policy with a learner that takes a batch of whole sentences per step
    (``SentenceSegment``): REINFORCE, the batched PPO.

    ``make_learner(config, policy, device)`` gives the ``SentenceLearner`` that trains ``policy``
    as the resolved ``config`` says.
    """
    device, task, run = prepare_job(config, corpus, gold)
    config = run.config  # resolved: every option a value
    setup = task.setup
    policy = SegmenterPolicy(
        setup.vocab_size,
        setup.n_actions,
        setup.max_len,
        config.policy,
        separator_id(task.corpus.vocab),
        reads_teacher=bool(setup.config.teacher_features),
    )
    learner = make_learner(config, policy.to(device), device)
    env = VectorSentenceSegmentEnv(learner.sentences_per_step, seed=config.seed, setup=setup)
    segmenter = AgentSegmenter(
        policy, task.corpus.vocab, config.env.hide_spaces, device, task.evaluator.teacher
    )
    training = SentenceAgentTraining(segmenter, task, run, learner, env)
    job = agent_job(run, training, learner.steps, on_step)
    with job:
        if job.resumed_from is None:
            start_fresh(segmenter, task, config, training.label)
        for step in job.loop():
            training.observation, stats, batch = learner.step(env, training.observation)
            stats.update({f"evaluator/{k}": v for k, v in task.evaluator.update(batch).items()})
            job.end_step(step, stats)
        return job.finish()


class AgentTraining:
    """An agent's training as its job sees it (``segrl.jobs.Trainable``), whatever the agent: the
    periodic evaluation (``evaluate_and_log``), the end (``finish``), the evaluator's part of a
    checkpoint; each agent adds its learner's part (``SentenceAgentTraining``, SB3's
    ``SB3Training``)."""

    shown = ("reward", WORD_F1, BOUNDARY_F1, "morfessor_boundary_f1")
    """Beside the progress bar: the reward, then the latest evaluation's agreement with the gold
    (word F1 where the gold is the corpus's own spaces, boundary F1 against a gold set) and with
    Morfessor's segmentation, whichever it has."""

    def __init__(self, segmenter: AgentSegmenter, task: TrainingTask, run: RunDir):
        self.segmenter = segmenter
        self.task = task
        self.run = run
        self.label = segmenter_name(run)

    def state_dict(self) -> dict[str, Any]:
        return {"evaluator": self.task.evaluator.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.task.evaluator.load_state_dict(state["evaluator"])

    def evaluate(self, step: int, job: Job) -> dict[str, float]:
        return evaluate_and_log(self.segmenter, self.task, step)

    def finish(self, job: Job) -> dict[str, float]:
        return finish(self.segmenter, self.task, self.run, self.run.config, job.step, job)


class SentenceAgentTraining(AgentTraining):
    """``AgentTraining`` with a ``SentenceLearner`` on the batched ``SentenceSegment`` env: the
    learner and the sentences in progress (``observation``) are checkpointed too."""

    def __init__(
        self,
        segmenter: AgentSegmenter,
        task: TrainingTask,
        run: RunDir,
        learner: SentenceLearner,
        env: VectorSentenceSegmentEnv,
    ):
        super().__init__(segmenter, task, run)
        self.learner = learner
        self.env = env
        self.observation = env.reset()

    def state_dict(self) -> dict[str, Any]:
        return {
            "learner": self.learner.state_dict(),
            **super().state_dict(),
            "env": self.env.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.learner.load_state_dict(state["learner"])
        super().load_state_dict(state)
        self.observation = self.env.load_state_dict(state["env"])


def prepare_job(
    config: TrainConfig, corpus: Corpus | None, gold: list[GoldWord] | None
) -> tuple[torch.device, TrainingTask, RunDir]:
    """What every agent's job does before it builds its model: check the config and the tracking
    store, read the corpus, open the run folder (where the config is resolved: ``run.config``),
    read and check the rest of the inputs and build the task from the resolved config, set the
    threads, seed everything."""
    validate_config(config)
    ensure_reachable()
    corpus = corpus or load_corpus(config.data)
    run = open_run(config, corpus)
    with run.preparing():  # a bad input here leaves no run folder behind
        validate_config(run.config)
        task = build_task(run.config, corpus, gold)
    set_threads(run.config.threads)
    seed_everything(run.config.seed)
    return resolve_device(run.config.device), task, run


def open_run(config: TrainConfig, corpus: Corpus) -> RunDir:
    """The run folder of an agent's training job on ``corpus`` (``--out``, else ``runs/<name>``),
    and its config resolved there (``run.config``, ``resolve_train_config``)."""
    start = train_start(config, corpus)
    name = config.tracking.run_name or trained_name(
        config, resolve_train_config(config, start.at(RUNS_ROOT))
    )
    default = Path(RUNS_ROOT) / name

    def resolve(given: TrainConfig, folder: Path) -> TrainConfig:
        return resolve_train_config(given, start.at(folder))

    return RunDir.open(config, config.out, default, config.RESUMABLE, config.steps, resolve)


def train_start(config: TrainConfig, corpus: Corpus) -> JobStart:
    """What ``segrl train`` knows where it starts on ``corpus`` (``resolve_train_config``'s
    ``start``, before its run folder): its episodes are the training sentences that leave a
    decision."""
    episodes = sum(has_decision(s, config.env.hide_spaces) for s in corpus.train)
    return JobStart.of(corpus, config.device, episodes)


def resolve_train_config(config: TrainConfig, start: JobStart) -> TrainConfig:
    """``config`` as ``segrl train`` trains it, every option a value (a copy: ``config`` is not
    changed; a resolved config resolves to itself). What it leaves unset (None) becomes:

    - the LM evaluator's model (``evaluator.lm.lm``): its row of ``segrl.lm.config.LM_DEFAULTS``
      for the text it reads (``unspaced`` with hidden spaces, else the corpus's kind), with a
      lexicon only for a student that reads its teacher (``can_read_teacher``) and, with hidden
      spaces, on a segmented corpus (the lexicon is drawn from its unspaced utterances; without
      one the evaluator with hidden spaces has the LSTM context,
      ``WORD_DISCOVERY_EVALUATOR_CONTEXT``); its reward variant
      (``reward_variant``): for a policy that reads its teacher, per action,
      ``STUDENT_PER_ACTION_REWARD`` (the description length), else the reward mode's first;
      ``pretrain_steps``: all of ``pretrain_epochs`` over the ``start.texts`` episodes;
      ``cache_dir``: Morfessor's cache in use;
    - whether the policy reads its teacher (``env.teacher_features``): where it can and the LM
      evaluator's ``slm`` has a lexicon (on a word list, by default) or the spaces are hidden
      (``EvaluatorConfig.teaches_by_default``). A lexicon's teacher is confident and decides by
      whole words: a student that reads only the characters collapsed to no splits or fell
      0.03-0.38 below it, one that reads its log-odds matches it
      (docs/studies/2026-11-26-teacher.md); on text without spaces one that reads only the
      characters fell 0.01-0.05 below its teacher on Brent, one that reads it passed it
      (docs/studies/2026-12-06-words-student.md);
    - REINFORCE's entropy bonus and per-action gradient (``ReinforceConfig``), PPO's entropy bonus,
      discount and advantage standardisation (``PPOConfig``), for the reward mode;
    - the device and threads the job runs with, no time limit (``NO_LIMIT``), and the tables of
      every job (``segrl.jobs.resolve_job_tables``: the run folder, the corpus and gold set by
      their names, the run's name: ``name``).
    """
    from segrl.baselines.morfessor import default_cache_dir  # Morfessor's package, only here

    config = copy.deepcopy(config)
    mode = config.env.reward
    lm = config.evaluator.lm
    lm_options = lm.lm
    hidden = config.env.hide_spaces
    if lm_options.lexicon_size is None and not (
        can_read_teacher(config) and (start.spaces_are_gold or not hidden)
    ):  # a lexicon only for a student reading it, with hidden spaces drawn from utterances
        lm_options = replace(lm_options, lexicon_size=0)
    if hidden and lm_options.context is None and lm_options.lexicon_size == 0:
        lm_options = replace(lm_options, context=WORD_DISCOVERY_EVALUATOR_CONTEXT)
    lm_options = resolve_lm_config(
        lm_options, "unspaced" if hidden else start.corpus_kind, "evaluator"
    )
    if hidden and lm_options.lexicon_size and not start.spaces_are_gold:
        raise ConfigError(
            f"evaluator.lm.lm.lexicon_size = {lm_options.lexicon_size} with hidden spaces on "
            f"{config.data.corpus or 'the bundled corpus'}: the lexicon would be drawn from the "
            "corpus's words, whose edges are the word boundaries to discover; give a segmented "
            "corpus (segmented:PATH: the lexicon is drawn from its utterances without their "
            "spaces) or leave it out (0)"
        )
    pretrain_steps = lm.pretrain_steps
    if pretrain_steps is None:
        pretrain_steps = lm.pretrain_epochs * math.ceil(start.texts / lm.batch_size)
    lm = replace(lm, lm=lm_options, pretrain_steps=pretrain_steps)
    lm = replace(lm, patience=evaluator_patience(lm, config.env.hide_spaces))
    cache_dir = config.evaluator.cache_dir
    evaluator = replace(
        config.evaluator,
        lm=lm,
        cache_dir=str(default_cache_dir()) if cache_dir is None else cache_dir,
    )
    teacher = config.env.teacher_features
    if teacher is None:
        teacher = can_read_teacher(config) and evaluator.teaches_by_default(config.env.hide_spaces)
    variant = lm.reward_variant
    if variant is None:
        student = evaluator.spec.lm and teacher and mode == "per-action"
        variant = STUDENT_PER_ACTION_REWARD if student else lm.variant(mode)
    evaluator = replace(evaluator, lm=replace(lm, reward_variant=variant))
    rewarded = replace(config, evaluator=evaluator)  # the per-action gradient reads its reward
    resolved = replace(
        rewarded,
        env=replace(config.env, teacher_features=teacher),
        reinforce=replace(
            config.reinforce,
            entropy_coef=config.reinforce.entropy(mode),
            per_action_gradient=rewarded.per_action_gradient(),
        ),
        ppo=replace(
            config.ppo,
            ent_coef=config.ppo.entropy(mode),
            gamma=config.ppo.discount(mode),
            normalize_advantages=config.ppo.normalize(mode),
        ),
        device=start.device,
        threads=start.threads if config.threads is None else config.threads,
        max_minutes=float(NO_LIMIT) if config.max_minutes is None else config.max_minutes,
    )
    return resolve_job_tables(resolved, start, trained_name(config, resolved))


def segmenter_name(run: RunDir) -> str:
    """The name of the segmenter an agent's run trains (``TrainConfig.name``, in ``segrl compare``):
    of the config as asked (``run.requested``), where an option left to its default names nothing
    (the resolved config says ``env.teacher_features`` where the policy reads its teacher by
    default), but with the LM's reward variant it was trained with (``resolve_train_config``
    decides it by the corpus)."""
    return trained_name(run.requested, run.config)


def trained_name(requested: TrainConfig, resolved: TrainConfig) -> str:
    """``requested``'s name with the LM reward variant ``resolved`` trains with (which
    ``resolve_train_config`` decides by the corpus where none was asked for)."""
    lm = replace(requested.evaluator.lm, reward_variant=resolved.evaluator.lm.reward_variant)
    return replace(requested, evaluator=replace(requested.evaluator, lm=lm)).name


def agent_job(
    run: RunDir,
    training: AgentTraining,
    steps: int,
    on_step: Callable[[int, dict[str, float]], bool] | None,
    metric_step: int = 1,
) -> Job:
    """The ``segrl.jobs.Job`` of an agent's training, whatever the agent: the (resolved) config's
    budget (``steps``) and cadences, MLflow's tags (the run's experiment and name, the segmenter's
    name unless ``--run-name``, are the resolved config's)."""
    config = run.config
    cadence = Cadence(
        steps,
        log_every=config.log_every,
        eval_every=config.eval_every,
        checkpoint_every=config.checkpoint_every,
        max_minutes=config.max_minutes,
        metric_step=metric_step,
    )
    tags = {"segrl.agent": config.agent, "segrl.run_dir": str(run.path.resolve())}
    return Job(run, training, cadence, tags=tags, on_step=on_step)


def start_fresh(
    segmenter: AgentSegmenter, task: TrainingTask, config: TrainConfig, name: str
) -> None:
    """What a fresh run (not a resumed one) does before its first step, whatever the agent: log the
    corpus settings, pre-train the evaluator on the untrained policy's segmentations (the LM
    evaluator; nothing for the others), evaluate at step 0."""
    log_data(task.corpus, config.gold.path, task.gold)
    started = time.perf_counter()
    pretrained = pretrain_evaluator(task, segmenter, config.seed)
    if pretrained:
        seconds = time.perf_counter() - started
        print(f"[{name}] evaluator pre-trained ({seconds:.0f}s)", flush=True)
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
    name = segmenter_name(run)
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
    log_segmenter(name, AGENT_KIND, metrics, samples)
    saved = segmenter.save(run.path / SEGMENTER_DIR)
    log_segmenter_model(saved, config.tracking.register)
    summary = ", ".join(
        f"{key} {metrics[key]:.3f}"
        for key in (WORD_F1, BOUNDARY_F1, *(f"{name}_boundary_f1" for name in task.references))
        if key in metrics
    )
    print(f"[{name}] step {step}: {summary} ({train_seconds:.0f}s)", flush=True)
    log_teacher_segmentations(task, config, name)
    return metrics


def log_teacher_segmentations(task: TrainingTask, config: TrainConfig, name: str) -> None:
    """The evaluator's own segmentations of the gold words (``Evaluator.own_segmenters``: a
    co-trained ``slm``'s Viterbi and posterior decodings) as segmenters of their own, child runs
    of the agent ``name``'s, so that ``segrl compare`` shows the student beside its teacher."""
    segmenters = task.evaluator.own_segmenters()
    discovery = task.corpus.gold_from_spaces
    if not segmenters or not (task.gold or discovery):
        return
    found = []
    for suffix, segmenter in segmenters.items():
        child = f"{name}/{suffix}"
        with start_run(config, config.tracking.experiment, child, nested=True):
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
            log_segmenter(child, segmenter.kind, metrics, samples + "\n")
        headline = WORD_F1 if discovery else BOUNDARY_F1
        found.append(f"{suffix} {metrics[headline]:.3f}")
    print(f"[{name}] its evaluator's own {headline}: {', '.join(found)}", flush=True)


def train_reinforce(
    config: TrainConfig,
    corpus: Corpus | None = None,
    gold: list[GoldWord] | None = None,
    on_step: Callable[[int, dict[str, float]], bool] | None = None,
) -> TrainResult:
    """The ``segrl train --agent reinforce`` job (``train_sentence_agent`` with ``Reinforce`` as
    the learner): returns the final metrics and where everything is.

    ``on_step(step, stats)`` is called after every update; returning True stops training there as a
    Ctrl-C does (checkpoint, then ``TrainingInterrupted``).
    """

    return train_sentence_agent(config, make_reinforce, corpus, gold, on_step)


def train_ppo_batched(
    config: TrainConfig,
    corpus: Corpus | None = None,
    gold: list[GoldWord] | None = None,
    on_step: Callable[[int, dict[str, float]], bool] | None = None,
) -> TrainResult:
    """The ``segrl train --agent ppo-batched`` job: REINFORCE's job (run folder, checkpoints and
    resumption, MLflow logging, evaluation, registration) with the batched PPO as the learner."""

    return train_sentence_agent(config, make_batched_ppo, corpus, gold, on_step)
