"""The fake launcher: a worker's records at the performance model's times, stops at step boundaries, a jumping clock."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from arena_gym.types import Plan, StagePlan
from real_runner.launchers import LAUNCHERS, make_launcher
from real_runner.launchers.base import LaunchRequest, RankSlot
from real_runner.launchers.fake import FakeClock, FakeLauncher
from real_runner.progress import read_progress
from real_runner.spec import WorkerSpec
from real_runner.testbed import LAUNCHERS as TESTBED_LAUNCHERS
from tests.helpers import GPT, table_model

#: Two a40 devices on one node take 2 s per step, four on two nodes 1 s.
PERF = table_model({(GPT, 128, "a40", 1, 2): 2.0, (GPT, 128, "a40", 2, 2): 1.0})


def request(
    tmp_path: Path, number: int, target: int, nodes: tuple[int, ...] = (0,), hold: bool = True, resume: bool = False
) -> LaunchRequest:
    """Generation ``number`` of job ``j`` on 2 devices of each of ``nodes``, training to step ``target`` (``resume``:
    from a checkpoint it requires)."""
    world = 2 * len(nodes)
    spec = WorkerSpec(
        job_id="j",
        model=GPT.name,
        global_batch=128,
        plan=Plan((StagePlan(0, 26, world, 1),), 1),
        target_step=target,
        checkpoint_dir=str(tmp_path / "ckpt"),
        progress_path=str(tmp_path / "progress.jsonl"),
        require_checkpoint=resume,
    )
    gen_dir = tmp_path / f"gen{number}"
    gen_dir.mkdir()
    (gen_dir / "spec.json").write_text(spec.to_json())
    ranks = tuple(RankSlot(node, "localhost", d) for node in nodes for d in (0, 1))
    return LaunchRequest("j", number, gen_dir / "spec.json", ranks, gen_dir, {}, hold=hold)


def records(tmp_path: Path) -> list[tuple[str, float, int]]:
    return [(r.event, r.t, r.step) for r in read_progress(tmp_path / "progress.jsonl")]


def test_a_generation_writes_a_workers_records_at_the_models_step_times(tmp_path) -> None:
    clock = FakeClock(100.0)
    launcher = FakeLauncher(PERF, "a40", clock.time, startup_s=lambda world: 5.0 * world)
    clock.watch(launcher.next_due, launcher.tick)
    gen = launcher.launch(request(tmp_path, 1, target=4))
    assert gen.held_ready() and gen.poll() == [None, None] and launcher.next_due() == float("inf")  # held
    gen.release()  # at 100: 10 s of start-up, then 2 s a step
    assert launcher.next_due() == 110.0
    times = []
    while gen.poll() != [0, 0]:
        clock.sleep(1.0)
        times.append(clock.t)
    assert times == [110.0, 112.0, 114.0, 116.0, 118.0]  # the clock jumps from record to record
    assert records(tmp_path) == [
        ("start", 110.0, 0),
        *[("step", 110.0 + 2 * k, k) for k in (1, 2, 3, 4)],
        ("checkpoint", 118.0, 4),
        ("done", 118.0, 4),
    ]
    rec = read_progress(tmp_path / "progress.jsonl")[2]
    assert (rec.iter_s, rec.samples_per_s, rec.loss) == (2.0, 64.0, None)


def test_a_stop_ends_at_the_next_step_boundary_and_the_next_generation_resumes_there(tmp_path) -> None:
    clock = FakeClock()
    launcher = FakeLauncher(PERF, "a40", clock.time, report_every_s=100.0)
    clock.watch(launcher.next_due, launcher.tick)
    first = launcher.launch(request(tmp_path, 1, target=50))
    first.release()
    clock.t = 7.0  # in step 4 (6..8)
    first.terminate()
    assert first.poll() == [None, None] and launcher.next_due() == 8.0
    clock.sleep(1.0)
    assert first.poll() == [0, 0]
    assert records(tmp_path) == [
        ("start", 0.0, 0),
        ("step", 2.0, 1),
        ("step", 8.0, 4),
        ("checkpoint", 8.0, 4),
        ("stopped", 8.0, 4),
    ]
    second = launcher.launch(request(tmp_path, 2, target=50, nodes=(0, 1), resume=True))  # 4 devices: 1 s a step
    second.release()
    clock.sleep(1.0)
    start, step = read_progress(tmp_path / "progress.jsonl")[-2:]
    assert (start.event, start.step, start.info["resumed_from"]) == ("start", 4, 4)
    assert (step.event, step.t, step.step, step.iter_s) == ("step", 9.0, 5, 1.0)
    assert launcher.next_due() == 8.0 + 46  # thinned: nothing until the last step (records 100 s apart)


def test_held_and_starting_generations_stop_at_once_and_kills_and_signals_end_ranks(tmp_path) -> None:
    clock = FakeClock()
    launcher = FakeLauncher(PERF, "a40", clock.time, startup_s=lambda world: 30.0)
    held = launcher.launch(request(tmp_path, 1, target=10))
    held.terminate()
    assert held.poll() == [0, 0] and records(tmp_path) == []
    starting = launcher.launch(request(tmp_path, 2, target=10))
    starting.release()
    clock.t = 10.0
    starting.terminate()
    assert starting.poll() == [0, 0] and records(tmp_path) == [("stopped", 10.0, 0)]
    killed = launcher.launch(request(tmp_path, 3, target=10, nodes=(0, 1)))
    killed.release()
    clock.t = 45.0
    killed.signal_rank(1, signal.SIGKILL)
    assert killed.poll() == [None, -9, None, None] and launcher.next_due() == float("inf")  # no record comes
    clock.t = 60.0
    killed.kill()
    assert killed.poll() == [-9] * 4 and records(tmp_path)[-1][:2] == ("step", 45.0)  # nothing after the kill
    hung = launcher.launch(request(tmp_path, 4, target=10))
    hung.release()
    hung.signal_rank(0, signal.SIGSTOP)
    clock.t = 1000.0
    assert hung.poll() == [None, None] and records(tmp_path)[-1][:2] == ("step", 45.0)
    with pytest.raises(ValueError, match="SIGTERM, SIGKILL and SIGSTOP only"):
        hung.signal_rank(0, signal.SIGUSR1)


def test_a_missing_checkpoint_or_an_infeasible_grid_ends_a_generation_with_an_error(tmp_path) -> None:
    clock = FakeClock()
    launcher = FakeLauncher(PERF, "a40", clock.time)
    resumed = launcher.launch(request(tmp_path, 2, target=10, resume=True))  # there is no checkpoint
    resumed.release()
    assert resumed.poll() == [2, 2]
    assert read_progress(tmp_path / "progress.jsonl")[-1].event == "error"
    infeasible = launcher.launch(request(tmp_path, 1, target=10, nodes=(0, 1, 2, 3)))  # not in the table
    infeasible.release()
    assert (
        infeasible.poll() == [1] * 8
        and "no feasible plan" in read_progress(tmp_path / "progress.jsonl")[-1].info["message"]
    )


def test_the_fake_launcher_is_registered_and_outlives_no_controller(tmp_path) -> None:
    assert set(TESTBED_LAUNCHERS) < set(LAUNCHERS) and "fake" in LAUNCHERS
    launcher = make_launcher("fake", perf=PERF, gpu_type="a40")
    assert isinstance(launcher, FakeLauncher)
    assert launcher.reattach(request(tmp_path, 1, target=3), {"fake": True}) is None
    not_held = launcher.launch(request(tmp_path, 2, target=3, hold=False))  # on the wall clock: 2 s a step
    assert not_held.poll() == [None, None] and [r[0] for r in records(tmp_path)] == ["start"]  # released at once


def test_a_fake_clock_jumps_to_the_earliest_due_time_or_waits_what_it_is_asked() -> None:
    clock, ticks = FakeClock(5.0), []
    due = [30.0, 12.0]
    clock.watch(lambda: due[0])
    clock.watch(lambda: due[1], lambda: ticks.append(clock.time()))
    clock.sleep(0.5)
    assert clock.time() == 12.0 and ticks == [12.0]
    due[1] = 12.0  # due now, not ahead: the earliest ahead
    clock.sleep(0.5)
    assert clock.time() == 30.0
    due[0] = 10.0  # nothing ahead: the wait lasts what was asked
    clock.sleep(0.5)
    assert clock.time() == 30.5
    due[:] = [float("inf"), float("inf")]
    clock.sleep(2.0)
    assert clock.time() == 32.5 and ticks == [12.0, 30.0, 30.5, 32.5]
