"""The ``arena-gym`` command line: one entry point, subcommands resolved lazily from a registry.

Bad input of any kind ends with one line ``arena-gym CMD: error: ...`` on stderr and exit code
2 (argument errors included: no usage block); Ctrl-C ends with one line and exit code 130.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import logging
import os
import signal
import sys
import textwrap
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import NoReturn

from arena_gym.extras import install_hint
from arena_gym.registry import resolve

#: Subcommand name -> ``module:configure`` (``configure(parser)`` adds arguments and a handler).
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "simulate": ("arena_gym.harness.cli.simulate:configure", "run one policy on a trace and cluster"),
    "compare": ("arena_gym.harness.cli.compare:configure", "compare policies on the same traces and cluster"),
    "trace": ("arena_gym.harness.cli.trace:configure", "inspect or convert traces"),
    "estimate": ("arena_gym.harness.cli.estimate:configure", "query, validate or calibrate the performance estimator"),
    "train": (
        "arena_gym.harness.cli.train:configure",
        "train a learned agent: --method sb3 (default), es, residual-ppo, expert-iteration or policy-iteration",
    ),
    "tune": ("arena_gym.harness.cli.tune:configure", "a hyperparameter study (Optuna) of a learned agent's trainer"),
    "fit-belief": (
        "arena_gym.harness.cli.fit_belief:configure",
        "refit the packaged beliefs over jobs' unknown work (search and Gittins policies)",
    ),
    "evaluate": (
        "arena_gym.harness.cli.evaluate:configure",
        "score policies on a workload suite with paired statistics vs Arena",
    ),
    "deploy": (
        "arena_gym.harness.cli.deploy:configure",
        "run a policy on a live testbed with real training jobs; sim vs live",
    ),
    "list": (
        "arena_gym.harness.cli.listing:configure",
        "list the policies, prefixes, performance models, clusters, train methods and tune targets",
    ),
}
#: Exit codes: bad input, interrupted by Ctrl-C (128 + SIGINT), stopped by SIGTERM (128 + SIGTERM).
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the command is so that it cleans up as after Ctrl-C (partial outputs, locks)."""


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """While the command runs (in the main thread), SIGTERM raises :class:`Terminated`; the old handler after.

    A forked worker inherits the handler but not the command: there SIGTERM keeps its default (the process ends),
    as a pool that terminates its workers expects.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    owner = os.getpid()

    def on_sigterm(signum: int, frame: object) -> None:
        if os.getpid() != owner:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        raise Terminated

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def one_line(text: object) -> str:
    """Collapse whitespace so a message stays on one line."""
    return " ".join(str(text).split())


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (``PROG: error: MESSAGE (see PROG --help)``), exit 2."""

    def error(self, message: str) -> NoReturn:
        """Print one line and exit with code 2."""
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")


class HelpFormatter(argparse.HelpFormatter):
    """argparse's help layout, wrapping at spaces only: a name such as ``arena-gittins-32-f`` stays on one line."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The argument parser; only the subcommand named in ``argv`` is configured (imported).

    Every subcommand is listed with its help text, but its module is imported only when
    ``argv`` selects it, so ``arena-gym --help`` and each command load only what they need.
    ``argv=None`` configures every subcommand (for documentation and tests).
    """
    chosen = _subcommand(argv) if argv is not None else None
    parser = OneLineParser(prog="arena-gym", description="Arena scheduling research gym", formatter_class=HelpFormatter)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (target, help_text) in SUBCOMMANDS.items():
        if argv is not None and name != chosen:
            sub.add_parser(name, help=help_text, description=help_text, add_help=False, formatter_class=HelpFormatter)
            continue
        try:
            configure = resolve(target)
        except ImportError as exc:  # an optional extra is not installed
            sub.add_parser(name, help=f"{help_text} (unavailable: {exc})").set_defaults(
                handler=lambda _args, _e=exc, _n=name: _unavailable(_n, _e)
            )
            continue
        configure(sub.add_parser(name, help=help_text, description=help_text, formatter_class=HelpFormatter))
    return parser


