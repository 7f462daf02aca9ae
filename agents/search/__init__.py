"""Search policies and what they plan with: the belief over jobs' unknown total work and the arrival model.

A non-clairvoyant planner forks sampled worlds from a snapshot: each unfinished job's total
work is drawn from :class:`WorkBelief` given what it has attained, and future arrivals from
its :class:`ArrivalModel` (never the trace's real future). :func:`default_belief` loads the
packaged beliefs (``real``: the train split of the real traces; ``synthetic``: the
generator); :mod:`agents.search.fitting` refits them (``python scripts/fit_belief.py``).
"""

from agents.search.arrivals import ArrivalModel, JobAttributes, fresh_ids
from agents.search.belief import (
    Candidate,
    GittinsTable,
    Provenance,
    ReferenceTable,
    WorkBelief,
    WorkGroup,
    default_belief,
    gittins_on_grid,
)

__all__ = [
    "ArrivalModel",
    "Candidate",
    "GittinsTable",
    "JobAttributes",
    "Provenance",
    "ReferenceTable",
    "WorkBelief",
    "WorkGroup",
    "default_belief",
    "fresh_ids",
    "gittins_on_grid",
]
