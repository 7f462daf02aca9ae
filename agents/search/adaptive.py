"""The belief adapted to one episode: a common scale of the jobs' work, inferred from what the policy has seen.

Windows of one trace share a scale the pooled belief cannot know (Philly's jobs run about ten
times longer than the pool's, cluster08's a few times shorter). Within an episode a scheduler
sees jobs finish (their total work, exactly) and jobs run on (their attained work, a lower
bound), so it can infer that scale: the model is ``S = theta * S'`` with ``S'`` the belief's
work, ``log theta`` on a grid with a normal prior, the finished jobs' densities and the
unfinished ones' survival probabilities as the likelihood. A sampled world draws one
``log theta`` from the posterior, then every length given it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from agents.search.arrivals import JobAttributes
from agents.search.belief import WorkBelief
from arena_gym.types import JobId


@dataclass(frozen=True, slots=True)
class Observation:
    """What the policy knows of one job's work: its attributes, the work attained (iterations), and whether it finished."""

    attributes: JobAttributes
    work: float
    finished: bool


@dataclass(frozen=True)
class EpisodeScale:
    """The posterior over an episode's log work scale, on ``grid`` with a ``N(0, prior_sd^2)`` prior."""

    belief: WorkBelief
    prior_sd: float = 1.5
    grid: tuple[float, ...] = tuple(np.linspace(-5.0, 5.0, 81))

    def __post_init__(self) -> None:
        if not self.prior_sd > 0:
            raise ValueError(f"EpisodeScale.prior_sd must be > 0, got {self.prior_sd}")
        if len(self.grid) < 2:
            raise ValueError("EpisodeScale.grid needs at least two points")

    def posterior(self, seen: Mapping[JobId, Observation]) -> np.ndarray:
        """Normalised posterior weights over ``grid`` given the observations."""
        grid = np.asarray(self.grid)
        log_post = -0.5 * (grid / self.prior_sd) ** 2
        jobs = [o for o in seen.values() if o.finished or o.work > 0]
        if jobs:
            log_post = log_post + self.belief.scale_log_likelihood(
                [o.attributes for o in jobs], [o.work for o in jobs], [o.finished for o in jobs], grid
            )
        weights = np.exp(log_post - log_post.max())
        return weights / weights.sum()
