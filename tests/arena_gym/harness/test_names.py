"""The names the commands take, read from the registries: every registered one listed, as text and Markdown."""

from __future__ import annotations

import pytest

from arena_gym.cluster import PRESETS
from arena_gym.harness.names import as_markdown, as_text, perf_help, policy_help, prefixed, sections, tune_help
from arena_gym.harness.trainers import METHODS
from arena_gym.harness.tune import TUNE_TARGETS
from arena_gym.registry import perf_registry, policy_registry
from traces.formats import GENERATORS


@pytest.fixture
def policies():
    """The module-level policy registry, restored after the test."""
    registry = policy_registry()
    saved = dict(registry.entries)
    yield registry
    registry._entries = saved


def test_every_registered_name_has_a_row_in_its_section(policies) -> None:
    policies.register("listed-here", "agents.fcfs:FCFS", description="registered by this test")
    found = {s.title: s for s in sections()}
    assert found["policies"].names() == policy_registry().names() and "listed-here" in found["policies"].names()
    assert dict(found["policies"].rows)["listed-here"] == "registered by this test"
    assert found["policy prefixes"].names() == prefixed(policy_registry())
    assert found["performance models"].names() == perf_registry().names()
    assert found["performance-model prefixes"].names() == prefixed(perf_registry())
    assert found["clusters"].names() == list(PRESETS)
    assert [n.partition("[")[0] for n in found["trace generators"].names()] == list(GENERATORS)
    assert found["train methods"].names() == list(METHODS)
    assert found["tune targets"].names() == list(TUNE_TARGETS)


def test_text_and_markdown_show_every_row() -> None:
    found = sections()
    text, markdown = as_text(found), as_markdown(found)
    for section in found:
        assert f"{section.title}:" in text and f"**{section.title}**" in markdown
        for name, _ in section.rows:
            assert f"  {name} " in text and f"- `{name}`" in markdown


def test_the_help_strings_name_every_registered_spec() -> None:
    for name in [*policy_registry().names(), *prefixed(policy_registry())]:
        assert name in policy_help()
    for name in [*perf_registry().names(), *prefixed(perf_registry())]:
        assert name in perf_help("model")
    assert all(name in tune_help() for name in TUNE_TARGETS)
