"""A built-in model family is one module in ``estimator/families/``: a temporary module joins the package,
and the estimator's catalogue registers it, the zoo builds its sizes and the estimator estimates them."""

from __future__ import annotations

import math
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import estimator.families
from arena_gym.cluster import PRESETS
from arena_gym.families import families, get_family, unregister_family
from arena_gym.types import ModelRef, best_locality
from estimator import catalogue
from estimator.perfmodel import default_perf_model
from estimator.zoo import get_model, known_models

#: The whole family: its sizes and how to build them (a GPT-style decoder of its own shapes).
FAMILY_MODULE = '''
"""Toy decoder: a GPT-style transformer at two small sizes."""

from arena_gym.families import ModelFamily
from estimator.zoo import TransformerSpec, build_transformer

FAMILY = ModelFamily(
    name="toydec",
    kind="transformer",
    sizes={
        "100M": TransformerSpec("toydec__100M", 12, 768, 12),
        "350M": TransformerSpec("toydec__350M", 24, 1024, 16),
    },
    build=build_transformer,
    optimizer_bytes=12,
)
'''


@pytest.fixture
def toydec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``estimator/families/toydec.py``, registered by the estimator's catalogue; removed afterwards."""
    (tmp_path / "toydec.py").write_text(textwrap.dedent(FAMILY_MODULE))
    monkeypatch.setattr(estimator.families, "__path__", [*estimator.families.__path__, str(tmp_path)])
    catalogue.register()
    yield
    unregister_family("toydec")
    sys.modules.pop("estimator.families.toydec", None)
    vars(estimator.families).pop("toydec", None)


def test_the_builtin_families_are_the_modules_of_the_package() -> None:
    assert [f.name for f in estimator.families.builtin()] == ["gpt", "moe", "wide_resnet"]
    assert list(families())[:3] == ["gpt", "moe", "wide_resnet"]  # registered first, in that order


def test_a_new_module_is_a_registered_family(toydec: None) -> None:
    assert "toydec" in [f.name for f in estimator.families.builtin()]
    assert get_family("toydec").optimizer_bytes == 12
    assert {"toydec__100M", "toydec__350M"} <= set(known_models())


def test_the_zoo_builds_it_and_the_estimator_estimates_it(toydec: None) -> None:
    small, large = get_model("toydec__100M"), get_model("toydec__350M")
    assert small.family == "toydec" and small.optimizer_bytes == 12
    assert 0 < small.param_count < large.param_count
    perf = default_perf_model(PRESETS["tiny"])
    one, two = (best_locality("a40", n, 2) for n in (1, 2))
    t1 = perf.iter_time(ModelRef("toydec", "100M"), 64, one)
    t2 = perf.iter_time(ModelRef("toydec", "100M"), 64, two)
    assert math.isfinite(t1) and math.isfinite(t2) and 0 < t2 < t1
    plan = perf.proxy_plan(ModelRef("toydec", "350M"), 64, two)
    assert plan is not None and plan.num_gpus == 2


def test_a_module_without_a_family_is_named_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "notes.py").write_text("SIZES = {}\n")
    monkeypatch.setattr(estimator.families, "__path__", [*estimator.families.__path__, str(tmp_path)])
    try:
        with pytest.raises(TypeError, match=r"^estimator\.families\.notes defines no FAMILY \(a ModelFamily\)$"):
            estimator.families.builtin()
    finally:
        sys.modules.pop("estimator.families.notes", None)
        vars(estimator.families).pop("notes", None)
