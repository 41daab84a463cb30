"""The ``segrl train --agent ppo`` job: stable-baselines3 PPO on ``CharSegment`` (one decision per
step), with the segmenter policy inside SB3 (``segrl.agents.sb3.policy``) and the project's batched
environment as SB3's ``VecEnv`` (``segrl.agents.sb3.vec_env``), so one evaluator serves every
episode. With the full rule set (``--rules full``) it is sb3-contrib's ``MaskablePPO`` with the masks
of ``segrl.envs.masks``.

The whole budget is one ``model.learn`` call; the job (``segrl.jobs.Job``) rides along as SB3
callbacks. A job step is one PPO iteration: ``ppo.n_steps`` steps of ``ppo.num_envs`` episodes
(a rollout), then the update.

- ``EvaluatorUpdates``: after each rollout (``_on_rollout_end``), one co-training step of the
  evaluator on the episodes that ended in it.
- ``JobSteps``: after each update (at the next rollout's start, or at the end of training), the
  job's ``end_step``: the evaluator's stats logged, the periodic evaluation and the checkpoint where
  due; once the job must stop (Ctrl-C, ``on_step``, the time limit), ``_on_step`` returns False and
  ``learn`` returns at once (the one environment step it took after the checkpoint is not kept).

SB3's metrics go to MLflow at SB3's step (decisions taken), as do the job's
(``MlflowOutputFormat``); the final evaluation and registration are REINFORCE's
(``segrl.experiments.agent_train.finish``).

Checkpoints (``RunDir``) hold the SB3 model zip (parameters and optimiser), the episodes in progress
as they stand, the evaluator and every RNG state. A resumed run loads the zip into a freshly built
model, hands SB3 the episodes in progress through the environment's ``reset``, and continues with
``reset_num_timesteps=False`` from ``num_timesteps`` at the checkpoint: it ends with the same weights
as an uninterrupted one. What differs is logging: ``rollout/ep_rew_mean`` restarts its window of
episodes, SB3's ``train/n_updates`` and ``time/iterations`` count this session's updates, and SB3's
``train/...`` values of the iteration before the interruption are not logged.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import KVWriter

from segrl.agents.config import TrainConfig
from segrl.agents.sb3.policy import build_sb3_model
from segrl.agents.sb3.vec_env import SegmentVecEnv
from segrl.agents.segmenter import AgentSegmenter, separator_id
from segrl.agents.task import TrainingTask
from segrl.data import Corpus, GoldWord
from segrl.envs.vector import VectorCharSegmentEnv
from segrl.evaluators import SegmentationBatch
from segrl.experiments.agent_train import AgentTraining, agent_job, prepare_job, start_fresh
from segrl.jobs import Job, RunDir, TrainResult
from segrl.tracking.runs import log_metrics


class EvaluatorUpdates(BaseCallback):
    """One co-training step of the evaluator per rollout, on the episodes that ended in it (as
    REINFORCE gives it the sentences of each update; fixed evaluators do nothing); its stats are
    kept for the job's log."""

    def __init__(self, venv: SegmentVecEnv):
        super().__init__()
        self.venv = venv
        self.finished: list[SegmentationBatch] = []
        self.stats: dict[str, float] = {}

    def _on_step(self) -> bool:
        if self.venv.finished_batch is not None:
            self.finished.append(self.venv.finished_batch)
        return True

    def _on_rollout_end(self) -> None:
        if self.finished:
            self.stats = self.venv.evaluator.update(concatenate(self.finished))
            self.finished = []


class JobSteps(BaseCallback):
    """The job's ``end_step`` after every PPO iteration (see the module docstring): a job step is
    ``rollout`` decisions, so after the update of step ``k`` SB3 has taken ``k * rollout``."""

    def __init__(self, job: Job, rollout: int, evaluator_updates: EvaluatorUpdates):
        super().__init__()
        self.job = job
        self.rollout = rollout
        self.evaluator_updates = evaluator_updates

    def _end_iteration(self) -> None:
        step = self.model.num_timesteps // self.rollout
        if step > self.job.step and not self.job.ending:
            stats, self.evaluator_updates.stats = self.evaluator_updates.stats, {}
            self.job.end_step(step, {f"evaluator/{k}": v for k, v in stats.items()})

    def _on_rollout_start(self) -> None:
        self._end_iteration()

    def _on_step(self) -> bool:
        return not self.job.ending

    def _on_training_end(self) -> None:
        self._end_iteration()


