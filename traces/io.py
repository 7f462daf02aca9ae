"""Loading, saving and resolving traces: the entry points the simulator and the CLI use.

- :func:`load_trace` detects the file format from the header (:mod:`traces.formats`).
- :func:`save_trace` writes the canonical CSV atomically.
- :func:`resolve_trace` turns a TRACE spec into a :class:`Trace`:

  * ``PATH`` or ``PATH?key=value,...``: a trace file (any registered format) with loader
    options (e.g. ``testbed.csv?iteration_divisor=1``, ``cluster10.csv?seed=3,mix=testbed``,
    ``format=arena`` to skip detection);
  * ``synthetic`` or ``synthetic:key=value,...``: the built-in generator
    (``synthetic:n_jobs=200,arrival=bursty,rate_per_h=20,gpu_types=a40+a10,max_gpus=8``).

  Both accept the transform keys ``start_s``/``end_s`` (keep jobs submitted in that window,
  then rebase to the first of them), ``head`` (keep the first N jobs) and ``load`` (arrival-rate
  factor, :meth:`Trace.scale_load`), applied in that order.
"""

from __future__ import annotations

import inspect
import logging
import math
import os
import typing
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from traces.canonical import save_canonical
from traces.formats import FORMATS, GENERATORS, detect_format, get_format, resolve
from traces.options import coerce_options, parse_options
from traces.recipe import FeasibleFn, IterTimeFn
from traces.table import read_header
from traces.trace import Trace

log = logging.getLogger(__name__)

#: Options every spec accepts, applied after loading (see the module docstring).
TRANSFORM_HINTS: dict[str, object] = {"start_s": float, "end_s": float, "head": int, "load": float}
#: Arguments that come from the caller, never from text.
_CALLER_ARGS = ("path", "feasible", "iter_time")


def _accepted(fn: Callable[..., object]) -> dict[str, inspect.Parameter]:
    return {n: p for n, p in inspect.signature(fn).parameters.items() if p.kind is p.KEYWORD_ONLY}


def load_trace(
    path: str | os.PathLike[str],
    *,
    format: str | None = None,
    seed: int | np.random.SeedSequence = 0,
    feasible: FeasibleFn | None = None,
    iter_time: IterTimeFn | None = None,
    **options: object,
) -> Trace:
    """Load a trace file, detecting its format from the header unless ``format`` is given.

    ``seed``, ``feasible`` and ``iter_time`` reach the loaders that sample (ITP); ``options``
    are the format's own keyword arguments (e.g. ``iteration_divisor`` for Arena CSV).
    Times are rebased to the first submission (offset in ``Trace.time_offset_s``).
    """
    name = os.fspath(path)
    fmt = get_format(format) if format is not None else detect_format(name, read_header(name))
    loader = resolve(fmt.loader)
    accepted = _accepted(loader)
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        valid = [k for k in accepted if k not in _CALLER_ARGS]
        raise ValueError(f"unknown option(s) {', '.join(unknown)} for the {fmt.name} format; valid: {', '.join(valid)}")
    common: dict[str, object] = {"seed": seed, "feasible": feasible, "iter_time": iter_time}
    kwargs = {k: v for k, v in common.items() if k in accepted}
    kwargs.update(options)
    return loader(name, **kwargs)


def save_trace(trace: Trace, path: str | os.PathLike[str]) -> Path:
    """Write ``trace`` as canonical CSV (temporary file + rename; never clobbers on error)."""
    return save_canonical(trace, path)


def _split_spec(spec: str) -> tuple[str, str | None, str]:
    """(generator name or None, file path or None, option text)."""
    head, sep, rest = spec.partition(":")
    if head in GENERATORS and not os.path.exists(spec):
        return head, None, rest
    if not os.path.exists(spec) and "?" in spec:
        path, _, opts = spec.rpartition("?")
        return "", path, opts
    return "", spec, ""


def _apply_transforms(trace: Trace, values: Mapping[str, object], context: str) -> Trace:
    start, end = values.get("start_s"), values.get("end_s")
    if start is not None or end is not None:
        lo = float(start) if start is not None else -math.inf  # type: ignore[arg-type]
        hi = float(end) if end is not None else math.inf  # type: ignore[arg-type]
        if not lo < hi:
            raise ValueError(f"{context}: need start_s < end_s, got {lo:g}, {hi:g}")
        trace = trace.window(lo, hi).shift_to_zero()
    if values.get("head") is not None:
        n = int(values["head"])  # type: ignore[call-overload]
        if n < 1:
            raise ValueError(f"{context}: head must be >= 1, got {n}")
        trace = trace.head(n)
    if values.get("load") is not None:
        factor = float(values["load"])  # type: ignore[arg-type]
        if not (math.isfinite(factor) and factor > 0):
            raise ValueError(f"{context}: load must be > 0, got {factor:g}")
        trace = trace.scale_load(factor)
    if len(trace) == 0:
        raise ValueError(f"{context}: no jobs left after start_s/end_s/head")
    return trace


def resolve_trace(
    spec: str | os.PathLike[str],
    *,
    seed: int = 0,
    feasible: FeasibleFn | None = None,
    iter_time: IterTimeFn | None = None,
) -> Trace:
    """Turn a TRACE spec (file path or ``synthetic[:key=value,...]``) into a :class:`Trace`.

    ``seed`` is used unless the spec sets ``seed=``. Unknown keys and bad values raise a
    one-line ValueError naming the key and listing the valid keys.
    """
    spec = os.fspath(spec).strip()
    context = f"trace spec {spec!r}"
    generator, path, opts = _split_spec(spec)
    raw = parse_options(opts, context)
    transforms = {k: raw.pop(k) for k in list(raw) if k in TRANSFORM_HINTS}

    if generator:
        make = resolve(GENERATORS[generator])
        trace = make(
            raw, seed=seed, feasible=feasible, iter_time=iter_time, context=context, also_valid=tuple(TRANSFORM_HINTS)
        )
    else:
        assert path is not None
        if os.path.isdir(path):
            raise ValueError(
                f"{context}: is a directory; a TRACE is a file ({', '.join(FORMATS)} formats) or a generator"
            )
        if not os.path.isfile(path):
            raise ValueError(
                f"{context}: no such file; a TRACE is a file path ({', '.join(FORMATS)} formats) "
                f"or a generator: {', '.join(g + '[:key=value,...]' for g in GENERATORS)}"
            )
        fmt_name = raw.pop("format", None)
        fmt = get_format(fmt_name) if fmt_name is not None else detect_format(path, read_header(path))
        loader = resolve(fmt.loader)
        hints = typing.get_type_hints(loader)
        settable = {k: hints[k] for k in _accepted(loader) if k not in _CALLER_ARGS}
        values = coerce_options(raw, settable, context, ("format", *TRANSFORM_HINTS))
        option_seed = values.pop("seed", None)  # a ``seed=`` option of the spec overrides the caller's
        trace = load_trace(
            path,
            format=fmt.name,
            seed=option_seed if isinstance(option_seed, int) else seed,
            feasible=feasible,
            iter_time=iter_time,
            **values,
        )

    trace = _apply_transforms(trace, coerce_options(transforms, TRANSFORM_HINTS, context), context)
    log.debug("resolved %s: %d jobs over %.1f h", spec, len(trace), trace.span_s / 3600)
    return trace
