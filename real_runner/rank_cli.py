"""What the rank entry points (:mod:`real_runner.worker.__main__`, :mod:`real_runner.profiler.worker.__main__`) share
(CLI code): a parser whose usage errors are one line with exit code 2, the log format, and a fast process exit."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Mapping
from typing import NoReturn


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose usage errors print one ``error: ...`` line and exit with code 2 (argparse's
    usage-error code, which the rank entry points use for all bad input)."""

    def error(self, message: str) -> NoReturn:
        """Exit with code 2 after one line naming the problem."""
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


def log_to_stderr(level: str, env: Mapping[str, str]) -> None:
    """Log records at ``level`` and above to stderr, each line naming the rank (``RANK`` in ``env``)."""
    logging.basicConfig(
        level=level,
        stream=sys.stderr,
        format=f"%(asctime)s rank{env.get('RANK', '0')} %(levelname)s %(name)s: %(message)s",
    )


def exit_now(code: int) -> NoReturn:
    """Flush the output streams and the logs, then exit with ``code`` at once, skipping the interpreter's
    slow teardown of torch's threads (seconds on CPU)."""
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(code)
