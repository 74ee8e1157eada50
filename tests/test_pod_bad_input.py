"""Bad input at Pod scale: one line ``tilemem: error: FILE: ...``, exit 2, before the long work.

- a capnp report cut inside one of its segments, or exactly at a segment boundary (the streaming
  writer writes one segment per column chunk; small chunks here make many segments);
- a JSON report larger than the memory left, handed to a command that reads it: refused before
  reading, saying to convert it (``TILEMEM_MEMORY_AVAILABLE`` stands for a small machine).
"""
import os
import struct
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from cli_in_process import run_cli
from tilemem.load import capnpio
from tilemem.errors import ReportError
from tilemem.load import load_report, save_report

ROOT = Path(__file__).parents[1]
SMALL = ROOT / "examples" / "mk1-small.json"


def run(*args, env=None):
    """``tilemem ARGS`` as a user runs it: a fresh process, its exit status and output."""
    return subprocess.run([sys.executable, "-m", "tilemem", *map(str, args)],
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(ROOT), **(env or {})))


def here(*args, env=None):
    """``tilemem ARGS`` in this process (``cli_in_process``), for the commands after a
    test's first, which ``run`` checks in a process of its own; shaped as ``run``'s."""
    code, out, err = run_cli(args, env)
    return SimpleNamespace(returncode=code, stdout=out, stderr=err)


def one_line_exit_2(p, path):
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"tilemem: error: {path}: "), p.stderr
    assert "Traceback" not in p.stderr
    return lines[0]


@pytest.fixture(scope="module")
def many_segments(tmp_path_factory):
    """The small example as capnp of many segments, and where each segment ends."""
    p = tmp_path_factory.mktemp("seg") / "r.capnp"
    old = capnpio.CHUNK_BYTES
    capnpio.CHUNK_BYTES = 1 << 16   # many segments, within the 511 a message may have
    try:
        save_report(load_report(SMALL), p)
    finally:
        capnpio.CHUNK_BYTES = old
    data = p.read_bytes()
    n = struct.unpack_from("<I", data)[0] + 1
    sizes = struct.unpack_from(f"<{n}I", data, 4)
    header = 4 + 4 * n + (4 if n % 2 == 0 else 0)
    ends = header + 8 * __import__("numpy").cumsum(sizes)
    assert n > 10 and ends[-1] == len(data)   # many segments, and the table says it all
    return data, [int(e) for e in ends]


@pytest.mark.parametrize("where", ["mid-segment", "segment boundary", "header only"])
def test_truncated_capnp_is_one_line_exit_2(tmp_path, many_segments, where):
    data, ends = many_segments
    k = len(ends) // 2
    cut = {"mid-segment": (ends[k - 1] + ends[k]) // 2, "segment boundary": ends[k],
           "header only": ends[0] - 8 * (ends[0] > 16)}[where]
    p = tmp_path / "cut.capnp"
    p.write_bytes(data[:cut])
    with pytest.raises(ReportError, match="truncated"):
        load_report(p)
    for command, runner in ((["info"], run), (["check"], here), (["oom", "--no-repack"], here)):
        line = one_line_exit_2(runner(*command, p), p)
        assert f"announces {len(data):,} bytes, the file has {cut:,}" in line


def test_json_too_large_for_memory_is_refused_before_reading(tmp_path):
    size = SMALL.stat().st_size
    small_machine = {"TILEMEM_MEMORY_AVAILABLE": str(size)}   # less than reading needs
    for command in (["info"], ["check"], ["oom", "--no-repack"], ["convert", "-", "-"]):
        argv = [c for c in command if c != "-"]
        if command[0] == "convert":
            argv = ["convert", SMALL, tmp_path / "out.json"]   # json -> json reads it whole
        else:
            argv = argv + [SMALL]
        runner = run if command[0] == "info" else here
        line = one_line_exit_2(runner(*argv, env=small_machine), SMALL)
        assert "convert it first" in line and f"tilemem convert {SMALL} " in line
    assert not (tmp_path / "out.json").exists()
    # converting to capnp streams it: that is the way out, and it works on the same machine
    out = tmp_path / "out.capnp"
    p = here("convert", SMALL, out, env=small_machine)
    assert p.returncode == 0, p.stderr
    assert load_report(out) == load_report(SMALL)
    # enough memory: read as always
    assert here("info", SMALL, env={"TILEMEM_MEMORY_AVAILABLE": str(4 * size)}).returncode == 0


def test_memory_cap_that_is_not_a_number_is_one_line(tmp_path):
    line = one_line_exit_2(run("info", SMALL, env={"TILEMEM_MEMORY_AVAILABLE": "lots"}), SMALL)
    assert "TILEMEM_MEMORY_AVAILABLE" in line
