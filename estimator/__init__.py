"""AP-tailored performance estimator and grid planner.

* :mod:`estimator.hardware`: GPU catalogue (``get_gpu``), links and node presets;
* :mod:`estimator.zoo`: model zoo (``get_model``, ``known_models``) and user transformers;
* :mod:`estimator.costmodel`: per-plan iteration time and memory (``estimate_plan``);
* :mod:`estimator.planner`: pruned plan search per grid, Pareto sets, DP view, exhaustive search;
* :mod:`estimator.table`: vectorised, disk-cached performance tables;
* :mod:`estimator.calibration`: fitting the efficiency parameters, validation (MAPE);
* :mod:`estimator.perfmodel`: the ``PerfModel`` (``default_perf_model``);
* :mod:`estimator.measured`: a PerfModel over measured tables (the artifact's format).

The estimator never imports the simulator.
"""

from estimator.costmodel import PlanEstimate, estimate_plan
from estimator.hardware import GpuSpec, get_gpu, known_gpus
from estimator.params import EstimatorParams, default_params
from estimator.perfmodel import EstimatorPerfModel, GridPlans, default_perf_model
from estimator.planner import PlannerConfig
from estimator.zoo import ModelArch, TransformerSpec, get_model, known_models

__all__ = [
    "EstimatorParams",
    "EstimatorPerfModel",
    "GpuSpec",
    "GridPlans",
    "ModelArch",
    "PlanEstimate",
    "PlannerConfig",
    "TransformerSpec",
    "default_params",
    "default_perf_model",
    "estimate_plan",
    "get_gpu",
    "get_model",
    "known_gpus",
    "known_models",
]
