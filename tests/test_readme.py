"""Every command the README shows runs as shown: each ``console`` block's ``$ tilemem ...``
lines are run on the bundled example (in a scratch folder, 100 columns wide), must exit 0,
and must print the lines the README shows under them, in order (a shown line matches an
output line it begins; ``...`` stands for lines left out). So the README cannot drift from
the code."""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

# the commands run in order in one scratch folder (diff reads what generate wrote just
# before it): one worker for all of them (``--dist loadgroup`` in pyproject.toml)
pytestmark = pytest.mark.xdist_group("readme")


def examples() -> list[tuple[str, list[str]]]:
    """``(command, shown lines)`` of every ``$ tilemem`` line of the README's console blocks."""
    out = []
    for block in re.findall(r"```console\n(.*?)```", README.read_text(), re.S):
        for part in re.split(r"^\$ ", block, flags=re.M)[1:]:
            command, *shown = part.rstrip("\n").split("\n")
            out.append((command, shown))
    return out


EXAMPLES = examples()


def test_the_readme_shows_commands():
    assert len(EXAMPLES) >= 8
    assert all(c.startswith("tilemem ") for c, _ in EXAMPLES)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    d = tmp_path_factory.mktemp("readme")
    (d / "examples").symlink_to(ROOT / "examples")
    return d


@pytest.mark.parametrize("command,shown", EXAMPLES, ids=[c[:60] for c, _ in EXAMPLES])
def test_readme_command_runs_as_shown(command, shown, scratch):
    args = shlex.split(command)[1:]
    env = dict(os.environ, COLUMNS="100", PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-m", "tilemem", *args], cwd=scratch, env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    lines = [x.rstrip() for x in (p.stdout + p.stderr).splitlines()]
    at = 0
    for want in (x.rstrip() for x in shown):
        if want == "...":
            continue
        while at < len(lines) and not lines[at].startswith(want):
            at += 1
        assert at < len(lines), f"{command!r} did not print {want!r}:\n" + "\n".join(lines)
        at += 1
