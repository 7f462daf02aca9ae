"""The worker process: bad input exits 2 with one line and writes nothing; SIGTERM checkpoints and exits 0;
the job resumes under another plan with the uninterrupted trajectory; other failures exit 1 with the cause."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from arena_gym.types import PipeSchedule, Plan, StagePlan
from real_runner.checkpoint_files import JobIdentity, prepare_partial, publish
from real_runner.progress import ProgressTail, read_progress
from real_runner.ranks import spawn_ranks
from real_runner.spec import WorkerSpec

REPO = Path(__file__).resolve().parents[2]
DP2 = Plan((StagePlan(0, 6, 2, 1),), 1)
PP2_1F1B = Plan((StagePlan(0, 2, 1, 1), StagePlan(2, 6, 1, 1)), 4, PipeSchedule.ONE_F_ONE_B)


def make_spec(tmp: Path, plan: Plan = DP2, **kw) -> WorkerSpec:
    return WorkerSpec(
        **{
            "job_id": "j1",
            "model": "gpt__tiny",
            "global_batch": 8,
            "plan": plan,
            "target_step": 30,
            "checkpoint_dir": str(tmp / "ckpt"),
            "progress_path": str(tmp / "progress.jsonl"),
            **kw,
        }
    )


def fake_checkpoint(ckpt: Path, step: int, identity: JobIdentity) -> Path:
    """A complete-looking checkpoint (manifest and hashes consistent) holding no real state."""
    (prepare_partial(ckpt, step) / ".metadata").write_bytes(b"not a real checkpoint")
    return publish(ckpt, step, identity, {}).path


def snapshot(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _bad_case(tmp: Path, name: str) -> tuple[Path, dict[str, str], str]:
    """Prepare case ``name`` in ``tmp``: (spec file, extra env, expected stderr fragment)."""
    tmp.mkdir()
    spec, env = make_spec(tmp), {"RANK": "0", "WORLD_SIZE": "2"}
    text = None
    if name == "world size":
        env["WORLD_SIZE"] = "4"
        expected = "needs 2 ranks (sum over stages of dp x tp) but the world size is 4"
    elif name == "tp":
        spec, env["WORLD_SIZE"] = make_spec(tmp, Plan((StagePlan(0, 6, 1, 3),), 1)), "3"
        expected = "tensor-parallel degree 3 does not divide the 4 heads"
    elif name == "layers":
        spec, env["WORLD_SIZE"] = make_spec(tmp, Plan((StagePlan(0, 2, 1, 1), StagePlan(2, 5, 1, 1)), 2)), "2"
        expected = "stages end at layer 5, but gpt__tiny has 6 layers"
    elif name == "micro-batches":
        spec = make_spec(tmp, Plan((StagePlan(0, 6, 2, 1),), 3))
        expected = "3 micro-batches do not divide the per-replica batch 4"
    elif name == "missing checkpoint":
        spec = make_spec(tmp, require_checkpoint=True)
        expected = "no checkpoint in"
    elif name == "corrupt checkpoint":
        path = fake_checkpoint(tmp / "ckpt", 5, spec.identity())
        (path / ".metadata").write_bytes(b"changed after the manifest")
        expected = "no usable checkpoint in"
    elif name == "another model":
        fake_checkpoint(tmp / "ckpt", 5, make_spec(tmp, model="gpt__mini").identity())
        expected = "belongs to another job (model 'gpt__mini' in the checkpoint, 'gpt__tiny' in the job)"
    elif name == "unknown model":
        spec = make_spec(tmp, model="gpt__huge")
        expected = "unknown model 'gpt__huge'"
    elif name == "spec field":
        text = spec.to_json().replace('"seed"', '"sed"')
        expected = "unknown field(s) sed"
    else:  # rank
        env["RANK"] = "2"
        expected = "RANK 2 is outside WORLD_SIZE 2"
    path = tmp / "spec.json"
    path.write_text(text or spec.to_json())
    return path, env, expected


BAD = [
    "world size",
    "tp",
    "layers",
    "micro-batches",
    "missing checkpoint",
    "corrupt checkpoint",
    "another model",
    "unknown model",
    "spec field",
    "rank",
]


def test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path):
    cases = {name: _bad_case(tmp_path / name.replace(" ", "_"), name) for name in BAD}
    before = snapshot(tmp_path)
    procs = {
        name: subprocess.Popen(
            [sys.executable, "-m", "real_runner.worker", "--spec", str(path)],
            cwd=REPO,
            env={**os.environ, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for name, (path, env, _) in cases.items()
    }
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=120)
        lines = err.decode().strip().splitlines()  # log lines (e.g. a skipped checkpoint), then one error line
        assert proc.returncode == 2, (name, err.decode())
        assert [i for i, line in enumerate(lines) if line.startswith("error: ")] == [len(lines) - 1], (name, lines)
        assert cases[name][2] in lines[-1], (name, lines)
        assert not out
    assert snapshot(tmp_path) == before
    assert not any(p.name == "progress.jsonl" for p in tmp_path.rglob("*"))
    usage = subprocess.run(
        [sys.executable, "-m", "real_runner.worker"], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert usage.returncode == 2 and usage.stderr.startswith("error: the following arguments are required: --spec")
    assert len(usage.stderr.strip().splitlines()) == 1


@pytest.mark.skipif(__import__("importlib").util.find_spec("torch") is None, reason="needs torch")
def test_a_failure_exits_1_with_the_cause_and_an_error_record(tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("the failure provoked here (device cuda without CUDA) needs a machine without CUDA")
    spec = make_spec(tmp_path, Plan((StagePlan(0, 6, 1, 1),), 1), device="cuda")
    (tmp_path / "spec.json").write_text(spec.to_json())
    proc = subprocess.run(
        [sys.executable, "-m", "real_runner.worker", "--spec", str(tmp_path / "spec.json")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1
    assert (
        proc.stderr.strip().splitlines()[-1] == "error: RuntimeError: the spec asks for device cuda but CUDA is "
        "not available"
    )
    (rec,) = read_progress(tmp_path / "progress.jsonl")
    assert rec.event == "error" and "device cuda" in rec.info["message"]


def _wait_until(job, tail, seen, predicate, what, timeout=240.0):
    deadline = time.monotonic() + timeout
    while True:
        seen += tail.poll()
        if any(predicate(r) for r in seen):
            return
        assert all(c is None for c in job.poll()), job.log_tail(0)
        assert time.monotonic() < deadline, f"{what} within {timeout:.0f} s"
        time.sleep(0.05)


@pytest.mark.distributed
@pytest.mark.timeout(400)
def test_sigterm_checkpoints_and_the_job_resumes_under_other_plans(tmp_path):
    """DP2 -> (pre-launched) PP2 1F1B -> single: two SIGTERM stops, a resume after each, the whole
    trajectory equal to the uninterrupted run, no completed step lost."""
    pytest.importorskip("torch")
    from tests.real_runner.distributed_cases import reference_losses

    specs = {
        "a": make_spec(tmp_path, DP2, target_step=500, checkpoint_every_steps=4),
        "b": make_spec(tmp_path, PP2_1F1B, target_step=500, require_checkpoint=True),
    }
    for name, spec in specs.items():
        (tmp_path / f"{name}.json").write_text(spec.to_json())
    cores = sorted(os.sched_getaffinity(0))
    tail, seen = ProgressTail(specs["a"].progress_path), []
    job_a = spawn_ranks(
        tmp_path / "a.json",
        2,
        env=os.environ,
        log_dir=tmp_path / "logs-a",
        cwd=REPO,
        pin_cores=cores[:2] if len(cores) >= 2 else None,
    )
    job_b = None
    try:
        _wait_until(job_a, tail, seen, lambda r: r.event == "step" and r.step >= 6, "6 steps of DP2")
        # the next generation imports torch while DP2 trains, and waits for its release
        job_b = spawn_ranks(tmp_path / "b.json", 2, env=os.environ, log_dir=tmp_path / "logs-b", cwd=REPO, hold=True)
        deadline = time.monotonic() + 240
        while not job_b.held_ready():
            assert all(c is None for c in job_b.poll()), job_b.log_tail(0)
            assert time.monotonic() < deadline, "pre-launched ranks not ready within 240 s"
            time.sleep(0.05)
        assert job_a.stop(grace_s=60) == [0, 0], job_a.log_tail(0)
        seen += tail.poll()
        k = max(r.step for r in seen if r.event == "step")
        assert (seen[-1].event, seen[-1].step, seen[-1].ckpt_step) == ("stopped", k, k)  # no step lost
        assert any(r.event == "checkpoint" and r.ckpt_step == k for r in seen)
        job_b.release()  # reads the checkpoint of step k only now
        _wait_until(job_b, tail, seen, lambda r: r.event == "step" and r.step >= k + 4, "4 steps of PP2")
        assert job_b.stop(grace_s=60) == [0, 0], job_b.log_tail(0)
    finally:
        job_a.kill()
        if job_b is not None:
            job_b.kill()
    seen += tail.poll()
    starts = [r for r in seen if r.event == "start"]
    assert [r.info["resumed_from"] for r in starts] == [None, k]
    assert starts[1].step == k and starts[1].info["plan"]["plan"]["schedule"] == "1f1b"
    assert starts[1].info["timings"]["hold_s"] > 0
    m = seen[-1].step
    assert seen[-1].event == "stopped" and seen[-1].ckpt_step == m >= k + 4

    final = make_spec(tmp_path, Plan((StagePlan(0, 6, 1, 1),), 2), target_step=m + 3, require_checkpoint=True)
    (tmp_path / "c.json").write_text(final.to_json())
    proc = subprocess.run(
        [sys.executable, "-m", "real_runner.worker", "--spec", str(tmp_path / "c.json")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    seen += tail.poll()
    assert seen[-1].event == "done" and seen[-1].step == seen[-1].ckpt_step == m + 3
    start = [r for r in seen if r.event == "start"][-1]
    assert start.step == m and set(start.info["timings"]) >= {"import_s", "rendezvous_s", "build_s", "load_s"}
    losses = {r.step: r.loss for r in seen if r.event == "step"}
    assert sorted(losses) == list(range(1, m + 4))
    reference = reference_losses(m + 3)
    assert max(abs(losses[s] - reference[s - 1]) for s in losses) <= 1e-5


@pytest.mark.timeout(120)
def test_a_held_job_stopped_before_its_release_exits_0_and_writes_nothing(tmp_path):
    pytest.importorskip("torch")
    spec = make_spec(tmp_path, Plan((StagePlan(0, 6, 1, 1),), 1))
    (tmp_path / "s.json").write_text(spec.to_json())
    job = spawn_ranks(tmp_path / "s.json", 1, env=os.environ, log_dir=tmp_path / "logs", cwd=REPO, hold=True)
    try:
        deadline = time.monotonic() + 100
        while not job.held_ready():
            assert job.poll() == [None] and time.monotonic() < deadline, job.log_tail(0)
            time.sleep(0.05)
        assert job.stop(grace_s=30) == [0]
    finally:
        job.kill()
    assert not Path(spec.progress_path).exists() and not Path(spec.checkpoint_dir).exists()
