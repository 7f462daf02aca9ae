"""The command-line flag of a config field, so that a config's one-line errors name what the user typed."""

from __future__ import annotations

#: Fields whose flag is not ``--`` and the field's name with dashes (flags that switch a default off among them).
_RENAMED = {
    "round_s": "--round",
    "horizon_s": "--horizon",
    "traces": "--trace",
    "out_dir": "--out",
    "event_decisions": "--no-event-decisions",
    "bounds": "--no-bounds",
    "progress": "--no-progress",
    "checkpoint_every_s": "--checkpoint-every",
    "stale_timeout_s": "--stale-timeout",
    "status_every_s": "--status-every",
    "pad_reference": "--pad-jct",
    "overhead": "--overhead-scale",
}


def flag(field: str) -> str:
    """The flag that sets the config field ``field``: ``--`` and its name with dashes (``window_jobs``:
    ``--window-jobs``), or the flag it is renamed to (``round_s``: ``--round``)."""
    return _RENAMED.get(field, "--" + field.replace("_", "-"))
