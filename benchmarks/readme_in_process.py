"""Each README command run as a process of its own and in process (``tilemem.cli.main``, as
tests/test_readme.py runs them), each in a scratch folder of its own: the same exit status,
output and written files? Prints SAME or DIFF (with the differing lines) a command, then
each written file's comparison.

    python benchmarks/readme_in_process.py .
"""
import os, shlex, subprocess, sys, tempfile, difflib
from pathlib import Path
from unittest import mock
ROOT = Path(sys.argv[1]).resolve()
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
os.chdir(ROOT / "tests")
import test_readme as T
from cli_in_process import run_cli
a, b = Path(tempfile.mkdtemp()), Path(tempfile.mkdtemp())
for d in (a, b):
    (d / "examples").symlink_to(ROOT / "examples")
for command, _ in T.EXAMPLES:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["PYTHONPATH"] = str(ROOT)
    p = subprocess.run([sys.executable, "-m", "tilemem", *shlex.split(command)[1:]], cwd=a,
                       env=env, capture_output=True, text=True)
    sub = [x.rstrip() for x in (p.stdout + p.stderr).splitlines()]
    os.chdir(b)
    code, inproc = T.tilemem(command)
    same = (p.returncode == code and sub == inproc)
    print(("SAME " if same else "DIFF ") + command, flush=True)
    if not same:
        print(p.returncode, code)
        print("\n".join(difflib.unified_diff(sub, inproc, lineterm="", n=0)))
import filecmp
for f in sorted(p.name for p in a.iterdir() if p.name != "examples"):
    print("file", f, "same" if (b / f).exists() and filecmp.cmp(a / f, b / f, shallow=False) else "DIFFERS")
print(sorted(p.name for p in b.iterdir()))
