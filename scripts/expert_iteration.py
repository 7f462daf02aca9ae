"""Expert iteration (DAgger) of a slot-action agent with a search policy as teacher.

Each round plays train windows with the DAgger mixture (the teacher's action, with a
probability that halves every round, else the agent's), labels every visited state with the
teacher's action, and refits the agent on every round's labels (see
:mod:`arena_gym.harness.expert_iteration`). The result is ``OUT/best_model.zip``, a policy as
``sb3:OUT/best_model.zip`` for ``arena-gym evaluate``, ``simulate`` or ``deploy``.

``--config FILE`` takes the fields from a JSON file with a ``config`` object (an earlier run's
``config.json``); options given beside it win.

Example (the documented run, from the documented slot agent, labelling in 2 processes)::

    python scripts/expert_iteration.py --warm-start benchmarks/results/train_run/best_model.zip \\
        --teacher lookahead --rounds 3 --episodes 4 --workers 2 --out benchmarks/results/expert_iteration
"""

from __future__ import annotations

import argparse
import sys


def parse_args() -> argparse.Namespace:
    """One option per field of ExpertIterationConfig, plus ``--out`` and ``--config``."""
    from arena_gym.harness.cli.trainer_script import trainer_args
    from arena_gym.harness.expert_iteration import ExpertIterationConfig

    return trainer_args(__doc__, "expert_iteration", ExpertIterationConfig)


def main() -> int:
    """Run every round; a bad option, file or data folder is one line on stderr and exit code 2."""
    from arena_gym.harness.cli.trainer_script import run_trainer_script
    from arena_gym.harness.expert_iteration import ExpertIteration, ExpertIterationConfig

    done = "best on validation: round {round}, {validation_score:.4f} of Arena -> {out}/best_model.zip"
    return run_trainer_script(parse_args(), "expert_iteration", ExpertIterationConfig, ExpertIteration, done, dict)


if __name__ == "__main__":
    sys.exit(main())
