"""The ``segrl train --agent ppo`` job: stable-baselines3 PPO on ``CharSegment`` (one decision per
step), with the segmenter policy inside SB3 (``segrl.agents.sb3.policy``) and the project's batched
environment as SB3's ``VecEnv`` (``segrl.agents.sb3.vec_env``), so one evaluator serves every
episode. With the full rule set (``--rules full``) it is sb3-contrib's ``MaskablePPO`` with the masks
of ``segrl.envs.masks``.

A training step is one PPO iteration: ``ppo.n_steps`` steps of ``ppo.num_envs`` episodes, then the
update. SB3's metrics go to MLflow at SB3's step (decisions taken), as do the periodic evaluations;
the final evaluation and registration are REINFORCE's (``trainer.finish``).

Checkpoints (``RunDir``) hold the SB3 model zip (parameters and optimiser), the episodes in progress
as they stand, the evaluator, SB3's counters and every RNG state: a resumed run ends with the same
weights as an uninterrupted one. What differs is logging: ``rollout/ep_rew_mean`` restarts its
window of episodes, and SB3's ``train/...`` values of the iteration before the interruption are not
logged.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback

from segrl import tracking
from segrl.agents.config import TrainConfig
from segrl.agents.sb3.policy import build_sb3_model
from segrl.agents.sb3.vec_env import SegmentVecEnv
from segrl.agents.segmenter import AgentSegmenter, separator_id
from segrl.agents.trainer import TrainResult, evaluate_and_log, finish, open_job, prepare_job
from segrl.checkpoint import RNG_KEY, load_checkpoint, set_rng_state
from segrl.data import Corpus, GoldWord
from segrl.envs.vector import VectorCharSegmentEnv
from segrl.evaluators import SegmentationBatch


class EvaluatorUpdates(BaseCallback):
    """One co-training step of the evaluator per rollout, on the episodes that ended in it (as
    REINFORCE gives it the sentences of each update; fixed evaluators do nothing); its stats are
    kept for the log."""

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
    env = VectorCharSegmentEnv(config.ppo.num_envs, seed=config.seed, setup=task.setup)
    venv = SegmentVecEnv(env)
    model = build_sb3_model(config, venv, separator_id(task.corpus.vocab), device)
    policy = model.policy.features_extractor.segmenter
    segmenter = AgentSegmenter(policy, task.corpus.vocab, config.env.hide_spaces, device)
    callback = EvaluatorUpdates(venv)

    state = load_checkpoint(run.checkpoint_path, restore_rng=False) if run.has_checkpoint else None
    step, elapsed, resumed_from = 0, 0.0, None
    if state is None:
        model._last_obs = venv.reset()
        model._last_episode_starts = np.ones(venv.num_envs, dtype=bool)
    else:
        model.set_parameters(io.BytesIO(state["model"]), exact_match=True, device=device)
        task.evaluator.load_state_dict(state["evaluator"])
        model._last_obs = venv.load_state_dict(state["env"])
        model._last_episode_starts = np.asarray(state["episode_starts"])
        model.num_timesteps = state["timesteps"]
        model._n_updates = state["n_updates"]
        set_rng_state(state[RNG_KEY])  # after the model is built: SB3 seeds as it builds
        step, elapsed, resumed_from = state["step"], state["elapsed_seconds"], state["step"]

    def save() -> None:
        buffer = io.BytesIO()
        model.save(buffer)
        run.save(
            step=step,
            elapsed_seconds=elapsed + job.session_seconds,
            model=buffer.getvalue(),
            evaluator=task.evaluator.state_dict(),
            env=venv.state_dict(),
            episode_starts=np.asarray(model._last_episode_starts).copy(),
            timesteps=model.num_timesteps,
            n_updates=model._n_updates,
        )

    steps = config.ppo.steps
    rollout = config.ppo.num_envs * config.ppo.n_steps
    with open_job(config, run, segmenter, task, resumed_from, steps, on_step) as job:
        progress = job.start_progress(initial=step)
        while step < steps:
            log_now = (step + 1) % config.log_every == 0 or step + 1 == steps
            model.learn(
                total_timesteps=rollout,
                callback=callback,
                log_interval=1 if log_now else None,
                reset_num_timesteps=False,
            )
            step += 1
            progress.update(1)
            stats, callback.stats = callback.stats, {}
            if stats:
                tracking.log_metrics(
                    {f"train/evaluator/{k}": v for k, v in stats.items()}, step=model.num_timesteps
                )
            if step % config.eval_every == 0 and step < steps:
                metrics = evaluate_and_log(segmenter, task, model.num_timesteps)
                f1 = metrics.get("morfessor_boundary_f1", 0.0)
                progress.set_postfix(morfessor_f1=f"{f1:.3f}")
            if job.end_step(step, stats, save):
                break
        job.close_progress()
        model.logger.dump(model.num_timesteps)  # the last update's train/... values
        total_seconds = elapsed + job.session_seconds
        metrics = finish(segmenter, task, run, config, step, total_seconds)
    return TrainResult(metrics, run.path, run.info["mlflow_run_id"], step, resumed_from)
