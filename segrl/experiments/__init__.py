"""The jobs and experiment drivers, above the models they train and below the command line: each
module here is one command's work, usable from Python, built on the job skeleton (``segrl.jobs``)
and MLflow (``segrl.tracking``), which the models, rewards and environments never import.

- ``agent_train``: ``segrl train`` (``train``, by the agent's registry entry): the job of every
  agent around its learner, and the jobs of the learners that take whole sentences
  (``train_reinforce``, ``train_ppo_batched``);
- ``sb3_train``: ``segrl train --agent ppo`` (stable-baselines3's PPO, the job as its callbacks);
- ``baseline``: ``segrl baseline`` (a classic segmenter trained, scored and logged);
- ``lm_train``: ``segrl lm train`` (``slm`` trained by marginal likelihood as a segmenter);
- ``lm_levels``: ``segrl lm levels`` (the representation-level study);
- ``units_train``: ``segrl units train`` (one training loop for every unit model);
- ``units_finetune``: ``segrl units finetune``'s config, from the trained model's;
- ``units_eval``: ``segrl units eval`` and the evaluation that ends a training run, into MLflow;
- ``units_probe``: ``segrl units probe`` (probes of saved unit models' vectors).

Importing the package imports none of them.
"""
