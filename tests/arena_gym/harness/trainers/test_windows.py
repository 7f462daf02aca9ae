"""The residual trainers' shared data settings (ResidualData)."""

from __future__ import annotations

import pytest

from arena_gym.fields import FieldError
from arena_gym.harness.trainers.es import ResidualTrainConfig
from arena_gym.harness.trainers.residual_ppo import ResidualPPOConfig
from arena_gym.harness.trainers.windows import ResidualData, real_windows


@pytest.mark.parametrize("config_type", [ResidualTrainConfig, ResidualPPOConfig])
def test_both_trainers_share_the_data_fields_and_their_checks(config_type: type[ResidualData]) -> None:
    assert issubclass(config_type, ResidualData)
    config = config_type(loads=[1, 0.5], traces=["data:x.csv"])  # type: ignore[arg-type]
    assert config.loads == (1.0, 0.5) and config.traces == ("data:x.csv",)
    name = config_type.__name__
    with pytest.raises(ValueError, match=f"^{name}.traces is empty$"):
        config_type(traces=())
    with pytest.raises(ValueError, match=f"^{name}.workers must be >= 1, got 0$"):
        config_type(workers=0)
    with pytest.raises(FieldError, match=f"^{name}.workers must be an integer, got True$"):
        config_type(workers=True)
    with pytest.raises(FieldError, match=f"^{name}.data_dir must be a string, got None$"):
        config_type(data_dir=None)  # type: ignore[arg-type]


def test_the_windows_are_cut_on_each_cluster_and_labelled_by_it(shared_data) -> None:
    traces, loads = ("data:arena/traces/philly.csv",), (0.9,)
    one = real_windows(traces, loads, str(shared_data), 2)
    train, validation = real_windows(traces, loads, str(shared_data), 2, ("testbed-64", "arena-1280"))
    n = len(one[0].workloads)
    assert n > 10 and len(train.workloads) == 2 * n and len(validation.workloads) == 4
    assert [w.label for w in one[0].workloads] == [w.label.removeprefix("testbed-64/") for w in train.workloads[:n]]
    labels = [w.label for w in (*train.workloads, *validation.workloads)]
    assert len(set(labels)) == len(labels)
    assert all(w.label.startswith(f"{w.cluster}/") for w in (*train.workloads, *validation.workloads))
    for small, big in zip(train.workloads[:n], train.workloads[n:]):
        assert (small.cluster, big.cluster) == ("testbed-64", "arena-1280")
        assert [j.job_id for j in small.jobs] == [j.job_id for j in big.jobs]
        assert big.factor > 5 * small.factor  # the same offered load on 20x the GPUs: arrivals much faster


@pytest.mark.parametrize(
    ("values", "problem"),
    [
        ({"clusters": ()}, "clusters must name at least one cluster, each once, got \\(\\)"),
        ({"clusters": ("tiny", "tiny")}, "clusters must name at least one cluster, each once"),
        ({"clusters": ("testbed-64", "nope")}, "^ResidualData.clusters: unknown cluster 'nope': not a file"),
        ({"ray": ""}, "ray must be a Ray address or 'auto', got ''"),
    ],
)
def test_bad_clusters_and_ray_addresses_are_refused(values, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        ResidualData(**values)
