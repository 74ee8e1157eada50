"""The first run's tier: kernels as Python on a small report, compiled in the background after
(``tilemem.jit``, ``tilemem.commands.firstrun``)."""
from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tilemem import jit
from tilemem.cli import main
from tilemem.commands import firstrun

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "mk1-small.json"


@jit.njit(cache=False)
def _halve(x):
    return x // 2


@jit.njit(cache=False)
def _quarter(x):
    return _halve(_halve(x))


@pytest.fixture
def tier():
    """The interpreted tier on for the test, off after (whatever it left)."""
    jit.interpret()
    yield
    jit.compiled_from_here()


def test_interpreted_kernels_compile_nothing_and_answer_alike(tier):
    assert jit.interpreting()
    assert int(_quarter(np.int64(20))) == 5
    assert _quarter.signatures == [] and _halve.signatures == []   # ran as Python
    with jit.compiled():
        assert not jit.interpreting()
        assert int(_quarter(np.int64(20))) == 5
    assert len(_quarter.signatures) == 1   # compiled within, calling its callee compiled
    assert jit.interpreting()               # and the tier back after
    assert int(_quarter(np.int64(-7))) == -7 // 4


def test_a_kernel_made_while_interpreting_runs_as_python(tier):
    @jit.njit(cache=False)
    def plus_one(x):
        return x + 1

    assert int(plus_one(np.int64(1))) == 2 and plus_one.signatures == []
    jit.compiled_from_here()
    assert int(plus_one(np.int64(1))) == 2 and len(plus_one.signatures) == 1


def test_numbas_wrapping_arithmetic_warns_nothing_as_python(tier, recwarn):
    @jit.njit(cache=False)
    def square(a):
        return a[0] * a[0]

    big = np.array([2 ** 62], np.int64)
    assert int(square(big)) == 0   # wraps, as compiled
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def _run(args, **env):
    e = dict(os.environ, PYTHONPATH=str(ROOT), **env)
    return subprocess.run([sys.executable, "-m", "tilemem", *args], cwd=ROOT, env=e,
                           capture_output=True, text=True, timeout=600)


def test_oom_as_python_prints_what_it_prints_compiled(capsys):
    """The whole first command interpreted (its re-pack, on a clock, compiled) prints the
    same as compiled."""
    args = ["oom", str(EXAMPLE.relative_to(ROOT))]
    python = _run(args, TILEMEM_JIT="interpret")
    assert python.returncode in (0, 1), python.stderr
    os.chdir(ROOT)
    try:
        rc = main(args)
    finally:
        os.chdir(Path(__file__).parent)
    assert rc == python.returncode
    assert python.stdout == capsys.readouterr().out
    assert "Warning" not in python.stderr


def test_a_search_on_a_node_budget_runs_compiled_inside_the_tier(tier, monkeypatch):
    """The exact clique search's node limits are seconds of compiled nodes: within an
    interpreted command it runs compiled (and the tier goes on after)."""
    from contextlib import contextmanager

    from tilemem.liveness import graphalg

    tiers = []

    @contextmanager
    def compiled():
        with jit.compiled():
            tiers.append(jit.interpreting())
            yield

    monkeypatch.setattr(graphalg, "compiled", compiled)
    # a 5-cycle (not chordal: the search runs), weights by vertex; its heaviest clique is an
    # edge, 4-0: 7 + 5
    nb = [[1, 4], [0, 2], [1, 3], [2, 4], [0, 3]]
    indptr = np.cumsum([0] + [len(x) for x in nb])
    c = graphalg.max_weight_clique(indptr, np.concatenate(nb), np.array([5, 4, 6, 1, 7]))
    assert (c.weight, list(c.members), c.exact) == (12, [0, 4], True)
    assert c.method == "branch-and-bound" and tiers == [False]
    assert jit.interpreting()


@pytest.fixture
def decide(tmp_path, monkeypatch):
    """``choose`` with the cache in ``tmp_path``, recording what it would start."""
    started, interpreted = [], []
    monkeypatch.setattr(firstrun, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(firstrun.atexit, "register", lambda f, *a: started.append(a))
    monkeypatch.setattr(jit, "interpret", lambda: interpreted.append(True))
    monkeypatch.delenv("TILEMEM_JIT", raising=False)

    def choose(*argv):
        started.clear()
        interpreted.clear()
        said = firstrun.choose(list(argv))
        assert said == bool(interpreted)
        return said, bool(started)
    return choose


def test_a_small_report_on_a_cold_cache_runs_as_python_and_compiles_after(decide, tmp_path):
    assert decide("oom", str(EXAMPLE)) == (True, True)
    assert decide("liveness", "--tiles", "0", str(EXAMPLE)) == (True, True)
    (tmp_path / "tilemem-compiled").write_text(firstrun._stamp_text())
    assert decide("oom", str(EXAMPLE)) == (False, False)    # compiled once: compiled


def test_what_is_not_a_small_report_or_a_steady_answer_compiles(decide, monkeypatch, tmp_path):
    assert decide("alloc", str(EXAMPLE)) == (False, False)     # a search on a clock
    assert decide("oom", str(tmp_path / "absent.json")) == (False, False)
    assert decide("oom") == (False, False)
    monkeypatch.setattr(firstrun, "SMALL_BYTES", EXAMPLE.stat().st_size - 1)
    assert decide("oom", str(EXAMPLE)) == (False, False)
    monkeypatch.setenv("TILEMEM_JIT", "compile")
    monkeypatch.setattr(firstrun, "SMALL_BYTES", 10 ** 9)
    assert decide("oom", str(EXAMPLE)) == (False, False)
    (tmp_path / "tilemem-compiled").write_text("numba 0.1, Python 2.7\n")   # another numba's
    monkeypatch.delenv("TILEMEM_JIT")
    assert decide("oom", str(EXAMPLE)) == (True, True)


def test_the_background_compilation_writes_its_stamp_once(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), TILEMEM_JIT="compile")
    cmd = [sys.executable, "-m", "tilemem.commands.firstrun", str(tmp_path), str(EXAMPLE)]
    with open(tmp_path / "tilemem-compiled.lock", "a") as held:   # one runs already
        fcntl.flock(held, fcntl.LOCK_EX)
        assert subprocess.run(cmd, env=env, timeout=600).returncode == 0
        assert not (tmp_path / "tilemem-compiled").exists()
        assert firstrun._locked(tmp_path / "tilemem-compiled.lock")
    assert not firstrun._locked(tmp_path / "tilemem-compiled.lock")
    assert subprocess.run(cmd, env=env, timeout=600).returncode == 0
    assert firstrun.stamped(tmp_path)


def test_the_packers_groups_asked_for_as_python_keep_the_tier(tier, monkeypatch):
    """The packer's own groups (not a search) asked for outside a packing run leave the
    kernels as Python; a search's version ends the tier (it runs on a clock)."""
    from tilemem.pack import compiled

    monkeypatch.setattr(compiled, "_READY", set())   # as a fresh process has them
    compiled.ready("problem", "pack", "bounds")
    assert jit.interpreting()
    compiled.ready("whole")
    assert not jit.interpreting()
