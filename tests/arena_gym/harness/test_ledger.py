"""The frozen suite's ledger: checked before any work, one appended row per run, never rewritten.

No test here runs a policy on the frozen suite's windows: the runs below are on a tiny synthetic
suite that carries the frozen suite's name, and every ledger is a temporary file.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import logging
from pathlib import Path

import pytest

from arena_gym.harness import ledger as ledger_mod
from arena_gym.harness.evaluate import EvalConfig, evaluate
from arena_gym.harness.ledger import (
    COLUMNS,
    LEDGER_PATH,
    LedgerRow,
    append_row,
    check_ledger,
    default_ledger,
    repository_root,
)
from arena_gym.harness.suites import custom_suite
from arena_gym.outputs import code_version, jsonable
from tests.conftest import REPO
from tests.rl_cases import TRACE

ROW = LedgerRow("2026-01-01T00:00:00+00:00", "0.1.0+abc", "frozen-test", "arena,fcfs", "out", '{"a":1}', 40)


def _rows(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


def test_the_repository_ledger_is_committed_and_well_formed() -> None:
    assert repository_root() == REPO
    assert default_ledger("anywhere") == REPO / LEDGER_PATH
    assert check_ledger(REPO / LEDGER_PATH) == REPO / LEDGER_PATH
    assert tuple(_rows(REPO / LEDGER_PATH)[0]) == COLUMNS


def test_rows_are_appended_and_earlier_rows_kept_byte_for_byte(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "LEDGER.csv"
    assert check_ledger(path) == path  # absent: created on the first row
    append_row(path, ROW)
    first = path.read_bytes()
    append_row(path, dataclasses.replace(ROW, policies="arena", workloads=2))
    assert path.read_bytes().startswith(first)
    header, row, second = _rows(path)
    assert (tuple(header), row) == (COLUMNS, list(map(str, dataclasses.astuple(ROW))))
    assert (second[3], second[6]) == ("arena", "2")
    path.write_bytes(path.read_bytes().rstrip(b"\n"))  # a last row without its line end is ended, not joined
    append_row(path, ROW)
    assert len(_rows(path)) == 4 and _rows(path)[3] == _rows(path)[1]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "its header is an empty file"),
        ("when,what\n", "its header is when,what, expected utc,code_version,"),
        (",".join(COLUMNS) + "\na,b\n", "row 2 has 2 cells, expected 7"),
        (",".join(COLUMNS) + "\n\n", "row 2 has 0 cells"),
    ],
)
def test_a_malformed_ledger_is_one_line_and_left_as_it_is(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "LEDGER.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match="malformed") as err:
        append_row(path, ROW)
    assert message in str(err.value) and len(str(err.value).splitlines()) == 1
    assert path.read_text() == text
    with pytest.raises(ValueError, match="is a directory"):
        check_ledger(tmp_path)


def test_outside_a_git_checkout_the_ledger_is_next_to_the_results(monkeypatch, tmp_path: Path, caplog) -> None:
    monkeypatch.setattr(ledger_mod, "repository_root", lambda: None)
    with caplog.at_level(logging.WARNING, logger="arena_gym.harness.ledger"):
        assert default_ledger(tmp_path / "results" / "eval") == tmp_path / "results" / "LEDGER.csv"
    assert "not inside a git checkout" in caplog.text


def _tiny(name: str):
    suite = custom_suite((TRACE,), cluster="tiny", split="test", load_basis="factor", load_levels=(1.0,), seeds=(1,))
    return dataclasses.replace(suite, name=name)


def test_every_evaluate_run_on_a_frozen_suite_is_recorded_when_it_starts(tmp_path: Path) -> None:
    ledger = tmp_path / "LEDGER.csv"
    config = EvalConfig(
        policies=("arena", "fcfs"),
        suite="custom",
        traces=(TRACE,),
        out_dir=str(tmp_path / "a"),
        resamples=200,
        progress=False,
        bounds=False,
        ledger=str(ledger),
    )
    evaluate(config, _tiny("frozen-test"))
    (header, row) = _rows(ledger)
    assert tuple(header) == COLUMNS
    record = dict(zip(COLUMNS, row))
    assert (record["suite"], record["policies"], record["workloads"]) == ("frozen-test", "arena,fcfs", "1")
    assert record["code_version"] == code_version() and record["out_dir"] == str((tmp_path / "a").resolve())
    assert json.loads(record["config"]) == jsonable(config) and record["utc"].endswith("+00:00")
    evaluate(config, _tiny("custom"), replace=True)  # not a frozen suite: no row
    assert len(_rows(ledger)) == 2
    ledger.write_text("not,a,ledger\n")
    out = tmp_path / "b"
    with pytest.raises(ValueError, match="malformed"):
        evaluate(
            dataclasses.replace(config, out_dir=str(out), policies=("arena", "no-such-policy")), _tiny("frozen-test")
        )
    assert not out.exists() and ledger.read_text() == "not,a,ledger\n"  # refused before the policies were built
