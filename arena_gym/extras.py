"""The distribution's optional extras: which one provides a third-party package, and the command that installs it."""

from __future__ import annotations

#: Top-level module -> the extra (``pyproject.toml``'s optional dependencies) that installs it.
EXTRAS: dict[str, str] = {
    "torch": "runner",
    "stable_baselines3": "rl",
    "sb3_contrib": "rl",
    "wandb": "rl",
    "rliable": "rl",
    "optuna": "tune",
    "ray": "ray",
}


def install_hint(module: str) -> str | None:
    """``"torch, which is not installed: pip install ..."`` for a module an extra provides, else None."""
    top = module.partition(".")[0]
    extra = EXTRAS.get(top)
    if extra is None:
        return None
    return f"{top}, which is not installed: pip install 'arena-gym[{extra}]' (in a clone: pip install -e '.[{extra}]')"
