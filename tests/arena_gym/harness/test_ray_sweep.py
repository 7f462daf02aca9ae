"""Sweeps on a Ray cluster of two nodes started with ``ray start``: the second node killed mid-sweep.

The head (1 CPU) and a second node (2 CPUs) run on this machine, each ``ray start --block`` in a
session of its own, so a node dies with everything it started (``killpg``) and teardown ends
exactly the processes this module started. Ray's home and temp directories are this module's
and removed after. Skipped where Ray is not installed (``pip install -e ".[ray]"``).
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install -e '.[ray]')")

from arena_gym.harness.sweep import run_tasks  # noqa: E402
from arena_gym.metrics import WALL_CLOCK_KEYS  # noqa: E402
from tests.conftest import REPO  # noqa: E402
from tests.rl_cases import TRACE  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.distributed, pytest.mark.timeout(600)]

RAY = str(Path(sys.executable).with_name("ray"))
POLICIES = "fcfs,srtf,arena,tiresias"
#: Two traces long enough that a run takes seconds, so the kill lands while the second node runs some.
TRACES = ("synthetic:n_jobs=250", "synthetic:n_jobs=250,rate_per_h=20")
#: Seconds to wait for a node to join, for a task to start on the second node, and for a sweep.
JOIN_S, START_S, SWEEP_S = 120, 180, 400


@dataclass
class Cluster:
    """The head's address, the ``ray start`` process of each node, and the environment of processes to start."""

    address: str
    head: subprocess.Popen
    second: subprocess.Popen
    env: dict[str, str]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_node(args: list[str], env: dict[str, str], log: Path, cwd: Path) -> subprocess.Popen:
    """``ray start ARGS --block`` in a session of its own (its process group holds the node's processes)."""
    with open(log, "w") as out:
        return subprocess.Popen(
            [RAY, "start", *args, "--disable-usage-stats", "--object-store-memory=100000000", "--block"],
            env=env,
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _end(proc: subprocess.Popen) -> None:
    """End a node: SIGTERM to its process group, SIGKILL after 10 s."""
    for sig, wait_s in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(wait_s)
            if not _session_processes(proc.pid):
                return


def _session_processes(sid: int) -> list[tuple[int, str]]:
    """(pid, command line) of the live processes of session ``sid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if os.getsid(int(entry.name)) == sid and (entry / "cmdline").read_bytes():
                found.append((int(entry.name), (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()))
    return found


def _alive_nodes() -> int:
    return sum(1 for n in ray.nodes() if n["Alive"])


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[Cluster]:
    """A head (1 CPU) and a second node (2 CPUs); this process connected as a driver. Always stopped after."""
    home = tmp_path_factory.mktemp("ray-home")
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's socket paths must stay under 108 bytes
    env = {**os.environ, "HOME": str(home), "RAY_USAGE_STATS_ENABLED": "0", "OMP_NUM_THREADS": "1"}
    port = _free_port()
    address = f"127.0.0.1:{port}"
    nodes: list[subprocess.Popen] = []
    try:
        nodes.append(
            _start_node(
                ["--head", f"--port={port}", "--num-cpus=1", "--include-dashboard=false", f"--temp-dir={temp}"],
                env,
                home / "head.log",
                home,
            )
        )
        deadline = time.monotonic() + JOIN_S
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            time.sleep(0.5)
        nodes.append(_start_node([f"--address={address}", "--num-cpus=2"], env, home / "second.log", home))
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("HOME", str(home))
            ray.init(address=address, namespace="arena-gym-test", log_to_driver=False, logging_level="WARNING")
            try:
                while _alive_nodes() < 2 and time.monotonic() < deadline:
                    time.sleep(0.5)
                assert _alive_nodes() == 2, (home / "second.log").read_text()[-2000:]
                yield Cluster(address, nodes[0], nodes[1], env)
            finally:
                ray.shutdown()
    finally:
        for node in reversed(nodes):
            _end(node)
        shutil.rmtree(temp, ignore_errors=True)


def _command(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    """``python -m arena_gym ARGS`` from the repository, its output to ``log`` (a file: a pipe could fill)."""
    with open(log, "w") as out:
        return subprocess.Popen([sys.executable, "-m", "arena_gym", *args], env=env, cwd=REPO, stdout=out, stderr=out)


def _compare(out: Path, env: dict[str, str], *extra: str) -> subprocess.Popen:
    traces = [x for t in TRACES for x in ("--traces", t)]
    args = ["compare", "--policies", POLICIES, *traces, "--cluster", "testbed-64", "--no-plots", "--out", str(out)]
    return _command([*args, *extra], env, out.with_suffix(".log"))


def _finish(proc: subprocess.Popen, log: Path) -> str:
    """Wait for a command; its output (it must have succeeded)."""
    proc.wait(SWEEP_S)
    text = log.read_text()
    assert proc.returncode == 0, text[-3000:]
    return text


def _without_timing(csv_text: str) -> str:
    """A leaderboard or per-workload CSV without its wall-clock column (the only one that may differ between runs)."""
    rows = list(csv.reader(io.StringIO(csv_text)))
    drop = rows[0].index("sched_ms_per_decision")
    out = io.StringIO()
    csv.writer(out).writerows([c for i, c in enumerate(row) if i != drop] for row in rows)
    return out.getvalue()


def _running_on(node: subprocess.Popen) -> list[str]:
    """Sweep tasks ("ray::run N") that worker processes of ``node`` are executing now."""
    return [cmd for _, cmd in _session_processes(node.pid) if cmd.startswith("ray::run ")]


def test_evaluate_on_ray_writes_the_tables_of_a_local_run(cluster: Cluster, tmp_path) -> None:
    args = ["evaluate", "--policies", "arena,fcfs,srtf", "--suite", "custom", "--trace", TRACE, "--cluster", "tiny"]
    args += ["--window-jobs", "0", "--split", "all", "--loads", "1", "--resamples", "200", "--no-progress"]
    _finish(
        _command([*args, "--ray", cluster.address, "--out", str(tmp_path / "ray")], cluster.env, tmp_path / "r.log"),
        tmp_path / "r.log",
    )
    _finish(_command([*args, "--out", str(tmp_path / "local")], cluster.env, tmp_path / "l.log"), tmp_path / "l.log")
    table = [_without_timing((tmp_path / d / "per_workload.csv").read_text()) for d in ("ray", "local")]
    assert table[0] == table[1]
    for name in ("jobs.csv", "summary.csv", "summary.md"):
        assert (tmp_path / "ray" / name).read_bytes() == (tmp_path / "local" / name).read_bytes(), name


def test_a_sweep_survives_a_dead_node_and_equals_a_local_run(cluster: Cluster, tmp_path) -> None:
    sweep = _compare(tmp_path / "ray", cluster.env, "--ray", cluster.address)
    deadline = time.monotonic() + START_S
    while not _running_on(cluster.second) and sweep.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    killed = _running_on(cluster.second)
    assert killed, "no task ran on the second node (the sweep ended or never started there)"
    os.killpg(cluster.second.pid, signal.SIGKILL)  # the node dies with the tasks it runs
    cluster.second.wait(30)
    err = _finish(sweep, tmp_path / "ray.log")
    rerun = re.findall(r"run (\d+) lost \((\w+)\); rerunning it", err)
    assert rerun and {i for i, _ in rerun} >= {k.split()[1] for k in killed}, err[-3000:]
    _finish(_compare(tmp_path / "local", cluster.env), tmp_path / "local.log")

    ray_dir, local_dir = tmp_path / "ray", tmp_path / "local"
    board = (ray_dir / "leaderboard.csv").read_text()
    assert _without_timing(board) == _without_timing((local_dir / "leaderboard.csv").read_text())
    runs = sorted(p.relative_to(ray_dir) for p in ray_dir.rglob("metrics.json"))
    assert len(runs) == len(TRACES) * len(POLICIES.split(",")) == board.count("\n") - 1  # every task counted once
    assert runs == sorted(p.relative_to(local_dir) for p in local_dir.rglob("metrics.json"))
    for run in (r.parent for r in runs):
        for name in ("jobs.csv", "timeline.csv", "config.json"):
            assert (ray_dir / run / name).read_bytes() == (local_dir / run / name).read_bytes(), (run, name)
        on_ray, here = (json.loads((d / run / "metrics.json").read_text()) for d in (ray_dir, local_dir))
        assert {k: v for k, v in on_ray.items() if k not in WALL_CLOCK_KEYS} == {
            k: v for k, v in here.items() if k not in WALL_CLOCK_KEYS
        }
    print(f"\nkilled the second node running {killed}; {len(rerun)} task(s) rerun; leaderboard identical")


def _raise_on_two(x: int) -> int:
    if x == 2:
        raise KeyError("two")
    return x + 1


def test_ray_tasks_keep_task_order_and_a_raising_task_propagates_its_error(cluster: Cluster) -> None:
    assert run_tasks(_raise_on_two, [0, 1, 3, 4, 5], ray=cluster.address) == [1, 2, 4, 5, 6]
    with pytest.raises(KeyError, match="two"):
        run_tasks(_raise_on_two, [0, 1, 2, 3], ray=cluster.address)


def test_expert_iteration_labels_on_ray_equal_local_labels(cluster: Cluster, tmp_path) -> None:
    """Expert iteration's labelling tasks give on the cluster the labels they give in this process."""
    from sb3_contrib import MaskablePPO

    from agents.rl.algos import policy_class
    from agents.rl.artifact import ModelInfo, save_model
    from agents.rl.env_factory import env_config, make_env
    from arena_gym.harness.trainers.expert_iteration import LabelTask, label_task
    from tests.rl_cases import ENV_ID, ENV_OVERRIDES

    model = MaskablePPO(
        policy_class("maskable_ppo", "slots"),
        make_env(ENV_ID, dict(ENV_OVERRIDES)),
        seed=3,
        device="cpu",
        n_steps=64,
        policy_kwargs={"net_arch": [16]},
    )
    config = env_config(ENV_ID, dict(ENV_OVERRIDES))
    path = save_model(model, tmp_path / "model.zip", ModelInfo("maskable_ppo", ENV_ID, config, "test", "slots"))
    tasks = [LabelTask(path.read_bytes(), config, "arena-gittins", 0.5, seed, 0.99) for seed in (1, 2, 3)]
    remote = run_tasks(label_task, tasks, ray=cluster.address)
    for (far, _), (near, _) in zip(remote, map(label_task, tasks), strict=True):
        assert len(far.data) > 0
        assert (far.data.actions == near.data.actions).all() and far.decisions == near.decisions


def test_evolution_strategies_on_ray_train_the_network_of_a_local_run(cluster: Cluster, shared_data, tmp_path) -> None:
    """Every episode of an ES iteration (two clusters' windows) runs as a Ray task; the weights are a local run's."""
    from arena_gym.harness.trainers.es import ResidualTrainConfig, ResidualTrainer

    config = ResidualTrainConfig(
        data_dir=str(shared_data),
        clusters=("testbed-64", "arena-1280"),
        iterations=1,
        pairs=1,
        windows=2,
        validation_limit=1,
        workers=1,
        seed=3,
    )
    far = ResidualTrainer(replace(config, ray=cluster.address), tmp_path / "ray").run(progress=False)
    near = ResidualTrainer(config, tmp_path / "local").run(progress=False)
    assert far.vector.tolist() == near.vector.tolist() and np.abs(far.vector).sum() > 0
    assert far.trained["validation_geomean_ratio"] == near.trained["validation_geomean_ratio"]
    assert far.trained["config"]["ray"] == cluster.address


def test_policy_iteration_searches_on_ray_label_as_in_this_process(cluster: Cluster) -> None:
    """A window's search task carries its weights (no file of the driver's is read there) and labels the same."""
    from arena_gym.harness.trainers.policy_iteration import search_window
    from tests.arena_gym.harness.trainers.test_policy_iteration import search_task

    tasks = [search_task(seed) for seed in (1, 2)]
    for far, near in zip(run_tasks(search_window, tasks, ray=cluster.address), map(search_window, tasks), strict=True):
        assert far.searches == near.searches >= 1 and far.changed == near.changed
        assert (far.features == near.features).all() and (far.winner == near.winner).all()


def test_envs_in_ray_actors_step_as_envs_in_this_process(cluster: Cluster) -> None:
    """RayVecEnv: the same observations, rewards, ends of episode (reset at once, the last observation kept) and
    attributes as DummyVecEnv, from the same factory and seeds."""
    import functools

    from stable_baselines3.common.vec_env import DummyVecEnv

    from arena_gym.harness.trainers.ray_envs import RayVecEnv
    from arena_gym.harness.trainers.residual_ppo import window_env
    from tests.arena_gym.harness.trainers.test_policy_iteration import search_task

    task = search_task()
    make = functools.partial(window_env, task.config, 16, 3.0, [task.workload], None)
    far, near = RayVecEnv([make, make], cluster.address), DummyVecEnv([make, make])
    try:
        for venv in (far, near):
            venv.seed(5)
        rng = np.random.default_rng(0)
        obs = [far.reset(), near.reset()]
        assert all((obs[0][k] == obs[1][k]).all() for k in obs[1])
        ended = 0
        for _ in range(60):
            actions = rng.uniform(-3.0, 3.0, (2, 16, 2)).astype(np.float32)
            far.step_async(actions)
            near.step_async(actions)
            (fo, fr, fd, fi), (no, nr, nd, ni) = far.step_wait(), near.step_wait()
            assert all((fo[k] == no[k]).all() for k in no) and (fr == nr).all() and (fd == nd).all()
            for f, n, done in zip(fi, ni, nd, strict=True):
                assert f["TimeLimit.truncated"] == n["TimeLimit.truncated"]
                if done:
                    ended += 1
                    assert all((f["terminal_observation"][k] == n["terminal_observation"][k]).all() for k in no)
        assert ended >= 2  # episodes ended and restarted
        assert far.get_attr("max_jobs") == near.get_attr("max_jobs") == [16, 16]
        assert far.env_is_wrapped(gym.Wrapper) == [True, True]
    finally:
        far.close()
        near.close()


def test_residual_ppo_on_ray_trains_the_network_of_a_local_run(cluster: Cluster, shared_data, tmp_path) -> None:
    """Rollouts in Ray actors and scored episodes as Ray tasks: the weights and history of a run in one process."""
    from arena_gym.harness.trainers.residual_ppo import ResidualPPOConfig, ResidualPPOTrainer
    from tests.arena_gym.harness.trainers.test_residual_ppo import START

    config = ResidualPPOConfig(
        warm_start=str(START.save(tmp_path / "start.json")),
        data_dir=str(shared_data),
        traces=("data:arena/traces/testbed.csv?iteration_divisor=1",),
        steps=128,
        n_envs=2,
        n_steps=32,
        batch_size=32,
        n_epochs=1,
        eval_every=64,
        learning_rate=1e-2,
        validation_limit=1,
        workers=1,
        seed=2,
    )
    far = ResidualPPOTrainer(replace(config, ray=cluster.address), tmp_path / "ray").run(progress=False)
    near = ResidualPPOTrainer(config, tmp_path / "local").run(progress=False)
    assert far.vector.tolist() == near.vector.tolist()
    history = [pd.read_csv(tmp_path / d / "history.csv") for d in ("ray", "local")]
    columns = [c for c in history[1].columns if c not in ("elapsed_s",)]
    assert history[0][columns].equals(history[1][columns]) and len(history[1]) >= 2
    moved = np.array(json.loads(history[1]["weights"].iloc[-1])) - START.vector
    assert np.abs(moved).max() > 1e-3  # the rollouts moved the network
