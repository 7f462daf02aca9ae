"""The learned residual on Arena's Gittins order and urgency: one package for the policy, its env and its network.

:mod:`~agents.residual.priority` is the policy (``residual:PATH``: a weights file read by
:class:`ResidualWeights`, turned into multipliers of Arena's Gittins priority);
:mod:`~agents.residual.env` the same action space as a gymnasium env; and
:mod:`~agents.residual.network` the SB3 actor-critic whose mean actor is a weights file. The
trainers are ``arena-gym train --method es`` and ``--method residual-ppo``
(:mod:`arena_gym.harness.trainers`).
"""

from agents.residual.priority import RESIDUAL_FEATURES, ResidualPriority, ResidualWeights, load_residual_policy

__all__ = ["RESIDUAL_FEATURES", "ResidualPriority", "ResidualWeights", "load_residual_policy"]
