"""Pod scale: wall time and peak memory of the commands on N-IPU generated reports.

For each report, runs ``tilemem info``, ``tilemem check``, ``tilemem oom --no-repack``,
``tilemem config``,
``tilemem split``, ``tilemem convert`` to JSON (then that JSON back to capnp, streamed, and
``tilemem info`` handed the JSON: a command that needs a conversion) and ``tilemem html``
(``--commands`` picks,
``alloc`` too: at the default budget, its output then checked by ``tilemem check``;
``generate`` itself when it makes the report, ``--model`` and ``--tiles`` say which) as a
user would, one at a time, and records

- wall time, and CPU time (user + system, of the command and its children: the time that
  compares on a shared machine),
- peak resident set (``VmHWM`` of each process, summed over the run's processes),
- peak anonymous memory (``RssAnon``: what the kernel cannot drop, unlike a mapped report's
  file pages), sampled every 50 ms and summed over the run's processes.

    python benchmarks/pod.py --ipus 1 2 4                 # generates mk2 seed 12 reports
    python benchmarks/pod.py --ipus 16 --model transformer --commands info check
    python benchmarks/pod.py --report /tmp/pod/r4.capnp   # an existing report
    python benchmarks/pod.py --report r4.capnp --src /tmp/base  # another checkout's code

``--src`` runs the commands from another source tree (``PYTHONPATH``), so a before / after
table comes from one script on the same reports. Prints one Markdown table row a run.
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

COMMANDS = {"info": ["info"], "check": ["check"], "oom --no-repack": ["oom", "--no-repack"],
            "split": ["split"], "config": ["config"], "convert": ["convert"], "alloc": ["alloc"],
            "html": ["html"]}
#: command -> output file it writes beside the report (``{stem}``: the report's name)
OUTPUTS = {"convert": "{stem}.converted.json", "alloc": "{stem}.alloc.capnp",
           "html": "{stem}.html"}
#: commands that take their output as ``-o OUT`` (the others as a second argument)
OUTPUT_OPTION = {"alloc", "html"}
#: outputs checked by ``tilemem check`` before they are removed (a result must be valid)
CHECKED = {"alloc"}
#: converted outputs that are converted back (``{stem}``: the report's name): the JSON path
#: at scale is both directions, and what a command handed the JSON does (it reads JSON whole,
#: so a large one is refused, one line, before any long work)
CONVERTED_BACK = {"convert": "{stem}.reconverted.capnp"}


def _status(pid: int) -> dict[str, int]:
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("RssAnon", "VmHWM", "VmRSS"):
                    out[key] = int(rest.split()[0]) * 1024
    except OSError:
        pass
    return out


def _tree(root: int) -> list[int]:
    """``root`` and its descendants (from /proc/PID/task/*/children)."""
    pids, todo = [], [root]
    while todo:
        p = todo.pop()
        pids.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return pids


def measure(argv: list[str], env: dict, interval: float = 0.05) -> dict:
    """Runs ``argv``; wall seconds, CPU seconds (user + system of it and the children it
    waited for: on a shared machine the comparable time), peak summed RssAnon, peak summed
    VmHWM (each process's own peak, summed over the processes seen), exit code."""
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak_anon, hwm = 0, {}
    while proc.poll() is None:
        anon = 0
        for p in _tree(proc.pid):
            s = _status(p)
            anon += s.get("RssAnon", 0)
            if "VmHWM" in s:
                hwm[p] = max(hwm.get(p, 0), s["VmHWM"])
        peak_anon = max(peak_anon, anon)
        time.sleep(interval)
    err = proc.stderr.read().decode(errors="replace")
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    return {"wall": time.perf_counter() - t0, "cpu": cpu, "anon": peak_anon,
            "rss": sum(hwm.values()),
            "code": proc.returncode, "stderr": err.strip().splitlines()[-1:] if err else []}


def row(label: str, ipus: int | str, command: str, m: dict) -> str:
    gb = 1 << 30
    return (f"| {label} | {ipus} | {command} | {m['wall']:.1f} s | {m['cpu']:.1f} s | "
            f"{m['rss'] / gb:.2f} GB | {m['anon'] / gb:.2f} GB |" + ("" if m["code"] == 0 else
                                            f" exit {m['code']}: {m['stderr']}"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ipus", type=int, nargs="*", default=[],
                    help="generate mk2 reports over these IPU counts (timed too)")
    ap.add_argument("--report", nargs="*", default=[], help="existing reports to measure")
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--model", default="cnn", choices=["cnn", "transformer"],
                    help="program family of the generated reports")
    ap.add_argument("--tiles", type=int, default=None,
                    help="tiles per IPU of the generated reports (default: the whole IPU)")
    ap.add_argument("--keep", action="store_true",
                    help="keep the commands' outputs (default: removed, reports are large)")
    ap.add_argument("--out", default="/tmp/pod", help="folder for generated reports")
    ap.add_argument("--src", default=str(Path(__file__).resolve().parents[1]),
                    help="source tree whose tilemem runs (PYTHONPATH)")
    ap.add_argument("--label", default="", help="first column of the table (e.g. before)")
    ap.add_argument("--commands", nargs="*", default=[c for c in COMMANDS if c != "alloc"],
                    choices=list(COMMANDS))
    a = ap.parse_args(argv)
    env = dict(os.environ, PYTHONPATH=a.src)
    tm = [sys.executable, "-m", "tilemem"]
    label = a.label or Path(a.src).name
    print("| code | IPUs | command | wall | CPU | peak RSS (sum) | peak RssAnon (sum) |")
    print("|---|---|---|---|---|---|---|")
    reports = [(r, "?") for r in a.report]
    for n in a.ipus:
        tag = ("" if a.model == "cnn" else "t") + ("" if a.tiles is None else f"x{a.tiles}")
        path = Path(a.out) / f"r{n}{tag}-seed{a.seed}.capnp"
        m = measure(tm + ["generate", "--preset", "mk2", "--model", a.model, "--ipus", str(n),
                          "--seed", str(a.seed), "-o", str(path)]
                    + ([] if a.tiles is None else ["--tiles", str(a.tiles)]), env)
        print(row(label, n, "generate", m), flush=True)
        reports.append((str(path), n))
    for path, n in reports:
        for name in a.commands:
            out = ([str(Path(a.out) / OUTPUTS[name].format(stem=Path(path).stem))]
                   if name in OUTPUTS else [])
            m = measure(tm + COMMANDS[name] + [path]
                        + (["-o"] if name in OUTPUT_OPTION else []) + out, env)
            print(row(label, n, f"{name} `{Path(path).name}`", m), flush=True)
            if name in CONVERTED_BACK and m["code"] == 0:
                back = str(Path(a.out) / CONVERTED_BACK[name].format(stem=Path(path).stem))
                c = measure(tm + ["convert", out[0], back], env)
                print(row(label, n, f"convert `{Path(out[0]).name}` `{Path(back).name}`", c),
                      flush=True)
                c = measure(tm + ["info", out[0]], env)
                print(row(label, n, f"info `{Path(out[0]).name}`", c), flush=True)
                out.append(back)
            if name in CHECKED and m["code"] == 0:
                for o in out:   # the result must be valid: checked as a user would
                    c = measure(tm + ["check", o], env)
                    print(row(label, n, f"check `{Path(o).name}` (its result)", c), flush=True)
            for o in out if not a.keep else []:   # not kept: reports are large
                Path(o).unlink(missing_ok=True)
                Path(o + ".journal").unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
