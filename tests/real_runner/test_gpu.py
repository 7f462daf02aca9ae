"""The correctness oracle on CUDA with nccl (skipped without CUDA)."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from real_runner.executor import Trainer  # noqa: E402
from real_runner.plans import model_spec, resolve_plan  # noqa: E402
from tests.real_runner.distributed_cases import (  # noqa: E402
    BATCH,
    LR,
    MODEL,
    ORACLE,
    ORACLE_STEPS,
    SEED,
    make_plan,
    oracle_case,
    reference_losses,
    spawn,
)

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.timeout(600),
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]
TOL = 1e-4  # CUDA kernels sum in another order than the CPU reference


def test_one_gpu_reproduces_the_cpu_losses():
    torch.backends.cuda.matmul.allow_tf32 = False
    spec = model_spec(MODEL)
    trainer = Trainer(
        spec,
        resolve_plan(spec, make_plan((0, 6, 1, 1)), BATCH, 1),
        rank=0,
        global_batch=BATCH,
        lr=LR,
        seed=SEED,
        device=torch.device("cuda", 0),
    )
    losses = [trainer.train_step(s) for s in range(ORACLE_STEPS)]
    assert max(abs(a - b) for a, b in zip(losses, reference_losses(ORACLE_STEPS))) <= TOL


@pytest.mark.distributed
def test_every_plan_that_fits_the_gpus_reproduces_the_cpu_losses_with_nccl(tmp_path):
    gpus = min(torch.cuda.device_count(), 4)
    if gpus < 2:
        pytest.skip("nccl ranks need one GPU each: fewer than 2 GPUs")
    spawn(oracle_case, gpus, (gpus, str(tmp_path), "nccl"), timeout_s=500)
    out = json.loads((tmp_path / "oracle.json").read_text())
    assert set(out) == {name for name, plan in ORACLE.items() if plan.num_gpus <= gpus}
    reference = reference_losses(ORACLE_STEPS)
    for name, losses in out.items():
        assert max(abs(a - b) for a, b in zip(losses, reference)) <= TOL, name
