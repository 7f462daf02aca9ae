"""What the learned-agent tests share: a fast Tiny env setting (8 short jobs, a few dozen steps an episode)."""

from __future__ import annotations

ENV_ID = "ArenaGym/Tiny-v1"
#: Small workloads (8 short jobs) on the Tiny cluster: an episode is a few dozen steps.
TRACE = "synthetic:n_jobs=8,arrival=poisson,rate_per_h=6,gpu_types=a40+a10,max_gpus=4,iter_log_mean=6.5"
PERF = "estimator"
#: EnvConfig overrides of the Tiny env used by these tests.
ENV_OVERRIDES = {"trace": TRACE, "perf": PERF}
