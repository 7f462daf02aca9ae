"""Every committed profile loads to what the reader gave before it read through :mod:`arena_gym.fields`
(a profile committed since, to what it gave when committed).

Per file: (version, models, compute curves, grouped curves, order curves, collective tables, the first 16 hex
digits of the SHA-256 of the profile written again), as the earlier hand-written reader loaded it.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from estimator.profile import Profile, load_profile

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmarks" / "results"
EXPECTED = {
    "live_ab/live_ab-profile-cpu-2.json": (5, 2, 8, 14, 4, 5, "b31c78c47f8b6d3f"),
    "live_ab/live_ab-profile-cpu-2-ee2f47c.json": (5, 2, 8, 14, 4, 5, "f73910b4b7c5f165"),
    "profiler/bench_profiler_interleaved-profile-pass1.json": (3, 2, 8, 14, 0, 5, "64858184dcecf5e0"),
    "profiler/bench_profiler_interleaved-profile-pass2.json": (3, 2, 8, 14, 0, 5, "e745f826144365eb"),
    "profiler/bench_profiler_interleaved-profile-pass3.json": (3, 2, 8, 14, 0, 5, "be4ef668447d2ecd"),
    "profiler/bench_profiler_interleaved_repeat-profile-pass1-repeats3.json": (3, 2, 8, 14, 0, 5, "0cb8ab5590ff6bdc"),
    "profiler/bench_profiler_interleaved_repeat-profile-pass1.json": (3, 2, 8, 14, 0, 5, "4a1bb9bf67691b2a"),
    "profiler/bench_profiler_interleaved_repeat-profile-pass2-repeats3.json": (3, 2, 8, 14, 0, 5, "9cee4e07aa3054b8"),
    "profiler/bench_profiler_interleaved_repeat-profile-pass2.json": (3, 2, 8, 14, 0, 5, "679d5c4f66a66c1e"),
    "profiler/bench_profiler_interleaved_repeat-profile-pass3-repeats3.json": (3, 2, 8, 14, 0, 5, "e44d4e593d69ab6f"),
    "profiler/bench_profiler_interleaved_repeat-profile-pass3.json": (3, 2, 8, 14, 0, 5, "9024a5162ae482d2"),
    "profiler/bench_profiler_v4-profile-pass1.json": (4, 2, 8, 14, 4, 5, "5d1c72e036b4f2dc"),
    "profiler/bench_profiler_v4-profile-pass2.json": (4, 2, 8, 14, 4, 5, "a384b4dda983df74"),
    "profiler/bench_profiler_v4-profile-pass3.json": (4, 2, 8, 14, 4, 5, "4eea1496d7046abe"),
    "profiler/bench_profiler_v4_5pass-profile-pass1.json": (4, 2, 8, 14, 4, 5, "61fabf33d073f3d1"),
    "profiler/bench_profiler_v4_5pass-profile-pass2.json": (4, 2, 8, 14, 4, 5, "3cf1fcc9ef134e62"),
    "profiler/bench_profiler_v4_5pass-profile-pass3.json": (4, 2, 8, 14, 4, 5, "0d51f2042f361f06"),
    "profiler/bench_profiler_v4_5pass-profile-pass4.json": (4, 2, 8, 14, 4, 5, "b4d5234f9c48dc2b"),
    "profiler/bench_profiler_v4_5pass-profile-pass5.json": (4, 2, 8, 14, 4, 5, "26324f867dca5b57"),
    "profiler/bench_profiler_v4_median-profile-pass1.json": (4, 2, 8, 14, 4, 5, "fa647e85790d876a"),
    "profiler/bench_profiler_v4_median-profile-pass2.json": (4, 2, 8, 14, 4, 5, "51e28a6705481b02"),
    "profiler/bench_profiler_v4_median-profile-pass3.json": (4, 2, 8, 14, 4, 5, "d3cfb14ea788ea29"),
    "profiler/bench_profiler_v4_median_5pass-profile-pass1.json": (4, 2, 8, 14, 4, 5, "ae2aa03bfccbfbba"),
    "profiler/bench_profiler_v4_median_5pass-profile-pass2.json": (4, 2, 8, 14, 4, 5, "f4bde97a596dabaa"),
    "profiler/bench_profiler_v4_median_5pass-profile-pass3.json": (4, 2, 8, 14, 4, 5, "4f20f47c6d56de5c"),
    "profiler/bench_profiler_v4_median_5pass-profile-pass4.json": (4, 2, 8, 14, 4, 5, "8a5a0652e1229d82"),
    "profiler/bench_profiler_v4_median_5pass-profile-pass5.json": (4, 2, 8, 14, 4, 5, "c2b169557b303153"),
    "profiler/bench_profiler_v4_onemodel-profile-pass1.json": (4, 2, 8, 14, 4, 5, "a0ca9a42c46e538f"),
    "profiler/bench_profiler_v4_onemodel-profile-pass2.json": (4, 2, 8, 14, 4, 5, "6d1676a877274238"),
    "profiler/bench_profiler_v4_onemodel-profile-pass3.json": (4, 2, 8, 14, 4, 5, "0e72ae7792080196"),
    "profiler/bench_profiler_v4_onemodel_repeat-profile-pass1.json": (4, 2, 8, 14, 4, 5, "cdf54c326a532bff"),
    "profiler/bench_profiler_v4_onemodel_repeat-profile-pass2.json": (4, 2, 8, 14, 4, 5, "5b702480d9678f36"),
    "profiler/bench_profiler_v4_onemodel_repeat-profile-pass3.json": (4, 2, 8, 14, 4, 5, "0923fb066122fca4"),
    "profiler/bench_profiler_v4_onemodel_repeat2-profile-pass1.json": (4, 2, 8, 14, 4, 5, "775d1ef5a0a2a56e"),
    "profiler/bench_profiler_v4_onemodel_repeat2-profile-pass2.json": (4, 2, 8, 14, 4, 5, "d3762be6d76582a5"),
    "profiler/bench_profiler_v4_onemodel_repeat2-profile-pass3.json": (4, 2, 8, 14, 4, 5, "5dcf5265c13e7e03"),
    "profiler/bench_profiler_v4_p2p_5pass-profile-pass1.json": (4, 2, 8, 14, 4, 5, "b8e6c411ae548bea"),
    "profiler/bench_profiler_v4_p2p_5pass-profile-pass2.json": (4, 2, 8, 14, 4, 5, "3b7cf14c4432e62e"),
    "profiler/bench_profiler_v4_p2p_5pass-profile-pass3.json": (4, 2, 8, 14, 4, 5, "be81ce1e4351699f"),
    "profiler/bench_profiler_v4_p2p_5pass-profile-pass4.json": (4, 2, 8, 14, 4, 5, "72078b03d43741ad"),
    "profiler/bench_profiler_v4_p2p_5pass-profile-pass5.json": (4, 2, 8, 14, 4, 5, "5bdba47025a1eb29"),
    "profiler/bench_profiler_v4_p2p_repeat-profile-pass1.json": (4, 2, 8, 14, 4, 5, "52c448d42dad1feb"),
    "profiler/bench_profiler_v4_p2p_repeat-profile-pass2.json": (4, 2, 8, 14, 4, 5, "7f7fb4202b9b4fef"),
    "profiler/bench_profiler_v4_p2p_repeat-profile-pass3.json": (4, 2, 8, 14, 4, 5, "917a95fdf2a2e7e7"),
    "profiler/bench_profiler_v4_permodel-profile-pass1.json": (4, 2, 8, 14, 4, 5, "3229ff163b789ae1"),
    "profiler/bench_profiler_v4_permodel-profile-pass2.json": (4, 2, 8, 14, 4, 5, "f10b04910dc4ccc9"),
    "profiler/bench_profiler_v4_permodel-profile-pass3.json": (4, 2, 8, 14, 4, 5, "2ebe8f9ca36164f4"),
    "profiler/bench_profiler_v4_permodel_repeat-profile-pass1.json": (4, 2, 8, 14, 4, 5, "a73da4d9a51ca939"),
    "profiler/bench_profiler_v4_permodel_repeat-profile-pass2.json": (4, 2, 8, 14, 4, 5, "0c144cf978fe808b"),
    "profiler/bench_profiler_v4_permodel_repeat-profile-pass3.json": (4, 2, 8, 14, 4, 5, "a27a015083d81d6b"),
    "profiler/bench_profiler_v4_primed_5pass-profile-pass1.json": (4, 2, 8, 14, 4, 5, "ab40e00cbf581925"),
    "profiler/bench_profiler_v4_primed_5pass-profile-pass2.json": (4, 2, 8, 14, 4, 5, "1cec8d40b852418a"),
    "profiler/bench_profiler_v4_primed_5pass-profile-pass3.json": (4, 2, 8, 14, 4, 5, "86de91185501fce3"),
    "profiler/bench_profiler_v4_primed_5pass-profile-pass4.json": (4, 2, 8, 14, 4, 5, "25569b501fe3c531"),
    "profiler/bench_profiler_v4_primed_5pass-profile-pass5.json": (4, 2, 8, 14, 4, 5, "02958e0d7d889afe"),
    "profiler/bench_profiler_v4_refactor-profile-pass1.json": (4, 2, 8, 14, 4, 5, "bf96331c178e5ccb"),
    "profiler/bench_profiler_v4_refactor-profile-pass2.json": (4, 2, 8, 14, 4, 5, "dfb1d1908d2614b2"),
    "profiler/bench_profiler_v4_refactor-profile-pass3.json": (4, 2, 8, 14, 4, 5, "5e5d8f4ee3e1cb21"),
    "profiler/bench_profiler_v4_repeat-profile-pass1.json": (4, 2, 8, 14, 4, 5, "aed5bc7cec8ba07d"),
    "profiler/bench_profiler_v4_repeat-profile-pass2.json": (4, 2, 8, 14, 4, 5, "502986ccd8ee986f"),
    "profiler/bench_profiler_v4_repeat-profile-pass3.json": (4, 2, 8, 14, 4, 5, "74a2ccf2edc0a28b"),
    "profiler/bench_profiler_v4_rerun-profile-pass1.json": (4, 2, 8, 14, 4, 5, "8f01cf0e30d3ee5c"),
    "profiler/bench_profiler_v4_rerun-profile-pass2.json": (4, 2, 8, 14, 4, 5, "65a98b6dfc1c8630"),
    "profiler/bench_profiler_v4_rerun-profile-pass3.json": (4, 2, 8, 14, 4, 5, "677b704f4a798d91"),
    "profiler/profile-cpu-1-mini-quick.json": (4, 1, 3, 0, 0, 0, "6b20db55214047a1"),
    "profiler/profile-cpu-2-repeat.json": (3, 2, 8, 14, 0, 5, "61d95e0e31c12aab"),
    "profiler/profile-cpu-2-repeat2.json": (3, 2, 8, 14, 0, 5, "2644635f2405b6fd"),
    "profiler/profile-cpu-2-v4-b.json": (4, 2, 8, 14, 4, 5, "93999e30f44f1ee5"),
    "profiler/profile-cpu-2-v4-c.json": (4, 2, 8, 14, 4, 5, "4663f7915eaafd6f"),
    "profiler/profile-cpu-2-v4-d.json": (4, 2, 8, 14, 4, 5, "c8e39e83c435bb12"),
    "profiler/profile-cpu-2-v4-e.json": (4, 2, 8, 14, 4, 5, "108850df0124b438"),
    "profiler/profile-cpu-2-v4-f.json": (4, 2, 8, 14, 4, 5, "18cf04ab3f5d5022"),
    "profiler/profile-cpu-2-v4-g.json": (4, 2, 8, 14, 4, 5, "13a97023705c6107"),
    "profiler/profile-cpu-2-v4.json": (4, 2, 8, 14, 4, 5, "5504b6c28177836c"),
    "profiler/profile-cpu-2-v5.json": (5, 2, 8, 14, 4, 5, "fbb2e37307c83502"),  # taken after the reader moved
    "profiler/profile-cpu-2-v5-b.json": (5, 2, 8, 14, 4, 5, "343c6d9e40c98226"),
    "profiler/profile-cpu-2.json": (3, 2, 8, 14, 0, 5, "214203e4e65665c8"),
}


def test_the_table_lists_every_committed_profile():
    listed = subprocess.run(
        ["git", "ls-files", "*.json"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    profiles = {f for f in listed if '"arena-gym-profile"' in (REPO / f).read_text(encoding="utf-8")}
    assert profiles == {f"benchmarks/results/{name}" for name in EXPECTED}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_committed_profile_loads_as_before(name):
    profile = load_profile(RESULTS / name)
    text = profile.to_json()
    figures = (len(profile.models), len(profile.compute), len(profile.grouped), len(profile.order), len(profile.comm))
    assert (profile.version, *figures, hashlib.sha256(text.encode()).hexdigest()[:16]) == EXPECTED[name]
    assert Profile.from_dict(json.loads(text)) == profile  # and reads back the same
