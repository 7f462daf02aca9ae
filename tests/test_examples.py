"""The files under examples/ load, and the commands docs/formats.md shows with them run as written."""

from __future__ import annotations

import json
import shlex

import pytest

from arena_gym.cluster import load_cluster
from arena_gym.harness.cli import main
from estimator.zoo import load_models
from tests.conftest import REPO

EXAMPLES = REPO / "examples"


def test_the_example_cluster_and_models_load() -> None:
    cluster = load_cluster(str(EXAMPLES / "cluster.json"))
    assert cluster.name == "two-types" and cluster.total_gpus == 16
    models = load_models(EXAMPLES / "models.json")
    assert {a.kind for a in models.values()} == {"transformer", "moe", "wide_resnet"}


def test_the_example_trace_passes_trace_info(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["trace", "info", str(EXAMPLES / "trace.csv"), "--cluster", str(EXAMPLES / "cluster.json")]
    assert main([*args, "--model-spec", str(EXAMPLES / "models.json")]) == 0, capsys.readouterr().err


def test_the_formats_page_command_runs_as_written(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (REPO / "docs" / "formats.md").read_text()
    block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    argv = shlex.split(block.replace("\\\n", " "))
    assert argv[0] == "arena-gym"
    monkeypatch.chdir(REPO)
    out = tmp_path / "examples"
    argv = [a if a != "results/examples" else str(out) for a in argv[1:]]
    assert main([*argv, "--no-plots"]) == 0
    assert json.loads((out / "metrics.json").read_text())["jobs_finished"] == 8
