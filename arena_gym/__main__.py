"""``python -m arena_gym``: the arena-gym command line."""

import signal
import sys

from arena_gym.harness.cli import EXIT_INTERRUPTED, main

if __name__ == "__main__":
    code = main()
    if code == EXIT_INTERRUPTED:
        # Under ``-m``, CPython ends the process by SIGINT at exit, not with this code, when the Ctrl-C escaped
        # code it ran for an extension (torch's import runs some) before the command caught it. Blocked, that
        # last SIGINT stays pending, and the process exits with 130 as the command reported.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    sys.exit(code)
