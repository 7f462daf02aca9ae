"""``python -m arena_gym``: the arena-gym command line."""

import sys

from arena_gym.harness.cli import main

if __name__ == "__main__":
    sys.exit(main())
