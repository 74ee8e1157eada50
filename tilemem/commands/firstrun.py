"""The first run: on an installation whose kernels numba has not compiled yet, a command over
a small report runs them as Python (``tilemem.jit``) while a process in the background
compiles them into numba's cache; the commands after it load them compiled.

Why: compiling the kernels ``tilemem oom`` uses is some 40 s of CPU, the whole command on the
bundled report as Python some 10 s, and once compiled 1-3 s. A newcomer's first command
should not wait for a compiler. Only a small report (``SMALL_BYTES``) and the commands whose
answer cannot depend on speed take this tier; the code that starts work bounded by a clock
ends it (``tilemem.jit.compiled_from_here``), so the first run prints what later runs print.

The background process (``python -m tilemem.commands.firstrun``) starts as the command ends
(so that it takes none of its CPU, nor a lock it would wait on) and runs ``tilemem oom`` on
the command's report, its output dropped, holding a lock beside numba's cache (another first
run meanwhile starts none); when it ends it writes a stamp there, and from then on every
command runs compiled. ``TILEMEM_JIT=compile`` keeps a command compiled;
``TILEMEM_JIT=interpret`` runs it as Python without compiling anything in the background.
"""
from __future__ import annotations

import atexit
import os
import subprocess
import sys
from pathlib import Path

#: The commands that may run as Python: their answers are the same, only slower (not
#: ``alloc``, ``what-if``, ``split``, ``config``: searches on a clock from their start).
INTERPRETED = frozenset({"oom", "liveness", "check", "report", "info", "plot", "plot-tiles",
                         "plot-liveness", "html", "diff"})

#: The largest report (bytes of JSON) run as Python: one that takes about as long as Python
#: as the kernels take to compile.
SMALL_BYTES = 8_000_000
#: A ``.capnp`` report holds about twice the variables a JSON one does in as many bytes.
CAPNP_WEIGHT = 2

_STAMP, _LOCK = "tilemem-compiled", "tilemem-compiled.lock"


def choose(argv: list[str]) -> bool:
    """Whether this command runs its kernels as Python (then it has started the background
    compilation, unless one runs already): see the module docstring."""
    mode = os.environ.get("TILEMEM_JIT", "auto")
    if mode == "compile" or not argv or argv[0] not in INTERPRETED:
        return False
    reports = [Path(a) for a in argv[1:]
               if a.lower().endswith((".json", ".capnp")) and os.path.isfile(a)]
    if not reports:
        return False
    from .. import jit

    if mode == "interpret":
        jit.interpret()
        return True
    weight = sum(p.stat().st_size * (CAPNP_WEIGHT if p.suffix.lower() == ".capnp" else 1)
                 for p in reports)
    where = cache_dir()
    if weight > SMALL_BYTES or where is None or stamped(where):
        return False
    jit.interpret()
    atexit.register(_start, where, reports[0])
    if sys.stderr.isatty():
        print("tilemem: first run: the kernels run as Python while numba compiles them in the "
              "background (later commands run them compiled)", file=sys.stderr)
    return True


def cache_dir() -> Path | None:
    """Where numba caches tilemem's kernels (the stamp and the lock go there), or None."""
    from ..pack.compiled import cache_dir as group_cache_dir

    return group_cache_dir("pack")


def stamped(where: Path) -> bool:
    """Whether the background compilation has run to its end for this numba and Python."""
    try:
        return (where / _STAMP).read_text() == _stamp_text()
    except OSError:
        return False


def _stamp_text() -> str:
    import numba

    return f"numba {numba.__version__}, Python {sys.version.split()[0]}\n"


def _locked(path: Path) -> bool:
    """Whether another process holds ``path`` (a background compilation runs)."""
    try:
        import fcntl
    except ImportError:
        return False
    try:
        with open(path, "a") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return True
            fcntl.flock(f, fcntl.LOCK_UN)
    except OSError:
        return True   # nowhere to write a lock: start nothing
    return False


def _start(where: Path, report: Path) -> None:
    """The background compilation, unless one runs: its own session (it outlives this
    command), nothing on the terminal."""
    if _locked(where / _LOCK):
        return
    env = dict(os.environ, TILEMEM_JIT="compile")
    root = str(Path(__file__).resolve().parents[2])   # the same sources as this command
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    try:
        subprocess.Popen([sys.executable, "-m", "tilemem.commands.firstrun", str(where),
                          str(report.resolve())],
                         env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError:
        pass   # then the next command compiles them, as any did before


def wait(where: Path) -> None:
    """Wait while a background compilation runs (``benchmarks/first_run.py``)."""
    import fcntl

    with open(where / _LOCK, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)


def _compile(where: Path, report: str) -> int:
    """The background compilation: ``tilemem oom REPORT``, compiled, its output dropped; the
    stamp written when it has ended (whatever its verdict: the kernels are compiled)."""
    import fcntl

    with open(where / _LOCK, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return 0   # another one runs
        rc = subprocess.run([sys.executable, "-m", "tilemem", "oom", report, "--panels", "0"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL).returncode
        if rc in (0, 1):   # 1: tiles out of memory, oom's answer
            tmp = where / f"{_STAMP}.{os.getpid()}"
            tmp.write_text(_stamp_text())
            os.replace(tmp, where / _STAMP)
        return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--wait"]:
        w = cache_dir()
        if w is not None:
            wait(w)
        sys.exit(0)
    sys.exit(_compile(Path(sys.argv[1]), sys.argv[2]))
