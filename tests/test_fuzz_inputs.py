"""Fuzzing the input contract: every command, on any damaged report, either succeeds (status 0
or 1) or exits with status 2 and exactly one stderr line ``tilemem: error: ...``; never another
exception, never a traceback.

Hypothesis mutates a valid small report (``examples/seed.json``): its structure (keys deleted,
unknown keys, values of other types, records duplicated, lists emptied), its sizes (integers at
and past the int64 bounds, no variables, only unallocated ones), its nesting (a value replaced by
thousands of nested arrays or objects, or left unclosed) and its encoding (BOM, UTF-16, bytes
that are not UTF-8, truncation); and damages the bytes and the columns of its capnp form. The
commands run in-process (``tilemem.cli.main``), and the examples are fixed (``derandomize``), so
CI sees the same inputs every run.
"""
from __future__ import annotations

import atexit
import contextlib
import copy
import io
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tilemem.cli import main
from tilemem.load import capnpio, load_report, save_report

SEED_PATH = Path(__file__).parents[1] / "examples" / "seed.json"
SEED = json.loads(SEED_PATH.read_text())
WORK = Path(tempfile.mkdtemp(prefix="tilemem-fuzz-"))
# made at import (in every xdist worker), so removed when the process ends
atexit.register(shutil.rmtree, WORK, ignore_errors=True)

# The commands and options a user runs on a report (cheap settings: replay, one worker, no
# re-pack), the report's path in place of "{}".
COMMANDS = [
    ["info", "{}"],
    ["info", "--json", "{}"],
    ["check", "{}"],
    ["liveness", "--json", "--time-limit", "1", "{}"],
    ["report", "--json", "{}"],
    ["alloc", "--method", "replay", "--workers", "1", "--json", "{}"],
    ["oom", "--no-repack", "--json", "--time-limit", "1", "{}"],
    ["convert", "{}", str(WORK / "out.capnp")],
    ["check", "{}", "--allocation", "{}"],
    ["split", "--json", "{}"],
]

FUZZ = settings(max_examples=120, derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def run(argv: list[str]) -> tuple[int, list[str]]:
    """``main(argv)`` in-process: its status and its non-empty stderr lines."""
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            rc = main(argv)
        except SystemExit as e:  # check's status 1 (violations)
            rc = e.code
    return rc, [line for line in err.getvalue().splitlines() if line.strip()]


def assert_contract(argv: list[str]) -> None:
    rc, lines = run(argv)
    if rc == 2:
        assert len(lines) == 1 and lines[0].startswith("tilemem: error: "), (argv, lines)
    else:
        assert rc in (0, 1), (argv, rc, lines)
        assert all(line.startswith("tilemem: warning: ") for line in lines), (argv, lines)


# ---- strategies -----------------------------------------------------------------------------

# Integers where parsers and columns break: int64 and uint64 bounds, and small ones.
INTEGERS = st.one_of(st.integers(-3, 70),
                     st.sampled_from([2**31, 2**32 + 1, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1,
                                      2**64, -(2**64), 10**30]))
SCALARS = st.one_of(st.none(), st.booleans(), INTEGERS,
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=6)


def paths(node, prefix=()):
    """Every path (keys and indices) into the document."""
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from paths(v, prefix + (i,))


PATHS = list(paths(SEED))[1:]
NEST_MARK = "@@nest@@"


def parent_of(doc, path):
    node = doc
    for key in path[:-1]:
        node = node[key]
    return node


@st.composite
def json_reports(draw) -> bytes:
    doc = copy.deepcopy(SEED)
    nest = None
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["delete", "replace", "unknown key", "duplicate", "nest",
                                     "no vars", "unallocated", "integer"]))
        path = draw(st.sampled_from(PATHS))
        try:
            parent = parent_of(doc, path)
            key = path[-1]
            if kind == "delete":
                del parent[key]
            elif kind == "replace":
                parent[key] = draw(VALUES)
            elif kind == "integer":
                parent[key] = draw(INTEGERS)
            elif kind == "unknown key" and isinstance(parent, dict):
                parent[draw(st.text(min_size=1, max_size=6))] = draw(VALUES)
            elif kind == "duplicate" and isinstance(parent, list):
                parent.append(copy.deepcopy(parent[key]))
            elif kind == "nest":
                parent[key] = NEST_MARK
                nest = (draw(st.sampled_from(["[", '{"a":'])), draw(st.sampled_from([70, 5000])))
            elif kind == "no vars":
                doc["vars"], doc["allocationOrderByTile"] = [], []
            elif kind == "unallocated":
                doc["vars"] = [{"var": v["var"], "info": {"allocated": False}}
                               for v in doc.get("vars", []) if isinstance(v, dict) and "var" in v]
                doc["allocationOrderByTile"] = []
        except (KeyError, IndexError, TypeError):
            pass  # the path went away with an earlier mutation: keep the document as it is
    text = json.dumps(doc)
    if nest is not None:
        opener, depth = nest
        closer = "]" if opener == "[" else "}"
        unclosed = draw(st.booleans())
        text = text.replace(json.dumps(NEST_MARK),
                            opener * depth + "1" + ("" if unclosed else closer * depth))
    data = text.encode()
    encoding = draw(st.sampled_from(["utf-8", "utf-8", "bom", "utf-16", "bad bytes", "truncate"]))
    if encoding == "bom":
        data = b"\xef\xbb\xbf" + data
    elif encoding == "utf-16":
        data = text.encode("utf-16")
    elif encoding == "bad bytes":  # inside a name, or anywhere
        at = data.find(b'"name": "') + 9 if draw(st.booleans()) else \
            draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80"])) \
            + data[at:]
    elif encoding == "truncate":
        data = data[:draw(st.integers(0, len(data)))]
    return data


