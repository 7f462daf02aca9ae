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
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from arena_gym.fields import Problems, check_fields, hints_of
from traces.canonical import save_canonical
from traces.formats import FORMATS, GENERATORS, detect_format, get_format, resolve
from traces.options import coerce_options, parse_options
from traces.recipe import FeasibleFn, IterTimeFn
from traces.table import read_header
from traces.trace import Trace

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Transforms:
    """The options every spec accepts, applied after loading in this order (see the module docstring);
    None: not given."""

    start_s: float | None = None
    end_s: float | None = None
    head: int | None = None
    load: float | None = None

    def __post_init__(self) -> None:
        check_fields(self)
        problems = Problems()
        if self.start_s is not None or self.end_s is not None:
            lo, hi = self.window
            problems.require(lo < hi, f"need start_s < end_s, got {lo:g}, {hi:g}")
        if self.head is not None:
            problems.require(self.head >= 1, f"head must be >= 1, got {self.head}")
        if self.load is not None:
            problems.require(math.isfinite(self.load) and self.load > 0, f"load must be > 0, got {self.load:g}")
        problems.raise_if_any()

    @classmethod
    def from_options(cls, options: Mapping[str, str], context: str) -> Transforms:
        """The transforms of a spec's raw ``key=value`` options; ValueError (one line) after ``context``.

        A value is read as its field's type without the None (``head=none`` is refused: leave the key out).
        """
        given = {name: typing.get_args(hint)[0] for name, hint in hints_of(cls).items()}
        values = coerce_options(options, given, context)
        try:
            return cls(**values)  # type: ignore[arg-type]
        except ValueError as exc:
            raise ValueError(f"{context}: {exc}") from None

    @property
    def window(self) -> tuple[float, float]:
        """The submit-time window ``[start_s, end_s)`` kept (unbounded where not given)."""
        return (
            -math.inf if self.start_s is None else self.start_s,
            math.inf if self.end_s is None else self.end_s,
        )

    def apply(self, trace: Trace) -> Trace:
        """``trace`` cut to the window (then rebased to its first job), to its first ``head`` jobs, its load scaled."""
        if self.start_s is not None or self.end_s is not None:
            trace = trace.window(*self.window).shift_to_zero()
        if self.head is not None:
            trace = trace.head(self.head)
        if self.load is not None:
            trace = trace.scale_load(self.load)
        return trace


#: The keys of :class:`Transforms`, in a spec beside the source's own options.
TRANSFORM_KEYS = tuple(hints_of(Transforms))
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
    transforms = Transforms.from_options({k: raw.pop(k) for k in list(raw) if k in TRANSFORM_KEYS}, context)

    if generator:
        make = resolve(GENERATORS[generator])
        trace = make(raw, seed=seed, feasible=feasible, iter_time=iter_time, context=context, also_valid=TRANSFORM_KEYS)
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
        values = coerce_options(raw, settable, context, ("format", *TRANSFORM_KEYS))
        option_seed = values.pop("seed", None)  # a ``seed=`` option of the spec overrides the caller's
        trace = load_trace(
            path,
            format=fmt.name,
            seed=option_seed if isinstance(option_seed, int) else seed,
            feasible=feasible,
            iter_time=iter_time,
            **values,
        )

    trace = transforms.apply(trace)
    if len(trace) == 0:
        raise ValueError(f"{context}: no jobs left after start_s/end_s/head")
    log.debug("resolved %s: %d jobs over %.1f h", spec, len(trace), trace.span_s / 3600)
    return trace
