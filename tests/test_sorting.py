"""Sorting and searching in compiled code (``tilemem.liveness.sorting``).

numba's ``np.sort``, ``np.argsort``, ``np.unique`` and ``np.searchsorted`` are closures of one
name each, told apart by a per-process counter: in ``@njit(cache=True)`` functions, a process
that loads two cached functions whose closures got the same name runs the first one's code
for both (an argsort ran a plain sort and returned the identity; see the module's doc). So
compiled tilemem code sorts and searches with the module's own functions, and this file
checks them against numpy and keeps the others out.
"""
from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tilemem.liveness.sorting import (argsort, search_left, search_left_between, search_right,
                                     sort, unique)

ROOT = Path(__file__).resolve().parents[1] / "tilemem"

ints = st.lists(st.integers(-50, 50), max_size=300)


@settings(max_examples=150, deadline=None)
@given(ints)
def test_argsort_is_numpys_stable_argsort(xs):
    a = np.array(xs, np.int64)
    assert argsort(a).tolist() == np.argsort(a, kind="stable").tolist()
    assert argsort(-a).tolist() == np.argsort(-a, kind="stable").tolist()
    f = a.astype(np.float64) / 7
    assert argsort(f).tolist() == np.argsort(f, kind="stable").tolist()


@settings(max_examples=150, deadline=None)
@given(ints)
def test_sort_and_unique_are_numpys(xs):
    a = np.array(xs, np.int64)
    assert sort(a).tolist() == np.sort(a).tolist()
    assert unique(a).tolist() == np.unique(a).tolist()


@settings(max_examples=150, deadline=None)
@given(ints, st.integers(-60, 60))
def test_searches_are_numpys(xs, x):
    a = np.sort(np.array(xs, np.int64))
    assert search_left(a, x) == np.searchsorted(a, x)
    assert search_right(a, x) == np.searchsorted(a, x, side="right")
    lo, hi = len(a) // 3, len(a) - len(a) // 4   # a part of it, as an index of the whole
    assert search_left_between(a, lo, hi, x) == lo + np.searchsorted(a[lo:hi], x)


#: numpy calls numba builds from same-named closures (behaviour set by the factory's arguments)
NUMBA_FACTORY_CALLS = {"sort", "argsort", "unique", "searchsorted", "lexsort"}


def _compiled_functions():
    for path in sorted(ROOT.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and any(
                    "jit" in ast.unparse(d) for d in node.decorator_list):
                yield path, node


def test_compiled_code_uses_our_sorts():
    """No compiled function of tilemem calls numba's sort, argsort, unique or searchsorted
    (as ``np.X(...)`` or ``array.X(...)``)."""
    found = []
    for path, fn in _compiled_functions():
        for n in ast.walk(fn):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and n.func.attr in NUMBA_FACTORY_CALLS:
                found.append(f"{path.relative_to(ROOT.parent)}:{n.lineno} {fn.name}: "
                             f"{ast.unparse(n.func)}")
    assert len(list(_compiled_functions())) > 20   # the scan sees the compiled code
    assert not found, ("use tilemem.liveness.sorting in compiled code (numba's cached sorts "
                       "and searches can run each other's code):\n" + "\n".join(found))
