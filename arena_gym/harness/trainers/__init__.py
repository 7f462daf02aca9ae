"""The trainers of the learned agents and the registry of ``arena-gym train --method`` (also ``arena-gym tune``'s targets).

The methods themselves are in :mod:`~arena_gym.harness.trainers.methods`; this module names them
without importing them (no torch until one runs).
"""

#: Method name -> ``module:attr`` of its :class:`arena_gym.harness.tune.TuneTarget` (``sb3``: ``arena-gym train``'s default).
METHODS: dict[str, str] = {
    "sb3": "arena_gym.harness.trainers.methods:SB3",
    "es": "arena_gym.harness.trainers.methods:ES",
    "residual-ppo": "arena_gym.harness.trainers.methods:RESIDUAL_PPO",
    "expert-iteration": "arena_gym.harness.trainers.methods:EXPERT_ITERATION",
    "policy-iteration": "arena_gym.harness.trainers.methods:POLICY_ITERATION",
}
#: The methods' names before they were methods: ``arena-gym tune --target`` still takes them (studies keep their name).
FORMER_NAMES: dict[str, str] = {"residual": "es", "ppo": "sb3"}
