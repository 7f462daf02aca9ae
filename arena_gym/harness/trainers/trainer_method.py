"""What the training methods built on one trainer class share: the check before a study, and the config file."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path
from typing import Any, ClassVar


class TrainerMethod:
    """A method whose trainer is built from ``(config, out)`` and loads what it needs as it is built."""

    #: The trainer (a class taking the config and the output directory); building it reads the data it needs.
    trainer: ClassVar[type[Any]]

    def check(self, config: Any) -> None:
        """Build the trainer once in a scratch folder: a missing data folder, warm start or teacher fails here."""
        with tempfile.TemporaryDirectory(prefix="tune-check-") as folder:
            self.trainer(config, Path(folder) / "run")

    def config_json(self, config: Any) -> dict[str, Any]:
        """The config's fields, as ``arena-gym train --method NAME --config`` reads them."""
        return dataclasses.asdict(config)