def concatenate(batches: Sequence[SegmentationBatch]) -> SegmentationBatch:
    """The rows of ``batches`` (of one width) as one batch."""
    return SegmentationBatch(
        sentences=[s for batch in batches for s in batch.sentences],
        texts=[t for batch in batches for t in batch.texts],
        ids=np.concatenate([batch.ids for batch in batches]),
        lengths=np.concatenate([batch.lengths for batch in batches]),
        decisions=np.concatenate([batch.decisions for batch in batches]),
        free_mask=np.concatenate([batch.free_mask for batch in batches]),
        word_boundary_mask=np.concatenate([batch.word_boundary_mask for batch in batches]),
        hide_spaces=batches[0].hide_spaces,
    )


def train_ppo(
    config: TrainConfig,
    corpus: Corpus | None = None,
    gold: list[GoldWord] | None = None,
    on_step: Callable[[int, dict[str, float]], bool] | None = None,
) -> TrainResult:
    """Train a segmenter policy with SB3 PPO as ``config`` says; returns the final metrics.

    ``on_step(step, stats)`` is called after every iteration; returning True stops training there
    as a Ctrl-C does (checkpoint, then ``TrainingInterrupted``).
    """
    device, task, run = prepare_job(config, corpus, gold)
    config = run.config  # resolved: every option a value
    env = VectorCharSegmentEnv(config.ppo.num_envs, seed=config.seed, setup=task.setup)
    venv = SegmentVecEnv(env)
    model = build_sb3_model(
        config, venv, separator_id(task.corpus.vocab), device, [MlflowOutputFormat()]
    )
    policy = model.policy.features_extractor.segmenter
    segmenter = AgentSegmenter(policy, task.corpus.vocab, config.env.hide_spaces, device)
    rollout = config.ppo.num_envs * config.ppo.n_steps
    training = SB3Training(segmenter, task, run, model, venv, rollout)
    steps = config.ppo.steps
    job = agent_job(run, training, steps, on_step, rollout)
    with job:
        if job.resumed_from is None:
            start_fresh(segmenter, task, config, training.label)
        evaluator_updates = EvaluatorUpdates(venv)
        model.learn(
            total_timesteps=(steps - job.step) * rollout,
            callback=[evaluator_updates, JobSteps(job, rollout, evaluator_updates)],
            log_interval=config.log_every,
            reset_num_timesteps=False,
        )
        job.raise_if_interrupted()
        model.logger.dump(model.num_timesteps)  # the last update's train/... values
        return job.finish()


class SB3Training(AgentTraining):
    """``AgentTraining`` with SB3's PPO: the model's zip (parameters and optimiser) and the
    episodes in progress are checkpointed too."""

    def __init__(
        self,
        segmenter: AgentSegmenter,
        task: TrainingTask,
        run: RunDir,
        model: Any,
        venv: SegmentVecEnv,
        rollout: int,
    ):
        super().__init__(segmenter, task, run)
        self.model = model
        self.venv = venv
        self.rollout = rollout

    def state_dict(self) -> dict[str, Any]:
        buffer = io.BytesIO()
        self.model.save(buffer)
        return {"model": buffer.getvalue(), **super().state_dict(), "env": self.venv.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        device = self.segmenter.device
        self.model.set_parameters(io.BytesIO(state["model"]), exact_match=True, device=device)
        super().load_state_dict(state)
        self.venv.load_state_dict(state["env"])  # SB3's reset at the start of learn continues them
        self.model.num_timesteps = state["step"] * self.rollout


class MlflowOutputFormat(KVWriter):
    """SB3 logger output: every numeric value to the active MLflow run, at SB3's step (the
    environment steps taken, i.e. decisions)."""

    def write(
        self, key_values: dict[str, Any], key_excluded: dict[str, tuple[str, ...]], step: int = 0
    ) -> None:
        metrics = {
            key: float(value)
            for key, value in key_values.items()
            if isinstance(value, (int, float, np.integer, np.floating))
            and not isinstance(value, bool)
            and "mlflow" not in (key_excluded.get(key) or ())
        }
        if metrics:
            log_metrics(metrics, step=step)

    def close(self) -> None:
        pass
