"""Loading a large report keeps memory bounded: peak RSS under 3x the file size."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
from synthetic import synthetic_report  # noqa: E402

from tilemem.load import save_report  # noqa: E402

MEASURE = """
import sys
from tilemem.load import load_report
r = load_report(sys.argv[1])
assert r.num_vars > 0
# VmHWM, not ru_maxrss: Linux carries ru_maxrss over fork+exec from the parent
print(int(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')).split()[1]) * 1024)
"""


@pytest.fixture(scope="module")
def big_reports(tmp_path_factory):
    d = tmp_path_factory.mktemp("big")
    r = synthetic_report(660_000, num_classes=4000, degree=40)
    paths = {"json": d / "big.json", "capnp": d / "big.capnp"}
    for p in paths.values():
        save_report(r, p)
    return paths


@pytest.mark.slow
# one xdist worker for both formats: the 200 MB report (big_reports) is built once
@pytest.mark.xdist_group("big_reports")
@pytest.mark.parametrize("fmt", ["json", "capnp"])
def test_peak_rss_under_three_times_file_size(big_reports, fmt):
    path = big_reports[fmt]
    json_size = os.path.getsize(big_reports["json"])
    assert json_size >= 200e6, "the test report must be at least 200 MB of JSON"
    out = subprocess.run([sys.executable, "-c", MEASURE, str(path)], capture_output=True,
                         text=True, check=True, timeout=600)
    peak = int(out.stdout.split()[-1])
    size = os.path.getsize(path)
    # capnp files are smaller than their JSON twin: hold them to the JSON's budget too
    budget = 3 * max(size, json_size if fmt == "capnp" else size)
    assert peak < budget, f"peak RSS {peak / 1e6:.0f} MB for a {size / 1e6:.0f} MB {fmt} file"
