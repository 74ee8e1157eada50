"""Time and memory of ``Report.variables()`` (the variables as a pandas DataFrame) and
``Report.to_arrow()`` on one report, each in a fresh process after loading it.

    python benchmarks/variables.py REPORT [--no-names]

Prints the rows, the load time, then for each: seconds (pandas and pyarrow imported before),
the resident memory the call added (``VmRSS``, before and after), and what the table holds
(pandas ``memory_usage(deep=True)``, Arrow ``nbytes``; columns shared with the report, not
copied, are counted there too).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = """
import json, sys, time
import pandas, pyarrow
import tilemem

def rss_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024

t0 = time.perf_counter()
r = tilemem.load(sys.argv[1])
loaded = time.perf_counter() - t0
before = rss_mb()
t0 = time.perf_counter()
if sys.argv[2] == "variables":
    t = r.variables(names=sys.argv[3] == "1")
    held = int(t.memory_usage(deep=True).sum())
else:
    t = r.to_arrow(names=sys.argv[3] == "1")
    held = int(t.nbytes)
seconds = time.perf_counter() - t0
print(json.dumps({"rows": len(t), "load": loaded, "seconds": seconds,
                  "grown_mb": rss_mb() - before, "held_mb": held / 1e6}))
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report")
    ap.add_argument("--no-names", action="store_true", help="leave the name column out")
    a = ap.parse_args(argv)
    for what in ("variables", "to_arrow"):
        out = subprocess.run([sys.executable, "-c", CHILD, a.report, what,
                              "0" if a.no_names else "1"], capture_output=True, text=True,
                             check=True)
        m = json.loads(out.stdout)
        print(f"{what}(): {m['rows']:,} rows in {m['seconds']:.2f} s (load {m['load']:.1f} s), "
              f"resident memory +{m['grown_mb']:.0f} MB, the table {m['held_mb']:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
