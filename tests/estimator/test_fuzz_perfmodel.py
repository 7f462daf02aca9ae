"""Fuzz the estimator's PerfModel entry points with generated queries: valid arguments give a
consistent answer (a time >= 0 or inf, the plan None exactly when infeasible, the proxy time the
best over stage counts, the same answer for a numpy integer batch); anything else is a
TypeError/ValueError whose one-line message names the argument."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from arena_gym.cluster import PRESETS
from arena_gym.types import GpuType, Grid, ModelRef, ResourceShape
from estimator.perfmodel import EstimatorPerfModel
from tests.fuzzing import assert_one_line, case_timeout, fuzz

MODELS = (ModelRef("gpt", "1.3B"), ModelRef("moe", "1.3B"), ModelRef("wide_resnet", "1B"), ModelRef("gpt", "350M"))
BATCHES = (1, 8, 128, 1024)
TIMEOUT_S = 20.0


@pytest.fixture(scope="module")
def perf() -> EstimatorPerfModel:
    return EstimatorPerfModel(PRESETS["arena-1280"])


def mostly(good: st.SearchStrategy, *bad: st.SearchStrategy) -> st.SearchStrategy:
    """``good`` about three times in four (the valid queries are the expensive, interesting ones)."""
    return st.integers(0, 3).flatmap(lambda i: good if i else st.one_of(*bad))


MODEL = mostly(
    st.sampled_from(MODELS).map(lambda m: ("ok", m)),
    st.sampled_from([ModelRef("gpt", "9Z"), ModelRef("llama", "7B")]).map(lambda m: ("unknown model", m)),
    st.sampled_from(["gpt__1.3B", None, 3, ("gpt", "1.3B")]).map(lambda m: ("model", m)),
)
BATCH = mostly(
    st.sampled_from(BATCHES).map(lambda b: ("ok", b) if b % 2 else ("ok", np.int64(b))),
    st.sampled_from(
        [0, -1, -(2**70), 2**24 + 1, 2**63, 1.5, 128.0, float("nan"), "128", True, None, np.float64(8), b"8"]
    ).map(lambda b: ("global_batch", b)),
)
TYPE = st.sampled_from(
    [("ok", "a100"), ("ok", "a40"), ("ok", "h100"), ("ok", "v100"), ("ok", "a10"), ("unknown GPU type", "zz")]
)
POW2 = st.sampled_from([1, 2, 4, 8])
SHAPE = mostly(
    st.tuples(TYPE, POW2, POW2).map(lambda t: (t[0][0], (t[0][1], t[1], t[2]))),
    st.sampled_from(["a100:1x4", None, (1, 4), 4]).map(lambda s: ("shape", s)),
)
METHOD = st.sampled_from(["iter_time", "dp_iter_time", "proxy_plan", "grid_iter_time", "grid_plan", "dp_estimate"])


@fuzz(1000)
@given(model=MODEL, batch=BATCH, shape=SHAPE, method=METHOD, stages=st.integers(-1, 9))
def test_queries_answer_consistently_or_name_the_argument(perf, model, batch, shape, method, stages):
    problems = [kind for kind, _ in (model, batch, shape) if kind != "ok"]
    event("valid arguments" if not problems else "bad " + problems[0])
    _, m = model
    _, b = batch
    _, s = shape
    with case_timeout(TIMEOUT_S):
        try:
            if isinstance(s, tuple) and len(s) == 3:
                s = ResourceShape(GpuType(s[0]), s[1], s[2])
            arg = Grid(s, stages) if method.startswith("grid") and isinstance(s, ResourceShape) else s
            if method.startswith("grid") and not isinstance(s, ResourceShape):
                problems = problems + ["grid"]
            result = getattr(perf, method)(m, b, arg)
        except (TypeError, ValueError) as exc:
            message = assert_one_line(exc)
            assert problems or "stages" in message, f"valid query refused: {message}"
            if problems:
                assert any(p in message for p in problems + ["grid"]), (problems, message)
            return
    assert not problems, f"{problems} accepted by {method}: {result!r}"
    time = perf.iter_time(m, b, s)
    assert time == perf.iter_time(m, int(b), s) and (time >= 0 or math.isinf(time))
    assert (perf.proxy_plan(m, b, s) is None) == math.isinf(time)
    if method == "grid_iter_time":
        assert time <= result
    if method == "grid_plan":
        assert (result is None) == math.isinf(perf.grid_iter_time(m, b, arg))
    if method == "dp_iter_time":
        assert result >= 0 or math.isinf(result)
