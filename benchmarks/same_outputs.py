"""Are the outputs of two versions of tilemem the same? (a restructuring must not change them)

Runs the commands whose outputs a restructuring must keep (``alloc --deterministic``,
``alloc`` with ``replay``, ``heuristic`` and ``exact --deterministic``,
``oom --json``, ``report``, ``liveness``, ``check``, ``what-if``, ``diff``, ``split``, text
and JSON) with the working tree and with another
git revision checked out into a temporary worktree, on the bundled example and on any report
given, and compares what they print, field for field, leaving out only what measures time
(``seconds``). It also times both versions' CLI on the bundled example (each command run
once before, so that both read numba's cache).

    python benchmarks/same_outputs.py --base HEAD~3 [REPORT ...] [--keep DIR]

Exit status 0 when every output is the same, 1 when one differs (the first difference of each
is printed).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "mk1-small.json"

#: what a run prints that measures time, not the answer (and any key ending in "Seconds")
TIMING_KEYS = {"seconds"}

COMMANDS = {
    "alloc-deterministic": ["alloc", "{r}", "--deterministic", "--time-limit", "1", "--json"],
    "alloc-exact-deterministic": ["alloc", "{r}", "--method", "exact", "--deterministic",
                                  "--time-limit", "1", "--json"],
    "alloc-replay": ["alloc", "{r}", "--method", "replay", "--json"],
    "alloc-heuristic": ["alloc", "{r}", "--method", "heuristic", "--json"],
    "oom-json": ["oom", "{r}", "--json", "--method", "heuristic"],
    "oom-json-bound": ["oom", "{r}", "--json", "--no-repack"],
    "report": ["report", "{r}"],
    "report-json": ["report", "{r}", "--json"],
    "liveness": ["liveness", "{r}"],
    "liveness-json": ["liveness", "{r}", "--json"],
    "liveness-steps": ["liveness", "{r}", "--steps"],
    "liveness-steps-tile": ["liveness", "{r}", "--tile", "0", "--steps", "--json"],
    "check": ["check", "{r}"],
    "check-json": ["check", "{r}", "--json"],
    "what-if": ["what-if", "{r}", "--scale", "*/activations=2"],
    "what-if-json": ["what-if", "{r}", "--scale", "*=2", "--offload", "layer1*", "--json"],
    "diff": ["diff", "{r}", "{r}"],
    "diff-json": ["diff", "{r}", "{r}", "--json"],
    "split": ["split", "{r}"],
    "split-json": ["split", "{r}", "--ipus", "2", "--json"],
}


def run(tree: Path, args: list[str]) -> tuple[str, float]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "tilemem", *args], cwd=tree, env=env,
                       capture_output=True, text=True)
    dt = time.perf_counter() - t0
    return f"exit {p.returncode}\n{p.stdout}", dt


def without_timing(x):
    if isinstance(x, dict):
        return {k: without_timing(v) for k, v in x.items()
                if k not in TIMING_KEYS and not k.endswith("Seconds")}
    if isinstance(x, list):
        return [without_timing(v) for v in x]
    return x


def normalised(out: str) -> str:
    status, _, body = out.partition("\n")
    try:
        return status + "\n" + json.dumps(without_timing(json.loads(body)), indent=1,
                                          sort_keys=True)
    except ValueError:
        return out


def first_difference(a: str, b: str) -> str:
    for i, (x, y) in enumerate(zip(a.splitlines(), b.splitlines())):
        if x != y:
            return f"line {i + 1}:\n  base: {x}\n  now:  {y}"
    return f"lengths differ: {len(a.splitlines())} against {len(b.splitlines())} lines"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reports", nargs="*", type=Path, help="reports besides the bundled example")
    ap.add_argument("--base", required=True, help="the git revision to compare with")
    ap.add_argument("--keep", type=Path, help="write every output of both versions here")
    a = ap.parse_args(argv)
    reports = [EXAMPLE, *(p.resolve() for p in a.reports)]
    differ = 0
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(base),
                        a.base], check=True, capture_output=True)
        try:
            times = {"base": 0.0, "now": 0.0}
            for r in reports:
                for name, template in COMMANDS.items():
                    args = [str(r) if t == "{r}" else t for t in template]
                    if r == EXAMPLE:   # timed warm: numba's cache is per source path
                        run(base, args), run(ROOT, args)
                    (ob, tb), (on, tn) = run(base, args), run(ROOT, args)
                    if r == EXAMPLE:
                        times["base"] += tb
                        times["now"] += tn
                    if a.keep:
                        a.keep.mkdir(parents=True, exist_ok=True)
                        for side, out in (("base", ob), ("now", on)):
                            (a.keep / f"{r.stem}.{name}.{side}.txt").write_text(out)
                    same = normalised(ob) == normalised(on)
                    differ += not same
                    print(f"{'same     ' if same else 'DIFFERENT'} {r.name:24} {name}")
                    if not same:
                        print("   ", first_difference(normalised(ob), normalised(on)))
            print(f"CLI time on {EXAMPLE.name}, every command: base {times['base']:.1f} s, "
                  f"now {times['now']:.1f} s")
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)],
                           capture_output=True)
    print("every output the same" if not differ else f"{differ} output(s) differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
