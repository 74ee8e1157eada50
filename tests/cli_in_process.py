"""``tilemem ARGS`` in the test's own process: ``tilemem.cli.main``, what ``python -m
tilemem`` runs, with the same exit status and output and without a fresh interpreter's
start-up (a second or more: importing tilemem and loading numba's cache). A test that checks
the entry point itself (``python -m tilemem``, a pipe, the environment a process starts
with) runs it in a process of its own instead.

    code, out, err = run_cli(["info", "examples/seed.json"])
"""
from __future__ import annotations

import contextlib
import io
import os
from unittest import mock


def run_cli(argv, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """``(exit status, stdout, stderr)`` of ``tilemem ARGV``; ``env``: variables set for the
    call only."""
    from tilemem.cli import main

    out, err = io.StringIO(), io.StringIO()
    with mock.patch.dict(os.environ, env or {}), contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in argv])
        except SystemExit as e:   # a command's own status (check's 1: rules broken)
            code = e.code
    return code, out.getvalue(), err.getvalue()


def error_lines(err: str) -> list[str]:
    """The non-empty lines of a run's stderr."""
    return [line for line in err.splitlines() if line.strip()]
