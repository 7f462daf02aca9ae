"""The kit policies are built from.

* :mod:`agents.common.estimates`: belief estimates with one memo cache (:class:`Estimates`, the AP
  or DP view; :class:`DpBelief`, what the SP-aware baselines plan with);
* :mod:`agents.common.workspace`: scratch occupancy for one decision (:class:`FreeGpus`; the
  :class:`Workspace` with holdings, an undo log, the resulting :class:`Decision`, and
  :class:`IndexWatcher`, kept in step with its jobs by type and count);
* :mod:`agents.common.requests`: what a job asks for and whether it can run;
* :mod:`agents.common.assignment`: preemptive priority fill, the Gavel/Sia assignment problem
  and their shared decide outline;
* :mod:`agents.common.settings`: ``__init__(name, config=None, **overrides)`` for every policy.
"""

from agents.common.assignment import Assignment, AssignmentJob, AssignmentPolicy, assign, priority_fill, room_with
from agents.common.estimates import DpBelief, Estimates, ShapeKey, ShapeOk, TypeCount, key_of, shape_key
from agents.common.requests import (
    fits_ever,
    fixed_shape,
    holding,
    order_key,
    ordered,
    remaining_seconds,
    requested,
    runnable_at_request,
)
from agents.common.settings import configure
from agents.common.workspace import Change, FreeGpus, IndexWatcher, Workspace

__all__ = [
    "Assignment",
    "AssignmentJob",
    "AssignmentPolicy",
    "Change",
    "DpBelief",
    "Estimates",
    "FreeGpus",
    "IndexWatcher",
    "ShapeKey",
    "ShapeOk",
    "TypeCount",
    "Workspace",
    "assign",
    "configure",
    "fits_ever",
    "fixed_shape",
    "holding",
    "key_of",
    "order_key",
    "ordered",
    "priority_fill",
    "remaining_seconds",
    "requested",
    "room_with",
    "runnable_at_request",
    "shape_key",
]
