"""Program-level out-of-memory answers on a whole report: seconds and peak memory of
``tilemem oom --no-repack`` (the program summary by the bound), ``tilemem what-if`` (by the
bound) and ``tilemem diff``, each against ``tilemem liveness --json`` (every tile's maximum
live bytes, the computation they all build on) measured in the same run; and whether the
summary's counts agree with ``tilemem alloc`` and ``tilemem liveness`` on the same report.

    python benchmarks/program.py REPORT OTHER [--method heuristic]

REPORT and OTHER: two compilations of one program (e.g. ``tilemem generate --preset mk2
--seed 1`` and the same with ``--available-memory-proportion 0.9``, equivalenceClassSteps
removed, as capnp). ``--method``: the re-pack of the agreement check (heuristic: the same
tiles fit whatever the machine's load, as alloc and oom then run the same packer).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile


def timed(args: list[str]) -> tuple[float, float, str]:
    """``(seconds, peak RSS in GB, stdout)`` of ``tilemem ARGS`` (GNU time)."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as t:
        p = subprocess.run(["/usr/bin/time", "-f", "%e %M", "-o", t.name, "tilemem", *args],
                           capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"tilemem {' '.join(args)} failed: {p.stderr.strip()}")
        secs, kb = t.read().split()[-2:]
    return float(secs), int(kb) / 1e6, p.stdout


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report")
    ap.add_argument("other")
    ap.add_argument("--method", default="heuristic")
    a = ap.parse_args(argv)
    rows = []
    base_s, base_m, out = timed(["liveness", a.report, "--json"])
    live = {t["tile"]: t["maxLiveBytes"] for t in json.loads(out)["tiles"]}
    rows.append(("liveness --json (baseline)", base_s, base_m))
    s, m, out = timed(["oom", a.report, "--no-repack", "--json"])
    bound = json.loads(out)
    rows.append(("oom --no-repack (program summary by the bound)", s, m))
    s, m, text = timed(["oom", a.report, "--no-repack"])
    lines = text.splitlines()
    ends = next((i for i, x in enumerate(lines) if x.startswith("Out-of-memory tiles")), None)
    s, m, _ = timed(["what-if", a.report, "--offload", "*/momentum", "--json"])
    rows.append(("what-if --offload '*/momentum' (by the bound)", s, m))
    s, m, _ = timed(["diff", a.report, a.other, "--json"])
    rows.append(("diff REPORT OTHER", s, m))
    print(f"{'command':52} {'seconds':>8} {'peak GB':>8} {'x liveness':>10}")
    for name, s, m in rows:
        print(f"{name:52} {s:8.1f} {m:8.2f} {s / base_s:10.1f}")
    print(f"oom's text: {len(lines)} lines, the program summary ends at line {ends}")
    # agreement: the summary's counts against liveness and alloc on the same report
    tm = bound["summary"]["tileMemory"]
    agree_live = all(t["maxLiveBytes"] == live[t["tile"]] for t in bound["tiles"])
    reduce = sum(live[t["tile"]] > tm for t in bound["tiles"])
    print(f"maximum live bytes per tile as liveness: {agree_live}; reduce-data tiles "
          f"{bound['summary']['verdicts']['reduceData']} (liveness: {reduce})")
    _, _, out = timed(["oom", a.report, "--method", a.method, "--json"])
    s_oom = json.loads(out)["summary"]
    _, _, out = timed(["alloc", a.report, "--method", a.method, "--json"])
    s_alloc = json.loads(out)["summary"]
    print(f"--method {a.method}: tiles that fit after re-packing {s_oom['tilesThatFitAfter']} "
          f"(alloc: {s_alloc['tilesThatFit']}), overflow {s_oom['overflowBytesAfter']} "
          f"(alloc: {s_alloc['overflowBytes']}), with the report's offsets "
          f"{s_oom['tilesThatFitBefore']} (alloc: {s_alloc['tilesThatFitBefore']})")
    same = (s_oom["tilesThatFitAfter"] == s_alloc["tilesThatFit"]
            and s_oom["overflowBytesAfter"] == s_alloc["overflowBytes"])
    print("counts agree" if same and agree_live else "COUNTS DIFFER")
    return 0 if same and agree_live else 1


if __name__ == "__main__":
    sys.exit(main())
