"""Workloads: one canonical trace schema, loaders for public formats, seeded generators.

``load_trace`` reads canonical, Arena-artifact and ITP/ElasticFlow CSV files (format detected
from the header), ``synthetic`` generates seeded workloads with the Arena recipe's job mix,
and ``resolve_trace`` turns a CLI TRACE spec (a path or ``synthetic:key=value,...``) into a
:class:`Trace`. See ``docs/traces.md``.
"""

from traces.io import load_trace, resolve_trace, save_trace
from traces.synthetic import SyntheticConfig, synthetic
from traces.trace import Trace

__all__ = ["SyntheticConfig", "Trace", "load_trace", "resolve_trace", "save_trace", "synthetic"]
