"""The suite's set-up: tilemem's numba kernels compiled once, before the workers start.

On a clean clone each pytest-xdist worker (and each process a test forks or spawns) would
compile the same kernels for itself on first use; compiled once here, in two processes side
by side (``compile_kernels.py``: the search's versions in one, everything else in the other,
ordered so that nothing is compiled twice), they are loaded from numba's cache everywhere
after.
"""
from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: seconds a part may take (about 85 s of CPU each from a clean clone; a few seconds once
#: cached)
TIMEOUT = 600

# compiled, as above: the first run's tier (kernels as Python on a small report while a process
# compiles them in the background, tilemem.commands.firstrun) is for a newcomer's first
# command; tests/test_firstrun.py sets it for the commands it runs
os.environ.setdefault("TILEMEM_JIT", "compile")
# Python's bytecode written, as on a developer's machine: where the environment says not to
# (PYTHONDONTWRITEBYTECODE), each of the processes the suite starts (workers, commands, Dask)
# would compile tilemem's sources again, half a second of CPU each
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False


def pytest_configure(config):
    if hasattr(config, "workerinput"):
        return   # an xdist worker: the controlling process has compiled them
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE.parent),
                                                      env.get("PYTHONPATH")]))
    from compile_kernels import PARTS

    procs = {part: subprocess.Popen([sys.executable, str(HERE / "compile_kernels.py"), part],
                                     cwd=HERE.parent, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)
             for part in PARTS}
    for part, proc in procs.items():
        try:
            out, _ = proc.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        if proc.returncode:
            # not a failure of the suite: the kernels are then compiled where first used,
            # and the tests that use them say what is wrong
            warnings.warn(f"compiling the kernels ({part}) failed:\n{out.decode()[-2000:]}")
