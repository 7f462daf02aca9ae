"""The built-in performance models and model families, registered under their names (the
``arena_gym.catalogues`` entry point)."""

from __future__ import annotations

from arena_gym.registry import perf_registry


def register() -> None:
    """Register the estimator, the ``measured:CSV`` / ``profiled:PROFILE.json`` / ``calibrated:PARAMS.json``
    prefixes and the built-in model families."""
    registry = perf_registry()
    registry.register("estimator", "estimator:default_perf_model", description="AP-tailored estimator (built in)")
    registry.register_prefix("measured", "estimator.measured:measured_perf_model", "CSV")
    registry.register_prefix("profiled", "estimator.profiled:profiled_perf_model", "PROFILE.json")
    registry.register_prefix("calibrated", "estimator.perfmodel:calibrated_perf_model", "PARAMS.json")
    from estimator import families

    families.register()
