"""ensure_profile: profile on first use, reuse the cached file, profile again when it cannot be used."""

from __future__ import annotations

from dataclasses import replace

import pytest

from estimator.profile import load_profile
from real_runner.profiler import cache
from real_runner.profiler.settings import ProfilerSettings
from real_runner.testbed import load_testbed
from tests.estimator.test_profile import synthetic_profile


@pytest.fixture
def fake_profiler(monkeypatch):
    calls = []

    def profile_testbed(testbed, models, settings, work, **kwargs):
        calls.append((testbed.name, tuple(models), settings))
        return synthetic_profile()

    monkeypatch.setattr(cache, "profile_testbed", profile_testbed)
    return calls


def test_profiles_once_then_reuses_the_cached_file(tmp_path, fake_profiler):
    testbed = load_testbed("cpu-2")
    first = cache.ensure_profile(testbed, ["gpt__tiny"], tmp_path, env={})
    assert fake_profiler == [("cpu-2", ("gpt__tiny",), ProfilerSettings())]
    assert load_profile(first).covers("gpt__tiny", "cpu")
    assert cache.ensure_profile(testbed, ["gpt__tiny"], tmp_path, env={}) == first
    assert len(fake_profiler) == 1
    cache.ensure_profile(testbed, ["gpt__tiny"], tmp_path, env={}, refresh=True)
    assert len(fake_profiler) == 2


def test_the_key_separates_testbeds_models_and_settings(tmp_path, fake_profiler):
    base = cache.cached_profile_path(load_testbed("cpu-2"), ["gpt__tiny"], tmp_path)
    assert base.parent == tmp_path and base.name.startswith("profile-cpu-2-")
    others = {
        cache.cached_profile_path(load_testbed("cpu-1"), ["gpt__tiny"], tmp_path),
        cache.cached_profile_path(load_testbed("cpu-2"), ["gpt__tiny", "gpt__mini"], tmp_path),
        cache.cached_profile_path(
            load_testbed("cpu-2"), ["gpt__tiny"], tmp_path, replace(ProfilerSettings(), rounds=3)
        ),
    }
    assert base not in others and len(others) == 3


def test_an_unusable_cached_file_is_profiled_again(tmp_path, fake_profiler):
    testbed = load_testbed("cpu-2")
    path = cache.cached_profile_path(testbed, ["gpt__tiny"], tmp_path)
    path.write_text("{broken")
    assert cache.ensure_profile(testbed, ["gpt__tiny"], tmp_path, env={}) == path
    assert len(fake_profiler) == 1 and load_profile(path).models.keys() == {"gpt__tiny"}


def test_models_the_runner_cannot_train_are_refused_before_profiling(tmp_path, fake_profiler):
    with pytest.raises(ValueError, match="dense transformers"):
        cache.ensure_profile(load_testbed("cpu-2"), ["moe__10B"], tmp_path, env={})
    assert fake_profiler == []
