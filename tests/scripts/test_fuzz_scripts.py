"""Fuzz the arguments of every ``scripts/`` entry point in-process (each script's ``main(argv)``), with its work (the
evaluation, the tour, the training) replaced by a stub that records it was reached.

Valid arguments reach the work (``update_docs_tables`` runs for real, in a scratch root); a nonsense value, a
missing value or an unknown flag ends with exit code 2 and exactly one ``SCRIPT: error:`` line before any work.
Never a traceback, never a hang, nothing outside the scratch folder changed.
"""

from __future__ import annotations

import importlib
import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from tests.fuzzing import case_timeout, fuzz_budget
from tests.helpers import load_script

TIMEOUT_S = 30.0
SCRIPTS = {name: load_script(name) for name in ("regenerate_results", "run_tour", "train_agent", "update_docs_tables")}
_SCRATCH = tempfile.TemporaryDirectory(prefix="fuzz-scripts-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
ROOT = Path(_SCRATCH.name)
_NAMES = iter(range(10**9))
A_FILE = ROOT / "plain.txt"
A_FILE.write_text("keep me\n")
FULL = ROOT / "full"
(FULL / "x").mkdir(parents=True)
#: An evaluation directory (its ``config.json`` copied from a committed one) and a damaged one.
EVAL, NO_TABLE, BAD_CONFIG = ROOT / "eval", ROOT / "no-table", ROOT / "bad-config"
#: update_docs_tables: sources under its (scratch) root, and pages that read them.
DOCS = ROOT / "docs-root"
PAGES = {
    "good.md": "<!-- table:board.csv columns=policy sort=policy -->\nx\n<!-- /table -->\n<!-- text:note.txt -->\n<!-- /text -->\n",
    "plain.md": "no blocks here\n",
}
DEFAULT_PAGES = ("README.md", "docs/page.md")
BAD_PAGES = {
    "missing.md": "<!-- text:nothere.txt -->\n<!-- /text -->\n",
    "option.md": "<!-- table:board.csv colour=red -->\n<!-- /table -->\n",
    "column.md": "<!-- table:board.csv columns=nope -->\n<!-- /table -->\n",
    "sort.md": "<!-- table:board.csv sort=nope -->\n<!-- /table -->\n",
    "badcsv.md": "<!-- table:broken.csv -->\n<!-- /table -->\n",
    "binsrc.md": "<!-- text:binary.txt -->\n<!-- /text -->\n",
}


class Reached(Exception):
    """The stubbed work was reached: every argument had been accepted."""


def _setup() -> None:
    committed = next(p for p in sorted((Path(__file__).parents[2] / "benchmarks" / "results").rglob("config.json")))
    for folder in (EVAL, NO_TABLE, BAD_CONFIG):
        folder.mkdir()
    for folder in (EVAL, NO_TABLE):
        shutil.copy(committed, folder / "config.json")
    (EVAL / "per_workload.csv").write_text("workload,policy\n")
    (BAD_CONFIG / "config.json").write_text("{not json")
    DOCS.mkdir()
    (DOCS / "board.csv").write_text("policy,avg_jct_s\nfcfs,2\narena,1\n")
    (DOCS / "note.txt").write_text("a note\n")
    (DOCS / "broken.csv").write_bytes(b'a,b\n1,2,3\n"open\n')
    (DOCS / "binary.txt").write_bytes(b"\xff\xfe\x00bad")
    (DOCS / "binary.md").write_bytes(b"\x83\xff not text")
    for name, text in {**PAGES, **BAD_PAGES}.items():
        (DOCS / name).write_text(text)
    (DOCS / "docs").mkdir()  # the default pages: README.md and docs/*.md
    for name in DEFAULT_PAGES:
        (DOCS / name).write_text(PAGES["good.md"])


_setup()


def fresh() -> str:
    return str(ROOT / f"new{next(_NAMES)}")


#: Per script: options -> (valid values, nonsense values); "" as an option is the positional arguments.
OPTIONS: dict[str, dict[str, tuple[list[str], list[str]]]] = {
    "regenerate_results": {
        "": ([str(EVAL)], ["/nonexistent", str(A_FILE), str(FULL), str(BAD_CONFIG)]),
        "--workers": (["1", "4", "256"], ["0", "-1", "257", "x", "1.5", ""]),
        "--tables-only": ([""], []),
    },
    "run_tour": {
        "--keep": (["NEW", str(FULL / "x")], [str(A_FILE), str(FULL), str(ROOT)]),
    },
    "train_agent": {
        "--env": (["ArenaGym/Tiny-v1"], ["", "Nope", "CartPole-v1"]),
        "--steps": (["64", "1000"], ["0", "-5", "x", "1.5"]),
        "--seed": (["0", "7"], ["-1", "x"]),
        "--test-suite": (["env-test", "synthetic"], ["", "nope"]),
        "--test-policies": (["fcfs", "arena,srtf"], ["nope", ",", "fcfs,fcfs", "fcfs,"]),
        "--data-dir": ([str(ROOT)], []),
        "--out": (["NEW"], ["/dev/null", str(A_FILE), str(FULL)]),
    },
    "update_docs_tables": {
        "": ([str(DOCS / n) for n in PAGES], [str(DOCS / n) for n in BAD_PAGES] + [str(DOCS / "binary.md"), str(DOCS)]),
        "--check": ([""], []),
    },
}


@st.composite
def script_lines(draw) -> tuple[str, list[str], str]:
    """(script, argv, kind): kind is "valid", "bad value", "no value" or "unknown flag"."""
    name = draw(st.sampled_from(sorted(OPTIONS)))
    options = OPTIONS[name]
    chosen = draw(st.lists(st.sampled_from(sorted(options)), max_size=3, unique=True))
    kind = draw(st.sampled_from(["valid", "valid", "bad value", "bad value", "no value", "unknown flag"]))
    refusable = [o for o in chosen if options[o][1]]
    if kind == "bad value" and not refusable:
        refusable = [draw(st.sampled_from(sorted(o for o in options if options[o][1])))]
        chosen = [*chosen, *refusable]
    valued = [o for o in options if o and options[o][0] != [""]]
    if kind == "no value" and not valued:
        kind = "valid"
    bad = draw(st.sampled_from(refusable)) if kind == "bad value" else None
    argv = ["--env", "ArenaGym/Tiny-v1", "--out", fresh()] if name == "train_agent" else []
    for option in chosen:
        good, nonsense = options[option]
        value = draw(st.sampled_from(nonsense if option == bad else good))
        value = fresh() if value == "NEW" else value
        argv += [a for a in (option, value) if a]
    if kind == "no value":
        argv.append(draw(st.sampled_from(valued)))
    if kind == "unknown flag":
        argv.append(draw(st.sampled_from(["--bogus", "--keep-going", "-z"])))
    return name, argv, kind


@pytest.fixture
def stubbed(monkeypatch):
    """The work of every script replaced: the evaluation and table rewrite, the tour, the training."""

    def reached(*args, **kwargs):
        raise Reached

    regenerate = SCRIPTS["regenerate_results"]
    monkeypatch.setattr(regenerate, "evaluate", reached)
    monkeypatch.setattr(regenerate, "rewrite_tables", reached)
    monkeypatch.setattr(SCRIPTS["run_tour"], "fresh_copy", lambda dest: dest)
    monkeypatch.setattr(SCRIPTS["run_tour"], "run_tour", reached)
    monkeypatch.setattr(importlib.import_module("arena_gym.harness.trainers.sb3"), "train", reached)
    monkeypatch.setattr(SCRIPTS["update_docs_tables"], "REPO", DOCS)
    monkeypatch.chdir(ROOT)


def _snapshot() -> dict[str, bytes]:
    return {
        str(p): p.read_bytes()
        for p in sorted(ROOT.rglob("*"))
        if p.is_file() and not p.relative_to(ROOT).parts[0].startswith("new")
    }


@fuzz_budget(60)
@given(case=script_lines())
def test_generated_script_command_lines(stubbed, capsys, case) -> None:
    name, argv, kind = case
    before = _snapshot()
    with case_timeout(TIMEOUT_S):
        try:
            code = SCRIPTS[name].main(argv)
        except Reached:
            code = 0
        except SystemExit as exc:  # an argument error: the parser exits
            code = exc.code
    out, err = capsys.readouterr()
    event(f"{name} {kind} exit {code}")
    assert "Traceback" not in err, (argv, err)
    if kind == "valid":
        assert code in (0, 1), (argv, err)  # update_docs_tables --check: 1 when a page is out of date
        assert code == 0 or (name == "update_docs_tables" and "--check" in argv), (argv, code, err)
        assert not err.strip() or name != "update_docs_tables", err
    else:
        assert code == 2, (argv, code, err)
        lines = [line for line in re.split(r"[\r\n]+", err) if line.strip()]
        assert len(lines) == 1 and lines[0].startswith(f"{name}: error: "), err
    after = _snapshot()
    changed = {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}
    if name == "update_docs_tables" and kind == "valid" and "--check" not in argv:
        assert changed <= {str(DOCS / n) for n in (*PAGES, *DEFAULT_PAGES)}, changed
        if str(DOCS / "good.md") in argv:
            assert (
                "| arena |" in after[str(DOCS / "good.md")].decode()
                and "a note" in after[str(DOCS / "good.md")].decode()
            )
    else:
        assert not changed, changed
