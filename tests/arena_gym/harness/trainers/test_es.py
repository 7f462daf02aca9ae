"""Evolution strategies for the residual: ranks, the update's direction, config checks, a seeded run on the real traces."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from agents.residual.priority import ResidualWeights
from arena_gym.harness.trainers.es import ResidualTrainConfig, ResidualTrainer, centred_ranks, es_step


@pytest.mark.timeout(120)
def test_the_es_method_loads_without_torch_or_sb3() -> None:
    code = (
        "import sys\n"
        "from arena_gym.harness.trainers import METHODS\n"
        "from arena_gym.registry import resolve\n"
        "assert type(resolve(METHODS['es'])).__name__ == 'ESMethod'\n"
        "print(sorted(m for m in ('torch', 'stable_baselines3') if m in sys.modules))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=100, check=True)
    assert run.stdout.strip() == "[]", run.stderr


def test_centred_ranks_run_from_minus_to_plus_a_half() -> None:
    assert centred_ranks(np.array([3.0, -1.0, 2.0])).tolist() == [0.5, -0.5, 0.0]
    assert centred_ranks(np.array([7.0])).tolist() == [-0.5]


def test_es_steps_descend_a_quadratic() -> None:
    config = ResidualTrainConfig(pairs=8, sigma=0.2, learning_rate=0.1)
    rng = np.random.default_rng(0)
    target = np.array([1.0, -2.0, 0.5])
    theta = np.zeros(3)

    def loss(x: np.ndarray) -> float:
        return float(((x - target) ** 2).sum())

    start = loss(theta)
    for _ in range(60):
        eps = rng.standard_normal((config.pairs, 3))
        plus = np.array([loss(theta + config.sigma * e) for e in eps])
        minus = np.array([loss(theta - config.sigma * e) for e in eps])
        theta = es_step(theta, eps, plus, minus, config)
    assert loss(theta) < 0.05 * start


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("iterations", 0, "iterations must be >= 1"),
        ("pairs", 0, "pairs must be >= 1"),
        ("sigma", 0.0, "sigma must be finite and > 0"),
        ("learning_rate", float("nan"), "learning_rate must be finite"),
        ("validation_limit", -1, "validation_limit must be >= 0"),
        ("traces", (), "traces is empty"),
        ("loads", (0.9, -1.0), "loads must be numbers > 0"),
    ],
)
def test_bad_settings_are_refused(field: str, value, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        ResidualTrainConfig(**{field: value})


def test_a_seeded_run_writes_the_same_weights_twice(shared_data, tmp_path) -> None:
    config = ResidualTrainConfig(
        data_dir=str(shared_data), iterations=1, pairs=1, windows=1, validation_limit=1, workers=1, seed=5
    )
    first = ResidualTrainer(config, tmp_path / "a").run(progress=False)
    second = ResidualTrainer(config, tmp_path / "b").run(progress=False)
    assert first.vector.tolist() == second.vector.tolist() and np.abs(first.vector).sum() > 0
    loaded = ResidualWeights.load(tmp_path / "a" / "residual.json")
    assert loaded.trained["iteration"] == 1 and loaded.trained["validation_windows"] == 1
    assert loaded.trained["config"]["seed"] == 5
    history = pd.read_csv(tmp_path / "a" / "history.csv")
    assert len(history) == 1 and json.loads(history["weights"][0]) == pytest.approx(first.vector.tolist(), abs=1e-6)
    assert 0.5 < history["validation_geomean_ratio"][0] < 2.0
    assert "code_version" in json.loads((tmp_path / "a" / "config.json").read_text())
    assert (tmp_path / "a" / "history.png").stat().st_size > 1000


def test_an_occupied_folder_is_refused_before_any_work(tmp_path) -> None:
    (tmp_path / "mine.txt").write_text("keep me")
    with pytest.raises(ValueError, match="not an arena-gym results directory"):
        ResidualTrainer(ResidualTrainConfig(), tmp_path)
    assert (tmp_path / "mine.txt").read_text() == "keep me"


def test_with_progress_an_iteration_shows_its_scored_windows_before_it_ends(shared_data, tmp_path, monkeypatch) -> None:
    import arena_gym.harness.scoring as scoring

    events: list[str] = []

    class RecordedBar(scoring.tqdm):
        def update(self, n=1):
            if not self.disable:
                events.append("window scored")
            return super().update(n)

    monkeypatch.setattr(scoring, "tqdm", RecordedBar)
    config = ResidualTrainConfig(
        data_dir=str(shared_data), iterations=1, pairs=1, windows=2, validation_limit=1, workers=1, seed=5
    )
    ResidualTrainer(config, tmp_path / "shown").run(progress=True, on_iteration=lambda it, _: events.append("end"))
    assert events[-1] == "end" and events.count("window scored") >= 3  # 2 train windows, then validation
    events.clear()
    ResidualTrainer(config, tmp_path / "quiet").run(progress=False, on_iteration=lambda it, _: events.append("end"))
    assert events == ["end"]


def test_a_run_across_clusters_selects_on_the_validation_windows_of_each(shared_data, tmp_path) -> None:
    clusters = ("testbed-64", "arena-1280")
    config = ResidualTrainConfig(
        data_dir=str(shared_data), iterations=1, pairs=1, windows=2, validation_limit=1, workers=1, clusters=clusters
    )
    trainer = ResidualTrainer(config, tmp_path / "run")
    assert {w.cluster for w in trainer.train.workloads} == set(clusters)
    assert [w.cluster for w in trainer.validation.workloads] == list(clusters)
    weights = trainer.run(progress=False)
    assert weights.trained["validation_windows"] == 2 and tuple(weights.trained["config"]["clusters"]) == clusters
    saved = json.loads((tmp_path / "run" / "config.json").read_text())["config"]
    assert saved["clusters"] == list(clusters) and saved["ray"] is None
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [
        "config.json",
        "history.csv",
        "history.png",
        "residual.json",
    ]  # the candidates' folder is gone


def test_a_run_of_the_sizing_head_moves_that_row_alone_from_its_start(shared_data, tmp_path) -> None:
    start = ResidualWeights(order=(0.25,) + (0.0,) * 11, urgency=(0.0,) * 11 + (-0.5,), clip=2.5)
    config = ResidualTrainConfig(
        data_dir=str(shared_data),
        iterations=1,
        pairs=1,
        windows=2,
        validation_limit=1,
        workers=1,
        seed=3,
        heads=("size",),
        start=str(start.save(tmp_path / "start.json")),
        clusters=("arena-1280",),
    )
    trained = ResidualTrainer(config, tmp_path / "run").run(progress=False)
    assert trained.order == start.order and trained.urgency == start.urgency and np.abs(trained.size).sum() > 0
    assert trained.clip == 2.5  # no clip set: the start's
    history = pd.read_csv(tmp_path / "run" / "history.csv")
    assert json.loads(history["weights"][0]) == pytest.approx(list(trained.size), abs=1e-6)
    assert ResidualWeights.load(tmp_path / "run" / "residual.json").trained["config"]["heads"] == ["size"]


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        ({"heads": ()}, "heads must name some of order, urgency, size"),
        ({"heads": ("size", "size")}, "each once"),
        ({"heads": ("order", "width")}, "got ('order', 'width')"),
        ({"start": "absent.json"}, "residual weights absent.json: cannot read"),
    ],
)
def test_bad_heads_or_start_are_refused_in_one_line(settings: dict, problem: str) -> None:
    with pytest.raises(ValueError) as err:
        ResidualTrainConfig(**settings)
    assert problem in str(err.value) and "\n" not in str(err.value)
