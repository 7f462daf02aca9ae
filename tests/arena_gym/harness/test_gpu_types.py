"""Requested GPU types against the hardware catalogue and the cluster."""

from __future__ import annotations

import logging

import pytest

from arena_gym.cluster import PRESETS
from arena_gym.harness.gpu_types import check_catalogue, check_requested_types, missing_types
from tests.helpers import job

TINY = PRESETS["tiny"]


def test_catalogue_check_names_the_job():
    check_catalogue([job("a", 0, 10, "a40", 1), job("b", 0, 10, "V100-32GB", 1)], "t.csv")
    with pytest.raises(
        ValueError,
        match=r"^t.csv: job 'b' requests GPU type 'zz', which is not in the hardware catalogue \(known: a10, ",
    ):
        check_catalogue([job("a", 0, 10, "a40", 1), job("b", 0, 10, "zz", 1)], "t.csv")


def test_missing_types_are_counted_warned_or_refused(caplog):
    jobs = [
        job("a", 0, 10, "a40", 1),
        job("b", 1, 10, "h100", 1),
        job("c", 2, 10, "h100", 2),
        job("d", 3, 10, "v100", 1),
    ]
    assert {t: [j.job_id for j in v] for t, v in missing_types(jobs, TINY).items()} == {
        "h100": ["b", "c"],
        "v100": ["d"],
    }
    with caplog.at_level(logging.WARNING):
        assert check_requested_types(jobs, TINY, strict=False, source="t.csv") == 3
    assert (
        "t.csv: 3 job(s) request GPU types that cluster 'tiny' lacks (h100: 2 (first 'b'); v100: 1 (first 'd'))"
        in caplog.text
    )
    with pytest.raises(ValueError, match="cluster 'tiny' lacks"):
        check_requested_types(jobs, TINY, strict=True, source="t.csv")
    assert check_requested_types(jobs[:1], TINY, strict=True, source="t.csv") == 0