def _freeze_loaded_code(modules: Iterable[str]) -> None:
    """Import ``modules`` (what the command will load anyway) and exclude every object that exists
    by then, the loaded modules above all, from the cyclic garbage collector's scans for the rest
    of the process.

    A command creates many objects (jobs, events, tables, plot artists) and so triggers
    collections; a full one walks everything tracked, and the loaded code (numpy, the estimator,
    matplotlib) is most of it: about a tenth of a short simulation's CPU time, the collection
    at exit included. Only the program does this, never a caller of :func:`main` in its own
    process (a frozen object is never collected).
    """
    gc.freeze()  # first what is loaded now, so that importing the rest does not rescan it
    for name in modules:
        importlib.import_module(name)
    gc.freeze()


def _subcommand(argv: Sequence[str]) -> str | None:
    """The first argument that is not a top-level option: the subcommand's name, if any."""
    for arg in argv:
        if not arg.startswith("-"):
            return arg
    return None


def _unavailable(name: str, exc: Exception) -> int:
    print(f"arena-gym {name}: unavailable, missing dependency: {exc}", file=sys.stderr)
    return EXIT_BAD_INPUT


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    text = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
    return one_line(text.splitlines()[0]) if text.strip() else type(exc).__name__


def cwd_importable() -> None:
    """Make the current folder importable for ``module:attr`` specs (``--policy mymodule:MyPolicy``), as
    ``python -m`` does: appended to ``sys.path``, so a local file never shadows an installed package."""
    here = os.getcwd()
    if not any(os.path.abspath(p or os.curdir) == here for p in sys.path):
        sys.path.append(here)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, run the subcommand; bad input -> one line on stderr and exit code 2.

    Without ``argv`` (the program itself: ``arena-gym``, ``python -m arena_gym``) the code the
    command loads is frozen out of the cyclic garbage collector (see :func:`_freeze_loaded_code`).
    """
    try:
        with _sigterm_as_interrupt():
            return _parse_and_run(list(sys.argv[1:] if argv is None else argv), program=argv is None)
    except (KeyboardInterrupt, Exception) as exc:  # stopped before the command's own guard: parsing, loading
        interrupt = _interrupt_behind(exc)
        if interrupt is None:
            raise
        return _stopped("arena-gym", interrupt)


def _parse_and_run(argv: list[str], program: bool) -> int:
    try:
        parser = build_parser(argv)  # help texts list the registries, whose catalogues may fail to load
    except ValueError as exc:
        print(f"arena-gym: error: {_error_text(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argument errors (exit 2, one line) and --help (exit 0)
        return exc.code if isinstance(exc.code, int) else EXIT_BAD_INPUT
    if program:
        _freeze_loaded_code(args.preload(args) if hasattr(args, "preload") else ())
    cwd_importable()
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(name)s: %(message)s"
    )
    return guarded(f"arena-gym {args.command}", lambda: args.handler(args))


def guarded(prog: str, body: Callable[[], int | None]) -> int:
    """Run ``body`` (a command, or a script's work) under the error contract: ValueError/OSError/KeyError or a missing
    extra -> one line ``PROG: error: ...`` and exit code 2; Ctrl-C -> one line and 130; SIGTERM -> one line and 143."""
    try:
        with _sigterm_as_interrupt():
            return int(body() or 0)
    except KeyboardInterrupt as exc:
        return _stopped(prog, exc)
    except Exception as exc:
        interrupt = _interrupt_behind(exc)
        if interrupt is not None:
            return _stopped(prog, interrupt)
        if isinstance(exc, (ValueError, OSError, KeyError)):
            print(f"{prog}: error: {_error_text(exc)}", file=sys.stderr)
            return EXIT_BAD_INPUT
        hint = install_hint(exc.name or "") if isinstance(exc, ModuleNotFoundError) else None
        if hint is None:
            raise
        print(f"{prog}: error: this command needs {hint}", file=sys.stderr)
        return EXIT_BAD_INPUT


def _interrupt_behind(exc: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C or SIGTERM that ``exc`` was raised from, if any. Code the signal interrupts may report it as
    another error: an extension module's initialisation (pybind11's) as ``ImportError: initialization failed``,
    a class being created (matplotlib's, on import) as ``RuntimeError: Error calling __set_name__``."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None


def _stopped(prog: str, interrupt: KeyboardInterrupt) -> int:
    """One line for a command stopped by Ctrl-C or SIGTERM; its exit code (130 or 143)."""
    terminated = isinstance(interrupt, Terminated)
    print(f"{prog}: {'terminated' if terminated else 'interrupted'}", file=sys.stderr)
    return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
