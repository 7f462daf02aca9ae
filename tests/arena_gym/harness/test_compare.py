"""Compare's argument handling: trace lists with options, unique run directories, checked lists."""

from __future__ import annotations

import dataclasses

import pytest

from arena_gym.harness.cli.compare import trace_list
from arena_gym.harness.compare import CompareConfig, slug, unique_slugs
from arena_gym.harness.experiment import RunConfig


@pytest.mark.parametrize(
    "text, specs",
    [
        ("a.csv,b.csv", ["a.csv", "b.csv"]),
        ("synthetic:n_jobs=50,rate_per_h=5,philly.csv", ["synthetic:n_jobs=50,rate_per_h=5", "philly.csv"]),
        ("x.csv?head=5,load=2,synthetic", ["x.csv?head=5,load=2", "synthetic"]),
        (
            "synthetic:n_jobs=5,gpu_types=a40+a10,synthetic:seed=3",
            ["synthetic:n_jobs=5,gpu_types=a40+a10", "synthetic:seed=3"],
        ),
        (" a.csv , ,b.csv ", ["a.csv", "b.csv"]),
    ],
)
def test_trace_list_keeps_options_with_their_spec(text, specs):
    assert trace_list(text) == specs


def test_unique_slugs():
    names = unique_slugs(["data/a/x.csv", "data/b/x.csv", "synthetic:n_jobs=5", "y.csv", "Y.csv"])
    assert names["synthetic:n_jobs=5"] == "synthetic_n_jobs_5"
    assert len(set(names.values())) == 5 and names["data/a/x.csv"].startswith("x-")
    assert names["y.csv"] != names["Y.csv"] and names["y.csv"].lower() != names["Y.csv"].lower()
    assert slug("..") == "run" and unique_slugs(["a.csv", "b.csv"]) == {"a.csv": "a.csv", "b.csv": "b.csv"}


@pytest.mark.parametrize(
    "change, message",
    [
        ({"policies": ()}, "at least one of policies"),
        ({"traces": ("t", "t")}, "traces lists 't' twice"),
        ({"workers": 0}, "--workers must be >= 1"),
        ({"workers": 2, "ray": "auto"}, "--workers .* or --ray .*, not both"),
        ({"pad_reference": "srtf"}, "--pad-jct: padding reference policy 'srtf' is not among fcfs"),
        ({"reference": "arena"}, "--reference: reference policy 'arena' is not among fcfs"),
    ],
)
def test_compare_config_checks(change, message):
    good = CompareConfig(("fcfs",), ("t",), (0,), RunConfig("fcfs"), pad_reference="fcfs")
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(good, **change)
