"""A pytest plugin (not a test): the CPU seconds each test took, for finding what makes the
suite slow on a shared machine, where wall durations (``--durations``) measure the other
processes as much as the test.

    PYTHONPATH=$PWD:$PWD/tests CPU_PER_TEST=/tmp/cpu python -m pytest -q -p cpu_per_test

writes ``/tmp/cpu-<worker>.tsv``, a line a test: CPU seconds (user and system, of the worker
and of the child processes it waited for, over set-up, call and tear-down), wall seconds,
test id. A child the test did not wait for (a Dask worker, a browser) is not counted."""
from __future__ import annotations

import os
import resource
import time

import pytest

_out = []


def _cpu() -> float:
    me, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF,
                                                resource.RUSAGE_CHILDREN))
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if not _out:
        prefix = os.environ.get("CPU_PER_TEST", "cpu-per-test")
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        _out.append(open(f"{prefix}-{worker}.tsv", "a"))
    cpu, wall = _cpu(), time.perf_counter()
    yield
    _out[0].write(f"{_cpu() - cpu:.2f}\t{time.perf_counter() - wall:.2f}\t{item.nodeid}\n")
    _out[0].flush()
