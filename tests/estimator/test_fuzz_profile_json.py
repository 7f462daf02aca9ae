"""Fuzz ``PROFILE.json`` files (``estimator.profile.load_profile``): a valid profile with one value anywhere in it
replaced (by nonsense or by another valid-looking value), a key dropped or added, the text truncated, and arbitrary
bytes.

A file either loads, and then holds exactly the value written at the changed place and reads back the same after it
is written again, or it is refused with a one-line ProfileError naming the file. Never another exception.
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import event, given
from hypothesis import strategies as st

from estimator.profile import ProfileError, load_profile
from tests.estimator.test_profile import synthetic_profile
from tests.fuzzing import assert_one_line, case_timeout, fuzz

TIMEOUT_S = 5.0
_SCRATCH = tempfile.TemporaryDirectory(prefix="fuzz-profile-")
ROOT = Path(_SCRATCH.name)
_FILES = iter(range(10**9))
VALID = synthetic_profile().to_dict()
TEXT = synthetic_profile().to_json().rstrip()


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path to a value (leaves and containers) in a JSON-like tree."""
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


PATHS = [p for p in _paths(VALID) if p]


def _get(node: Any, path: tuple) -> Any:
    for key in path:
        node = node[key]
    return node


def _copy(node: Any) -> Any:
    return json.loads(json.dumps(node))


VALUES = st.one_of(
    st.sampled_from([None, True, False, 0, -1, 1, 1e308, -1e-9, "", "x", [], {}, [1], {"x": 1}, 2**70, "a100"]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(-(2**40), 2**40),
    st.text(max_size=8),
)


@st.composite
def changed(draw) -> tuple[str, dict[str, Any]]:
    data = _copy(VALID)
    path = draw(st.sampled_from(PATHS))
    parent = _get(data, path[:-1])
    kind = draw(st.sampled_from(["replace", "replace", "replace", "drop", "add"]))
    if kind == "drop":
        del parent[path[-1]]
    elif kind == "add" and isinstance(parent, dict):
        parent[draw(st.sampled_from(["extra", "x", ""]))] = draw(VALUES)
    else:
        kind = "replace"
        parent[path[-1]] = draw(VALUES)
    return f"{kind} {'.'.join(map(str, path))}", data


def write(content: str | bytes) -> Path:
    path = ROOT / f"profile{next(_FILES)}.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def _finite_numbers(node: Any) -> bool:
    if isinstance(node, float):
        return math.isfinite(node)
    if isinstance(node, dict):
        return all(_finite_numbers(v) for v in node.values())
    if isinstance(node, list):
        return all(_finite_numbers(v) for v in node)
    return True


@fuzz(100)
@given(case=changed())
def test_a_changed_profile_loads_as_written_or_is_refused_in_one_line(case) -> None:
    label, data = case
    path = write(json.dumps(data))
    with case_timeout(TIMEOUT_S):
        try:
            profile = load_profile(path)
        except ProfileError as exc:
            event(f"refused: {label.split()[0]}")
            assert_one_line(exc, str(path))
            return
        event(f"loaded: {label.split()[0]}")
        again = profile.to_dict()
        assert load_profile(write(profile.to_json())).to_dict() == again  # reads back the same
        assert _finite_numbers(again), again
        kind, where = label.split(" ", 1)
        if kind == "replace":
            keys = tuple(int(k) if k.isdigit() else k for k in where.split("."))
            try:
                value = _get(again, keys)
            except (KeyError, IndexError, TypeError):
                return  # a field the profile keeps in another form
            written = _get(data, keys)
            if isinstance(written, (int, float)) and not isinstance(written, bool) and isinstance(value, (int, float)):
                assert float(value) == float(written), (label, value, written)
            elif not isinstance(written, (dict, list)):
                assert value == written or str(value) == str(written).strip().lower(), (label, value, written)


@fuzz(100)
@given(
    blob=st.one_of(
        st.binary(max_size=200),
        st.integers(0, len(TEXT) - 1).map(lambda n: TEXT[:n].encode()),  # cut before its closing brace
        st.integers(1, 100_000).map(lambda n: b"[" * n),
        st.sampled_from([b"", b"{}", b"[]", b"null", b'{"format": "arena-gym-profile"}', b"\xff"]),
    )
)
def test_truncated_or_arbitrary_bytes_are_refused_in_one_line(blob) -> None:
    path = write(blob)
    with case_timeout(TIMEOUT_S):
        try:
            profile = load_profile(path)
        except ProfileError as exc:
            assert_one_line(exc, str(path))
            return
    raise AssertionError(f"{blob[:80]!r} loaded as {profile}")
