"""In every round, each timed block item runs right after another block, as a block does inside a step (2 gloo ranks)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from real_runner.profiler.settings import ProfileJob, ProfilerSettings  # noqa: E402
from tests.real_runner.distributed_cases import process_group, spawn  # noqa: E402

pytestmark = [pytest.mark.distributed, pytest.mark.timeout(300)]

SETTINGS = ProfilerSettings(samples=(1, 2), overhead_samples=(1,), rounds=1, warmup_rounds=0)


def _record(rank: int, work: str) -> None:
    import torch.distributed as dist

    from real_runner.profiler import compute, grouped
    from real_runner.profiler.timing import Stopwatch

    torch.set_num_threads(1)
    calls: list[str] = []
    models: list[str] = []  # the model of every call
    for module in (compute, grouped):
        real = module.layer_item

        def recording(layer, spec, kind, samples, device, repeats=1, real=real):
            item = real(layer, spec, kind, samples, device, repeats)

            def run(watch):
                calls.append(kind)
                models.append(spec.name)
                return item(watch)

            return run

        module.layer_item = recording
    job = ProfileJob(("gpt__tiny",), SETTINGS, "cpu-2", 1, 2, (0, 1), work)
    device = torch.device("cpu")
    with process_group(Path(work), "order", rank, 2, "gloo"):
        own, _ = dist.new_subgroups(group_size=1)
        curves, _ = compute._layers(job, own, device, Stopwatch(device, "cpu"), lambda *a: None)
        layers = list(calls)
        calls.clear()
        records = grouped.profile_grouped(job, rank, device, lambda *a: None)
        grouped_calls = list(calls)
        two_rounds = dataclasses.replace(SETTINGS, rounds=2)
        both = ProfileJob(("gpt__tiny", "gpt__mini"), two_rounds, "cpu-2", 1, 2, (0, 1), work)
        rounds: dict[str, list[str]] = {}
        for phase, run in (
            ("layers", lambda: compute._layers(both, own, device, Stopwatch(device, "cpu"), lambda *a: None)),
            ("grouped", lambda: grouped.profile_grouped(both, rank, device, lambda *a: None)),
        ):
            models.clear()
            run()
            rounds[phase] = list(models)
    if rank == 0:
        out = {"layers": layers, "grouped": grouped_calls, "curves": curves, "records": records, "models": rounds}
        (Path(work) / "order.json").write_text(json.dumps(out))


def test_every_timed_block_follows_a_block_primers_are_not_recorded_and_models_get_own_rounds(tmp_path):
    spawn(_record, 2, (str(tmp_path),), timeout_s=240)
    got = json.loads((tmp_path / "order.json").read_text())
    # the only blocks after another kind are the untimed primers (one before the plain blocks; one before the
    # tensor-parallel and one before the FSDP blocks on the group), each followed by the blocks it primes
    for phase, primers in (("layers", 1), ("grouped", 2)):
        calls = got[phase]
        cold = [i for i, kind in enumerate(calls) if kind == "block" and (i == 0 or calls[i - 1] != "block")]
        assert len(cold) == primers and all(calls[i + 1] == "block" for i in cold), (phase, calls)
    # one untimed primer per model for the plain blocks: the curves hold the timed items only
    plain = [c for c in got["curves"] if c["layer"] == "block" and c["variant"] == "compute"]
    assert sorted((c["tp"], c["samples"]) for c in plain) == [(1, 1), (1, 2), (2, 1), (2, 2)]
    assert got["layers"].count("block") == 1 + 4 + 2  # primer, plain (tp 1, 2 x samples 1, 2), fsdp + tp at 1
    assert got["grouped"].count("block") == 2 + 2 + 4  # primers, tp (samples 1, 2), fsdp and fsdp_sync
    blocks = [r for r in got["records"] if r["layer"] == "block"]
    assert sorted((r["wrapper"], r["samples"]) for r in blocks) == sorted(
        [("tp", 1), ("tp", 2)] + [(w, n) for w in ("fsdp", "fsdp_sync") for n in (1, 2)]
    )
    # on one device and on real groups every round runs one model's items: all of gpt__tiny's rounds, then gpt__mini's
    for phase, models in got["models"].items():
        switches = sum(a != b for a, b in zip(models, models[1:]))
        assert models[0] == "gpt__tiny" and models[-1] == "gpt__mini" and switches == 1, phase
