"""The fine-tuning benchmark: its folders refused or replaced whole, and its committed figures follow from its histories."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from tests.arena_gym.harness.trainers.test_residual_ppo import tiny
from tests.conftest import REPO
from tests.helpers import load_script

bench = load_script("bench_finetune", "benchmarks")
COMMITTED = REPO / "benchmarks" / "results" / "residual" / "finetune"


def test_an_earlier_run_is_refused_unless_replaced_and_then_replaced_whole(shared_data, tmp_path) -> None:
    config = tiny(shared_data, tmp_path, steps=128, critic_warmup=100)
    bench.run(("plain", config, tmp_path / "out" / "plain"))
    first = pd.read_csv(tmp_path / "out" / "plain" / "history.csv")
    assert first["timesteps"].tolist() == [0, 128]
    with pytest.raises(ValueError, match="--replace"):
        bench.check_outs(tmp_path / "out", replace=False)
    bench.check_outs(tmp_path / "out", replace=True)
    (tmp_path / "out" / "kept").mkdir()
    (tmp_path / "out" / "kept" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not an arena-gym results directory"):
        bench.check_outs(tmp_path / "out", replace=True)
    # a second run replaces the first only once it is complete: no file of the first is left
    (tmp_path / "out" / "plain" / "stale.txt").write_text("from the first run")
    bench.run(("plain", tiny(shared_data, tmp_path, steps=256, critic_warmup=100), tmp_path / "out" / "plain"))
    assert pd.read_csv(tmp_path / "out" / "plain" / "history.csv")["timesteps"].tolist() == [0, 128, 256]
    assert not (tmp_path / "out" / "plain" / "stale.txt").exists()


def test_the_committed_figures_follow_from_the_committed_histories() -> None:
    record = json.loads((COMMITTED / "finetune.json").read_text())
    assert set(record["figures"]) == set(bench.VARIANTS)
    for name, figures in record["figures"].items():
        history = pd.read_csv(COMMITTED / name / "history.csv")
        assert bench.summary(history, figures["wall_s"]) == pytest.approx(figures, rel=1e-12)
        config = json.loads((COMMITTED / name / "config.json").read_text())["config"]
        assert {k: config[k] for k in bench.VARIANTS[name]} == pytest.approx(bench.VARIANTS[name])
        assert history["timesteps"].iloc[-1] == config["steps"] == record["config"]["steps"]
