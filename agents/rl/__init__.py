"""Learned scheduling agents on stable-baselines3 / sb3-contrib.

- :mod:`agents.rl.train`: ``TrainConfig`` and ``train`` (``arena-gym train``, ``scripts/train_agent.py``);
- :mod:`agents.rl.policy`: ``load_sb3_policy``, the ``sb3:PATH`` Policy;
- :mod:`agents.rl.bc`: behaviour-cloning warm start from a heuristic;
- :mod:`agents.rl.callbacks`: evaluation against the heuristics, learning curve, wandb scalars;
- :mod:`agents.rl.evaluate`: validation workloads and evaluation tables;
- :mod:`agents.rl.algos`: the algorithm registry (MaskablePPO, PPO, DQN) and masked greedy actions;
- :mod:`agents.rl.artifact`: saved models with the EnvConfig they were trained with;
- :mod:`agents.rl.safe_load`: loading them without unpickling anything from the file;
- :mod:`agents.rl.env_factory`: env id + overrides -> EnvConfig, envs and VecEnvs;
- :mod:`agents.rl.plots`: the learning-curve figure.

Nothing is imported here, so ``import agents.rl`` stays cheap; import the submodules.
"""
