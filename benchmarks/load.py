"""Loading speed and memory: JSON vs capnp (and stdlib json as the baseline), same report.

    python benchmarks/load.py                 # a ~300 MB synthetic report
    python benchmarks/load.py --vars 3000000  # ~1 GB
    python benchmarks/load.py --report vars.json

Each load runs in a fresh subprocess; prints seconds, seconds per GB, peak RSS and RSS per GB
of file, and the ratios capnp/JSON and tilemem-JSON/stdlib-json.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

CHILD = """
import sys, time
t = time.perf_counter()
if sys.argv[2] == "stdlib":
    import json
    with open(sys.argv[1]) as f:
        json.load(f)
else:
    from tilemem.load import load_report
    load_report(sys.argv[1])
# VmHWM, not ru_maxrss: Linux carries ru_maxrss over fork+exec from the parent
hwm = next(l for l in open('/proc/self/status') if l.startswith('VmHWM'))
print(time.perf_counter() - t, int(hwm.split()[1]) * 1024)
"""


def measure(path: Path, how: str) -> tuple[float, int]:
    out = subprocess.run([sys.executable, "-c", CHILD, str(path), how], check=True,
                         capture_output=True, text=True).stdout.split()
    return float(out[0]), int(out[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vars", type=int, default=1_000_000, help="synthetic report size")
    ap.add_argument("--report", type=Path, help="a JSON report to use instead")
    ap.add_argument("--no-stdlib", action="store_true", help="skip the stdlib json baseline")
    args = ap.parse_args()

    from tilemem.load import load_report, save_report

    with tempfile.TemporaryDirectory() as d:
        js = Path(d) / "r.json"
        cp = Path(d) / "r.capnp"
        if args.report:
            js = args.report
            save_report(load_report(js), cp)
        else:
            from synthetic import synthetic_report

            r = synthetic_report(args.vars, num_classes=4000, degree=40)
            save_report(r, js)
            save_report(r, cp)
            del r
        rows = []
        for label, path, how in (("tilemem JSON", js, "tilemem"), ("tilemem capnp", cp, "tilemem"),
                                 ("stdlib json (baseline)", js, "stdlib")):
            if how == "stdlib" and args.no_stdlib:
                continue
            secs, rss = measure(path, how)
            gb = os.path.getsize(path) / 1e9
            rows.append((label, gb, secs, rss))
            print(f"{label:24s} {gb * 1000:8.0f} MB  {secs:7.2f} s  {secs / gb:7.2f} s/GB  "
                  f"peak RSS {rss / 1e6:7.0f} MB  {rss / 1e9 / gb:5.2f} GB/GB")
        t = {label: (secs, rss) for label, _, secs, rss in rows}
        print(f"capnp is {t['tilemem JSON'][0] / t['tilemem capnp'][0]:.1f}x faster than JSON "
              f"(goal >= 10x)")
        if "stdlib json (baseline)" in t:
            s, m = t["stdlib json (baseline)"]
            print(f"tilemem JSON vs stdlib json: {s / t['tilemem JSON'][0]:.2f}x the speed, "
                  f"{t['tilemem JSON'][1] / m:.2f}x the peak memory")


if __name__ == "__main__":
    main()
