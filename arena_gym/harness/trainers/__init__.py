"""The trainers of the learned agents and the registry of ``arena-gym train --method`` (also ``arena-gym tune``'s targets).

A method has a config dataclass, runs into an output directory and returns its best
validation selection score (:mod:`arena_gym.harness.selection`: the geometric-mean padded-JCT
ratio to Arena, lower is better), which a study minimises. Each lives beside its trainer, and this
module names them without importing them (a method imports only what it runs: no torch for ``es``):

- ``sb3``: a stable-baselines3 agent on the slot action space (:mod:`arena_gym.harness.trainers.sb3`);
- ``es``: the residual on Arena's Gittins order, urgency and sizing by evolution strategies
  (:mod:`~arena_gym.harness.trainers.es`);
- ``residual-ppo``: PPO fine-tuning of a residual (:mod:`~arena_gym.harness.trainers.residual_ppo`);
- ``expert-iteration``: DAgger of a slot agent with a search teacher (:mod:`arena_gym.harness.trainers.expert_iteration`);
- ``policy-iteration``: the residual improved by a lookahead over its perturbations and distilled back
  (:mod:`~arena_gym.harness.trainers.policy_iteration`).
"""

#: Method name -> ``module:attr`` of its :class:`arena_gym.harness.tune.TuneTarget` (``sb3``: ``arena-gym train``'s default).
METHODS: dict[str, str] = {
    "sb3": "arena_gym.harness.trainers.sb3:SB3",
    "es": "arena_gym.harness.trainers.es:ES",
    "residual-ppo": "arena_gym.harness.trainers.residual_ppo:RESIDUAL_PPO",
    "expert-iteration": "arena_gym.harness.trainers.expert_iteration:EXPERT_ITERATION",
    "policy-iteration": "arena_gym.harness.trainers.policy_iteration:POLICY_ITERATION",
}
#: The methods' names before they were methods: ``arena-gym tune --target`` still takes them (studies keep their name).
FORMER_NAMES: dict[str, str] = {"residual": "es", "ppo": "sb3"}
