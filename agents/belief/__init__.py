"""The statistical model a non-clairvoyant planner samples from: jobs' unknown total work, arrivals and the episode's scale.

:mod:`~agents.belief.model` holds :class:`WorkBelief` (per-group distributions of total work,
conditioned on attained work, and their Gittins index: :mod:`~agents.belief.kernels`), with
its reference iteration times (:mod:`~agents.belief.references`) and arrival model
(:mod:`~agents.belief.arrivals`); :mod:`~agents.belief.adaptive` infers an episode's work
scale from the jobs seen; :mod:`~agents.belief.files` reads and writes belief files and loads
the packaged ones (``real``: the train split of the real traces; ``synthetic``: the
generator), which ``arena-gym fit-belief`` refits (:mod:`arena_gym.harness.belief_fit`).
"""

from agents.belief.adaptive import EpisodeLog, EpisodeScale
from agents.belief.arrivals import ArrivalModel, JobAttributes, fresh_ids
from agents.belief.files import DATA_DIR, default_belief, load_belief, read_belief, save_belief
from agents.belief.kernels import GittinsTable, WorkGroup, gittins_on_grid
from agents.belief.model import KINDS, Candidate, Provenance, WorkBelief
from agents.belief.references import JobLike, ReferenceTable

__all__ = [
    "DATA_DIR",
    "KINDS",
    "ArrivalModel",
    "Candidate",
    "EpisodeLog",
    "EpisodeScale",
    "GittinsTable",
    "JobAttributes",
    "JobLike",
    "Provenance",
    "ReferenceTable",
    "WorkBelief",
    "WorkGroup",
    "default_belief",
    "fresh_ids",
    "gittins_on_grid",
    "load_belief",
    "read_belief",
    "save_belief",
]
