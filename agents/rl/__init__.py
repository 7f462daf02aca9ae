"""Learned scheduling agents on stable-baselines3 / sb3-contrib, and the evaluation protocol.

- :mod:`agents.rl.config`: ``TrainConfig`` and the options of both training front ends generated from it;
- :mod:`arena_gym.harness.trainers.sb3`: ``train`` and ``resume`` (``arena-gym train``, ``scripts/train_agent.py``);
- :mod:`agents.rl.policy`: ``load_sb3_policy``, the ``sb3:PATH`` Policy;
- :mod:`agents.rl.bc`: behaviour-cloning warm start from heuristics;
- :mod:`arena_gym.harness.callbacks`: validation against the heuristics, learning curve, wandb scalars;
- :mod:`arena_gym.harness.scoring`: scoring policies on fixed workloads (``Evaluator``);
- :mod:`arena_gym.harness.suites`: the named workload suites (synthetic, real-test, real-validation, shift);
- :mod:`arena_gym.harness.evaluate`: ``evaluate(EvalConfig)``, the evaluation protocol (``arena-gym evaluate``);
- :mod:`arena_gym.harness.stats`: bootstrap intervals, win counts and paired tests;
- :mod:`agents.rl.algos`: the algorithm registry (MaskablePPO, PPO, DQN) and masked greedy actions;
- :mod:`agents.rl.artifact`: saved models with the EnvConfig they were trained with;
- :mod:`agents.rl.safe_load`: loading them without unpickling anything from the file;
- :mod:`agents.rl.env_factory`: env id + overrides -> EnvConfig, envs and VecEnvs;
- :mod:`arena_gym.harness.eval_plots`: learning curve, per-workload scatter and CDF figures.

Nothing is imported here, so ``import agents.rl`` stays cheap; import the submodules. See
``docs/learned_agents.md``.
"""
