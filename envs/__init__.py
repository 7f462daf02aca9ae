"""Gymnasium environments over Arena's joint scheduling-parallelism grid.

Importing this package registers the versioned ids of :data:`ENV_CONFIGS` (namespace
``ArenaGym``) with gymnasium; ``gymnasium.make(id, **overrides)`` replaces EnvConfig fields.
See :class:`envs.arena_env.ArenaSchedEnv` for the spaces, rewards and episode semantics, and
``docs/gym.md`` for a guide.
"""

from __future__ import annotations

from gymnasium.envs.registration import register, registry

from envs.adapter import ObservationPolicy
from envs.arena_env import ArenaSchedEnv
from envs.builder import DecisionBuilder
from envs.codec import PREEMPT, ActionCodec
from envs.config import EnvConfig
from envs.encoder import ObservationEncoder
from envs.expert import HeuristicAgent, PlayResult, expert_actions
from envs.workload import Workload, WorkloadSampler

ENTRY_POINT = "envs.arena_env:ArenaSchedEnv"

#: The real traces of ``../shared/data`` (Arena artifact CSVs; ITP with the artifact's sampling recipe).
REAL_TRACES: tuple[str, ...] = (
    "data:arena/traces/testbed.csv?iteration_divisor=1",
    "data:arena/traces/philly.csv",
    "data:arena/traces/pai.csv",
    "data:itp/cluster10.csv?seed=0",
    "data:itp/cluster08.csv?seed=0",
)
#: Cluster variants the real-trace env trains on: the testbed's 64 GPUs split 16+16, 12+20 and 20+12 nodes.
TESTBED_VARIANTS: tuple[str, ...] = ("testbed-64[a40=12,a10=20]", "testbed-64[a40=20,a10=12]")

#: The registered environments and their default settings (all but ``Testbed64Real`` need only built-in data).
ENV_CONFIGS: dict[str, EnvConfig] = {
    # 8 GPUs (a40 + a10, 2 nodes x 2 each), short synthetic jobs: quick experiments and tests.
    "ArenaGym/Tiny-v1": EnvConfig(
        cluster="tiny",
        trace="synthetic:n_jobs=24,arrival=poisson,rate_per_h=6,gpu_types=a40+a10,max_gpus=4,iter_log_mean=7.5",
        max_pending=8,
        max_running=8,
        max_substeps=16,
    ),
    # The artifact's 64-GPU A40 + A10 testbed with a synthetic testbed-mix workload at three loads.
    "ArenaGym/Testbed64-v1": EnvConfig(
        cluster="testbed-64",
        trace="synthetic:n_jobs=100,arrival=poisson,rate_per_h=4,mix=testbed,gpu_types=a40+a10,max_gpus=16",
        load_levels=(0.5, 1.0, 2.0),
        max_pending=16,
        max_running=32,
        max_substeps=48,
    ),
    # Windows of 50 jobs of the real traces (train split by default), retargeted to A40 + A10, at an
    # offered load of 0.6 / 0.9 / 1.2 of the cluster, on three node splits of the 64-GPU testbed.
    "ArenaGym/Testbed64Real-v1": EnvConfig(
        cluster="testbed-64",
        cluster_variants=TESTBED_VARIANTS,
        trace=REAL_TRACES,
        split="train",
        window_jobs=50,
        load_basis="offered",
        load_levels=(0.6, 0.9, 1.2),
        max_pending=16,
        max_running=32,
        max_substeps=48,
    ),
    # The artifact's simulated 1,280-GPU cluster with a bursty Philly-like synthetic workload,
    # truncated at 2,000 rounds of 300 s as in the artifact's evaluation.
    "ArenaGym/Arena1280-v1": EnvConfig(
        cluster="arena-1280",
        trace="synthetic:n_jobs=400,arrival=bursty,mix=philly",
        load_levels=(1.0, 2.0, 4.0),
        horizon_s=600_000.0,
        max_pending=32,
        max_running=64,
        max_substeps=64,
    ),
}
ENV_IDS: tuple[str, ...] = tuple(ENV_CONFIGS)


def register_envs() -> None:
    """Register every id of :data:`ENV_CONFIGS` with gymnasium (idempotent)."""
    for env_id, config in ENV_CONFIGS.items():
        if env_id not in registry:
            register(id=env_id, entry_point=ENTRY_POINT, kwargs={"config": config})


register_envs()

__all__ = [
    "ENV_CONFIGS",
    "ENV_IDS",
    "PREEMPT",
    "REAL_TRACES",
    "TESTBED_VARIANTS",
    "ActionCodec",
    "ArenaSchedEnv",
    "DecisionBuilder",
    "EnvConfig",
    "HeuristicAgent",
    "ObservationEncoder",
    "ObservationPolicy",
    "PlayResult",
    "Workload",
    "WorkloadSampler",
    "expert_actions",
]