def _good_capnp() -> bytes:
    path = WORK / "good.capnp"
    save_report(load_report(SEED_PATH), path)
    return path.read_bytes()


GOOD_CAPNP = _good_capnp()
COLUMNS = ["var", "allocated", "tile", "sizeBytes", "alignment", "offset", "category",
           "equivalenceClass", "nameBlob", "nameOffsets", "equivalenceClassSteps"]


@st.composite
def capnp_reports(draw) -> bytes:
    kind = draw(st.sampled_from(["bytes", "bytes", "truncate", "append", "column"]))
    data = bytearray(GOOD_CAPNP)
    if kind == "bytes":
        for _ in range(draw(st.integers(1, 8))):
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
        return bytes(data)
    if kind == "truncate":
        return bytes(data[:draw(st.integers(0, len(data) - 1))])
    if kind == "append":
        return bytes(data) + draw(st.binary(min_size=1, max_size=64))
    # damage one column of the schema through the Cap'n Proto builder
    m = capnpio.schema().Report.from_bytes(GOOD_CAPNP).__enter__().as_builder()
    field = draw(st.sampled_from(COLUMNS))
    col = m.init(field) if draw(st.booleans()) else getattr(m, field)
    what = draw(st.sampled_from(["dtype", "length", "chunks", "steps"]))
    if what == "dtype":
        col.dtype = draw(st.sampled_from(["<i8", "<i2", "|b1", "|u1", "<f8", "object", "", "<U4"]))
    elif what == "length":
        col.length = draw(st.sampled_from([0, 1, 3, 17, 2**31, 2**63, 2**64 - 1]))
    elif what == "chunks":
        col.init("chunks", draw(st.integers(0, 3)))
    else:
        m.hasEquivalenceClassSteps = True
    return m.to_bytes()


# ---- tests ----------------------------------------------------------------------------------

def _check(data: bytes, command: list[str], name: str) -> None:
    path = WORK / name
    path.write_bytes(data)
    assert_contract([str(path) if a == "{}" else a for a in command])


@FUZZ
@given(data=json_reports(), command=st.sampled_from(COMMANDS))
def test_damaged_json_reports_keep_the_contract(data, command):
    _check(data, command, "fuzz.json")


@FUZZ
@given(data=capnp_reports(), command=st.sampled_from(COMMANDS))
def test_damaged_capnp_reports_keep_the_contract(data, command):
    _check(data, command, "fuzz.capnp")


def test_the_seed_itself_passes_every_command():
    """The fuzz tests start from a report every command accepts (else they test nothing)."""
    for command in COMMANDS:
        rc, lines = run([str(SEED_PATH) if a == "{}" else a for a in command])
        assert rc in (0, 1) and not lines, (command, rc, lines)


@pytest.mark.parametrize("maker", ["fifo", "folder", "missing"])
def test_paths_that_are_not_files_get_one_line(maker, tmp_path):
    path = tmp_path / "report.json"
    if maker == "fifo":
        if not hasattr(os, "mkfifo"):
            pytest.skip("this platform has no FIFOs")
        os.mkfifo(path)  # no writer: opening it for reading would block for ever
    elif maker == "folder":
        path.mkdir()
    for command in COMMANDS:
        rc, lines = run([str(path) if a == "{}" else a for a in command])
        assert rc == 2 and len(lines) == 1 and lines[0].startswith("tilemem: error: "), lines
