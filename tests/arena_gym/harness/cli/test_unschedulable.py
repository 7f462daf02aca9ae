"""Jobs that can never run are named, with the policy and the reason: at the end of an episode and by ``trace info``."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from arena_gym.harness.cli import main

REPO = Path(__file__).resolve().parents[4]
RESIDUAL = f"residual:{REPO / 'benchmarks' / 'results' / 'residual' / 'train' / 'residual.json'}"

TRACE = (
    "job_id,submit_time_s,model,global_batch,iterations,gpu_type,num_gpus,deadline_s\n"
    "big,0,gpt__39B,2048,10,,,\n"
    "h,1,gpt__1.3B,32,10,h100,1,\n"
    "ok,2,gpt__1.3B,32,10,a40,1,\n"
    "wide,3,gpt__1.3B,32,10,a40,128,\n"
)
OOM = "big: gpt__39B at batch 2048 is infeasible (out of memory) on every shape of cluster tiny (a40+a10, up to 4 GPUs)"
ABSENT = "h: requests GPU type h100, which cluster tiny lacks"
WIDE = "wide: requests 128 GPUs, more than cluster tiny has of a40 (4)"


def test_an_episode_names_the_jobs_it_left_waiting_with_the_policy_and_the_reason(tmp_path, caplog) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text(TRACE)
    with caplog.at_level(logging.WARNING, logger="arena_gym.sim.backend"):
        code = main(["simulate", "--policy", "fcfs", "--trace", str(trace), "--cluster", "tiny", "--no-plots",
                     "--out", str(tmp_path / "run")])  # fmt: skip
    assert code == 0
    [warning] = [r.getMessage() for r in caplog.records if r.name == "arena_gym.sim.backend"]
    assert (
        warning
        == f"policy fcfs ended the episode with 3 job(s) waiting and nothing left to wait for: {OOM}; {ABSENT}; {WIDE}"
    )
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["jobs_finished"] == 1


def test_trace_info_lists_the_jobs_a_cluster_can_never_run(tmp_path, capsys) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text(TRACE)
    assert main(["trace", "info", str(trace), "--cluster", "tiny"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["unschedulable"] == {"cluster": "tiny", "jobs": {"big": OOM[5:], "h": ABSENT[3:], "wide": WIDE[6:]}}
    assert main(["trace", "info", str(trace), "--cluster", "arena-1280"]) == 0
    assert json.loads(capsys.readouterr().out)["unschedulable"]["jobs"] == {
        "h": "requests GPU type h100, which cluster arena-1280 lacks"
    }


@pytest.mark.parametrize("policy", ["arena", "arena-gittins-32-f", "lookahead", RESIDUAL])
def test_belief_policies_skip_a_job_they_cannot_size_as_arena_does_and_name_it(tmp_path, caplog, policy) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text(TRACE)
    with caplog.at_level(logging.WARNING):
        code = main(["simulate", "--policy", policy, "--trace", str(trace), "--cluster", "tiny", "--no-plots",
                     "--out", str(tmp_path / "run")])  # fmt: skip
    assert code == 0
    # Arena moves h to a type the cluster has; every policy leaves the two jobs no shape can run
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["jobs_finished"] == 2
    [warning] = [r.getMessage() for r in caplog.records if r.name == "arena_gym.sim.backend"]
    assert warning.endswith(f"2 job(s) waiting and nothing left to wait for: {OOM}; {WIDE}")
    named = {r.getMessage().split(":")[0] for r in caplog.records if r.name == "agents.arena.gittins"}
    assert named == (set() if policy == "arena" else {"job big", "job h", "job wide"})
