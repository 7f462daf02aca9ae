"""The disaggregated profiler: measures a testbed once so the estimator can compose any plan's iteration time.

``run.profile_testbed`` launches one rank per device (``worker``); each rank times the runner's
layers at per-device shapes and the wrappers' overheads on its own device (``compute``,
``layers``), then all ranks build the collective tables (``comm``). The merged result is an
:class:`estimator.profile.Profile` (``PROFILE.json``), composed by :mod:`estimator.profiled`.
``cache.ensure_profile`` profiles on first use and caches; ``cli`` is ``arena-gym estimate profile``.
"""
