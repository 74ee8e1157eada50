"""The import arrows of tilemem/ (docs/architecture.md): a stage imports only the stages before
it, and no stage imports the CLI or click. Every import is read with ast (function-level ones
too, relative ones resolved), so nothing is imported to check it."""
from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

# the rules below each read every module of tilemem: parsed and walked once a worker, not once
# a rule (the trees are only read)
pytestmark = pytest.mark.xdist_group("architecture")


@functools.lru_cache(maxsize=None)
def parsed(source: str) -> ast.Module:
    return ast.parse(source)


@functools.lru_cache(maxsize=None)
def nodes(source: str) -> tuple[ast.AST, ...]:
    """Every node of ``source``'s tree (``ast.walk``'s order)."""
    return tuple(ast.walk(parsed(source)))

PACKAGE = Path(__file__).resolve().parents[1] / "tilemem"

#: Module -> stage, by the longest matching prefix: a new module joins the stage of its folder
#: (tilemem/load/*.py, tilemem/pack/run/driver.py, tilemem/plot/html.py, ...). The flat load
#: modules belong to the load stage until they move into tilemem/load/.
STAGES = {
    "tilemem": "package",
    "tilemem.errors": "base", "tilemem.rules": "base", "tilemem.levers": "base",
    "tilemem.jit": "base",
    "tilemem.model": "model",
    "tilemem.load": "load",
    "tilemem.interop": "interop",
    "tilemem.liveness": "liveness",
    "tilemem.pack": "pack",
    "tilemem.check": "check",
    "tilemem.figures": "figures",
    "tilemem.text": "text",
    "tilemem.plot": "plot",
    "tilemem.generate": "generate",
    "tilemem.api": "api",
    "tilemem.cli": "cli", "tilemem.commands": "cli", "tilemem.__main__": "cli",
}

#: Stage -> the stages it may import (besides itself and the base: errors, rules, levers).
ALLOWED = {
    # the package's __init__ re-exports the API (loaded on first use) and tilemem.plot
    "package": {"api", "plot"},
    "base": set(),
    "model": set(),
    "load": {"model"},
    "interop": {"model", "load"},
    "liveness": {"model"},
    "check": {"model"},
    # check: the driver's verify, independent; load: a cluster worker opens the shared report
    # file and reads its tiles, the journal hashes the report it resumes
    "pack": {"model", "load", "liveness", "check"},
    "figures": {"model", "load", "liveness", "pack", "check"},
    "text": {"model", "load", "liveness", "pack", "check", "figures"},
    "plot": {"model", "load", "liveness", "figures"},
    "generate": {"model", "liveness", "pack", "figures"},
    # the API sits at the top, like the CLI, but below it: the CLI is a layer over the API
    "api": set(STAGES.values()) - {"cli", "package"},
    "cli": set(STAGES.values()),
}

#: Libraries only the CLI may import.
CLI_ONLY = ("click",)


def module_name(path: Path, root: Path = PACKAGE) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def stage_of(module: str) -> str | None:
    """The stage of ``module``: its longest prefix in ``STAGES`` (``tilemem`` alone is only
    the package's ``__init__``)."""
    best = None
    for prefix in STAGES:
        inside = module == prefix or (module.startswith(prefix + ".") and prefix != "tilemem")
        if inside and (best is None or len(prefix) > len(best)):
            best = prefix
    return None if best is None else STAGES[best]


def imports(source: str, module: str, is_package: bool):
    """``(line, imported module, statement text)`` of every import in ``source``, relative
    imports resolved against ``module`` (``is_package``: the file is its ``__init__.py``).
    ``from tilemem import x`` imports the module ``tilemem.x``."""
    tree = parsed(source)
    package = module if is_package else module.rpartition(".")[0]
    for node in nodes(source):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name, ast.unparse(node)
        elif isinstance(node, ast.ImportFrom):
            target = node.module or ""
            if node.level:
                base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            if target == "tilemem":
                for a in node.names:
                    yield node.lineno, f"tilemem.{a.name}", ast.unparse(node)
            else:
                yield node.lineno, target, ast.unparse(node)


def forbidden(path: Path, source: str, root: Path = PACKAGE) -> list[str]:
    """Every import of the file at ``path`` (text ``source``) that breaks an arrow."""
    module = module_name(path, root)
    where = path.relative_to(root.parent)
    mine = stage_of(module)
    if mine is None:
        return [f"{where}: module {module} is in no stage: add its folder to STAGES in "
                f"tests/test_architecture.py and to docs/architecture.md"]
    out = []
    for line, target, text in imports(source, module, path.name == "__init__.py"):
        top = target.split(".")[0]
        if top in CLI_ONLY and mine != "cli":
            out.append(f"{where}:{line}: `{text}`: only the CLI imports {top}")
        if top != "tilemem":
            continue
        theirs = stage_of(target)
        if theirs is None:
            out.append(f"{where}:{line}: `{text}`: {target} is in no stage")
        elif theirs not in ({mine, "base"} | ALLOWED[mine]):
            out.append(f"{where}:{line}: `{text}`: {mine} -> {theirs} is a forbidden arrow "
                       f"({mine} may import {sorted(ALLOWED[mine]) or 'nothing of ours'})")
    return out


def test_no_forbidden_arrow_in_tilemem():
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 30
    problems = [p for f in files for p in forbidden(f, f.read_text())]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("file,source,message", [
    # model -> anything of ours, even inside a function
    ("model/__init__.py", "def f():\n    from ..pack.alloc import allocate\n",
     "tilemem/model/__init__.py:2: `from ..pack.alloc import allocate`: model -> pack"),
    ("model/target.py", "from tilemem import liveness\n",
     "tilemem/model/target.py:1: `from tilemem import liveness`: model -> liveness"),
    # check -> pack, and check -> liveness (the checker shares no code with the packers)
    ("check.py", "from .pack.problem import TileProblem\n", "check -> pack"),
    ("check.py", "import tilemem.liveness\n", "check -> liveness"),
    # pack -> figures / text / plot, from a module that does not exist yet
    ("pack/run/driver.py", "from ...figures.memory import memory_figures\n", "pack -> figures"),
    ("pack/run/driver.py", "from ... import text\n", "pack -> text"),
    ("pack/run/driver.py", "from ...plot.maps import plot_tile\n", "pack -> plot"),
    # any stage -> the CLI or click
    ("figures/oom.py", "from ..commands.options import console\n", "figures -> cli"),
    ("load/allocation.py", "from ..cli import main\n", "load -> cli"),
    # the API is public, the CLI a layer over it: never the other way round
    ("api/answers.py", "from ..commands.options import console\n", "api -> cli"),
    ("api/loading.py", "import click\n", "only the CLI imports click"),
    ("figures/oom.py", "from .. import api\n", "figures -> api"),
    ("plot/html.py", "import click\n", "tilemem/plot/html.py:1: `import click`: only the CLI"),
    ("text/alloc.py", "def f():\n    import click.testing\n", "only the CLI imports click"),
    # a stage looking forward
    ("liveness/__init__.py", "from ..pack.problem import TileProblem\n", "liveness -> pack"),
    ("interop/minimalloc.py", "from ..liveness import timeline\n", "interop -> liveness"),
    # a module outside every stage
    ("report.py", "import numpy\n", "tilemem/report.py: module tilemem.report is in no stage"),
])
def test_a_forbidden_arrow_is_named(file, source, message):
    found = forbidden(PACKAGE / file, source)
    assert len(found) == 1 and message in found[0], found


@pytest.mark.parametrize("file,source", [
    ("figures/oom.py", "def f():\n    from ..pack.alloc import allocate\n"),
    ("pack/run/driver.py", "from ...check import check_allocation\nfrom ..guard import self_check\n"),
    ("load/__init__.py", "from .jsonio import read_json_file\nfrom ..model import Report\n"),
    ("plot/maps.py", "from ..figures import memory\nfrom ..liveness import timeline\n"),
    ("commands/plot.py", "import click\nfrom ..pack.alloc import allocate\n"),
    ("model/overlap.py", "from . import Csr\nfrom ..errors import ReportError\n"),
    ("api/program.py", "from ..figures.oom import diagnose_program\nfrom ..pack import driver\n"),
    ("commands/oom.py", "from .. import api\n"),
])
def test_allowed_arrows_pass(file, source):
    assert forbidden(PACKAGE / file, source) == []


def positional_slots(source: str) -> list[tuple[int, str]]:
    """``(line, what)`` of every positional tuple of more than four slots that crosses a
    function boundary in ``source``: a tuple literal returned, or a call's result unpacked
    into more than four names (named tuples and dataclasses are the way instead)."""
    found = []
    for node in nodes(source):
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple) \
                and len(node.value.elts) > 4:
            found.append((node.lineno, f"returns a {len(node.value.elts)}-tuple"))
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple) \
                and len(node.targets[0].elts) > 4 \
                and isinstance(node.value, (ast.Call, ast.Name, ast.Attribute, ast.Subscript)) \
                and not (isinstance(node.value, ast.Call)
                         and getattr(node.value.func, "id", "") == "range"):
            found.append((node.lineno, f"unpacks {len(node.targets[0].elts)} slots"))
    return found


def test_no_positional_tuple_of_more_than_four_slots_in_pack():
    bad = [f"{path.relative_to(PACKAGE.parent)}:{line}: {what}"
           for path in sorted((PACKAGE / "pack").rglob("*.py"))
           for line, what in positional_slots(path.read_text())]
    assert not bad, bad


@pytest.mark.parametrize("source,count", [
    ("def f():\n    return a, b, c, d, e\n", 1),
    ("a, b, c, d, e = task\n", 1),
    ("a, b, c, d, e = g(x)\n", 1),
    ("A, B, C, D, E = range(5)\n", 0),       # named constants, no function boundary
    ("def f():\n    return a, b, c, d\n", 0),
    ("a, b, c, d, e = x.f, x.g, x.h, x.i, x.j\n", 0),
])
def test_the_tuple_rule_sees_what_it_should(source, count):
    assert len(positional_slots(source)) == count


def import_graph(sources: dict[Path, str], root: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the tilemem modules it imports (function-level imports too). An import names
    the module it loads: ``from .x import y`` is an arrow to ``x.y`` when that is a module,
    else to ``x``; ``from . import name`` to the package only when ``name`` is not one of
    its modules.

    Why the parent packages an import passes through are not arrows: Python runs a package's
    ``__init__`` before any of its modules, and a module may be loaded while that ``__init__``
    is still running, so ``search/__init__`` re-exporting ``solver`` while ``solver`` imports
    ``search.sweep`` is no cycle in any sense that can break. Counting those implied arrows
    would make every re-export a cycle; a module that imports a name from its package's
    ``__init__`` does depend on it, and that arrow is counted."""
    names = {module_name(path, root): path for path in sources}
    graph = {}
    for path, source in sources.items():
        mine = module_name(path, root)
        out = set()
        tree = parsed(source)
        package = mine if path.name == "__init__.py" else mine.rpartition(".")[0]
        for node in nodes(source):
            if isinstance(node, ast.Import):
                out.update(a.name for a in node.names if a.name in names)
            elif isinstance(node, ast.ImportFrom):
                target = node.module or ""
                if node.level:
                    base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                for a in node.names:
                    if f"{target}.{a.name}" in names:
                        out.add(f"{target}.{a.name}")
                    elif target in names:
                        out.add(target)
        out.discard(mine)
        graph[mine] = out
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (``[a, b, ..., a]``) in every strongly connected component of ``graph`` that
    has more than one module, found by depth-first search."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []

    def visit(v):   # Tarjan's algorithm; the graph is a few hundred modules deep at most
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                components.append(set(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_shortest_cycle(graph, comp, min(comp)) for comp in components]


def _shortest_cycle(graph: dict[str, set[str]], comp: set[str], start: str) -> list[str]:
    """The shortest cycle from ``start`` through modules of ``comp`` (breadth first)."""
    prev: dict[str, str] = {}
    frontier, seen = [start], {start}
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & comp):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(prev[path[-1]])
                    return path[::-1] + [start]
                if w not in seen:
                    seen.add(w)
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"{start} is on no cycle of its component")


def test_no_import_cycle_in_tilemem():
    sources = {f: f.read_text() for f in sorted(PACKAGE.rglob("*.py"))}
    cycles = import_cycles(import_graph(sources))
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


@pytest.mark.parametrize("files,expected", [
    # a function-level import closes the cycle
    ({"a.py": "def f():\n    from .b import g\n", "b.py": "from . import c\n",
      "c.py": "from tilemem.pack.a import f\n"},
     [["tilemem.pack.a", "tilemem.pack.b", "tilemem.pack.c", "tilemem.pack.a"]]),
    # a re-export in the package's __init__ and a sibling import: no cycle
    ({"__init__.py": "from .a import f\n", "a.py": "from .b import g\n", "b.py": ""}, []),
    # a module that takes a name from its package's __init__, which re-exports it: a cycle
    ({"__init__.py": "from .a import f\nfrom .b import g\n", "a.py": "from . import g\n",
      "b.py": ""},
     [["tilemem.pack", "tilemem.pack.a", "tilemem.pack"]]),
])
def test_an_import_cycle_is_named(files, expected):
    sources = {PACKAGE / "pack" / name: source for name, source in files.items()}
    assert import_cycles(import_graph(sources)) == expected


#: The module-level numbers of tilemem/pack that are facts, not tuning values (those are in
#: ``SolverParams``, ``tilemem/pack/params.py``, and the plan's ``Policy``), each with why.
PACK_FACTS = {
    # the search kernels' array layout, states and keys (search/layout.py), whole
    "search/layout.py": None,
    # sentinels and bit flags
    "guard.py": {"INF", "K_CONFLICT", "K_ELEMENT", "K_REGION"},
    "firstfit.py": {"_FAR"},
    # the goal the project measures (within 1 % of the bound), not a tuning value
    "quick.py": {"NEAR"},
    # measured rates that turn a deterministic run's time limit into work
    "portfolio.py": {"SEARCH_NODE_VARIABLES_PER_SECOND", "LOCAL_SEARCH_MOVES_PER_SECOND"},
    "cpsat.py": {"DETERMINISTIC_UNITS_PER_SECOND"},
    # the journal's format: its version, the largest record it reads, how often it syncs
    "run/journal.py": {"VERSION", "MAX_PAYLOAD", "SYNC_INTERVAL"},
    # the search model's definition (cached per problem, so not a per-call value): the
    # canonical rank's work limits, the window groups a restricted section is compared
    # with, the trail buffers kept for reuse (a memory bound)
    "search/sweep.py": {"RANK_REFINE_MAX", "RANK_ROUNDS_OVER", "RANK_ROUNDS_LARGE"},
    "search/restrict.py": {"LOOK_BACK"},
    "search/run.py": {"KEEP_TRAILS"},
    # the proof's subsets: the peak's clique and the windows around it, each twice as wide
    "proof.py": {"WINDOWS"},
}


def module_numbers(source: str) -> list[tuple[int, str]]:
    """``(line, name)`` of every module-level assignment of a value holding a number."""
    found = []
    for node in parsed(source).body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            if any(isinstance(c, ast.Constant) and type(c.value) in (int, float)
                   for c in ast.walk(node.value)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for tg in targets:
                    for name in ast.walk(tg):
                        if isinstance(name, ast.Name):
                            found.append((node.lineno, name.id))
    return found


def test_no_module_level_tuning_number_in_pack():
    """Every tuning value of the packer is in ``SolverParams`` or the plan's ``Policy``: a
    module-level number elsewhere in tilemem/pack is one of the named facts above."""
    pack = PACKAGE / "pack"
    bad = []
    for path in sorted(pack.rglob("*.py")):
        rel = path.relative_to(pack).as_posix()
        if rel == "params.py" or PACK_FACTS.get(rel, set()) is None:
            continue
        for line, name in module_numbers(path.read_text()):
            if name not in PACK_FACTS.get(rel, set()):
                bad.append(f"tilemem/pack/{rel}:{line}: {name}")
    assert not bad, "tuning numbers outside SolverParams / Policy: " + ", ".join(bad)


@pytest.mark.parametrize("source,names", [
    ("STEP = 0.5\n", ["STEP"]),
    ("A, B = 1, 2\n", ["A", "B"]),
    ("T: dict = {'x': 0.05}\n", ["T"]),
    ("NAME = 'quick'\nFLAG = True\n", []),
    ("def f():\n    x = 0.4\n", []),
])
def test_the_number_rule_sees_what_it_should(source, names):
    assert [n for _, n in module_numbers(source)] == names


#: The float literals allowed in the function bodies (defaults included) of tilemem/pack, each
#: with why; every other float there is a tuning value, which belongs in ``SolverParams`` or
#: the plan's ``Policy``. Allowed everywhere: nothing and all (a clock's zero, a share
#: clipped to [0, 1]).
PACK_FLOATS_EVERYWHERE = {0.0, 1.0}
#: Per module, besides: the clock's grain, not tuning (seconds too few to start a call in,
#: its set-up alone would outlast them; the least a call that must run is given: 0.005 to
#: 0.1 s), and the facts named.
PACK_FLOATS = {
    "cpsat.py": {0.01, 0.05},
    "fresh.py": {0.01},
    "neighbourhood.py": {0.01, 0.02},
    "portfolio.py": {0.01, 0.05, 0.1},
    "proof.py": {0.01},
    "quick.py": {0.005, 0.02},
    "run/tasks.py": {0.05},
    # and a division's guard against an empty run
    "run/plan.py": {0.05, 1e-9},
    # and the compiled groups' warm-up on a tiny problem
    "compiled.py": {0.05},
    # the kernel's pause: a call runs 10 to 40 ms between looks at the clock, so a deadline
    # is overshot by that much at most
    "search/run.py": {0.01, 0.04},
    # the summary's figures, as their names say: median, 95th percentile, within 1 %
    "result.py": {0.5, 0.95, 0.01},
    # seconds a Dask client waits for its scheduler: a network timeout
    "workers/executors.py": {30.0},
    "workers/daskexec.py": {30.0},
}


def function_floats(source: str) -> list[tuple[int, float]]:
    """``(line, value)`` of every float literal inside a function of ``source`` (its body
    and its defaults; a negative number is its literal negated)."""
    found, seen = [], set()
    for fn in nodes(source):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for node in ast.walk(fn):
                if isinstance(node, ast.Constant) and type(node.value) is float \
                        and id(node) not in seen:
                    seen.add(id(node))
                    found.append((node.lineno, node.value))
    return sorted(found)


def test_no_tuning_float_in_pack_function_bodies():
    """A float written in a function of tilemem/pack is a tuning value unless it is one of the
    facts above: tuning values are fields of ``SolverParams`` / ``Policy``."""
    pack = PACKAGE / "pack"
    bad = []
    for path in sorted(pack.rglob("*.py")):
        rel = path.relative_to(pack).as_posix()
        allowed = PACK_FLOATS_EVERYWHERE | PACK_FLOATS.get(rel, set())
        bad += [f"tilemem/pack/{rel}:{line}: {value}"
                for line, value in function_floats(path.read_text()) if value not in allowed]
    assert not bad, "tuning floats outside SolverParams / Policy: " + ", ".join(bad)


def test_the_allowed_floats_are_all_used():
    """An allowance no literal needs any more is taken out (else it would hide a new one)."""
    pack = PACKAGE / "pack"
    for rel, values in PACK_FLOATS.items():
        used = {v for _, v in function_floats((pack / rel).read_text())}
        assert values <= used, (rel, values - used)


@pytest.mark.parametrize("source,values", [
    ("def f(x):\n    return x * 1.6\n", [1.6]),
    ("def f(t=10.0):\n    return t\n", [10.0]),
    ("g = lambda x: x - 0.3\n", [0.3]),
    ("X = 0.5\n", []),                               # module level: the number rule's
    ("class P:\n    share: float = 0.9\n", []),      # a field: the parameter objects
    ("def f():\n    return 8 // 2, '0.5'\n", []),    # ints and strings are not floats
])
def test_the_float_rule_sees_what_it_should(source, values):
    assert [v for _, v in function_floats(source)] == values


def tuning_fields(source: str, cls: str) -> list[tuple[str, bool]]:
    """``(name, has a reason)`` of every field of class ``cls`` in ``source``: a reason is the
    ``#:`` comment just above the field (a field sharing its comment with the one before it
    counts as without)."""
    lines = source.splitlines()
    node = next(n for n in parsed(source).body if isinstance(n, ast.ClassDef) and n.name == cls)
    return [(f.target.id, lines[f.lineno - 2].strip().startswith("#:"))
            for f in node.body if isinstance(f, ast.AnnAssign)]


def test_the_packers_tuning_is_at_most_25_fields_each_with_its_reason():
    """Issue 54: every tuning value in ``Policy`` or ``SolverParams``, 25 fields at most
    together (the numbers of one job are one field), each with a one-line reason."""
    fields = (tuning_fields((PACKAGE / "pack" / "run" / "plan.py").read_text(), "Policy")
              + tuning_fields((PACKAGE / "pack" / "params.py").read_text(), "SolverParams"))
    assert 20 <= len(fields) <= 25, [n for n, _ in fields]
    assert [n for n, reason in fields if not reason] == []


def test_the_field_rule_sees_what_it_should():
    source = "class P:\n    #: why\n    a: int = 1\n    b: int = 2\n    #: why\n    c: int = 3\n"
    assert tuning_fields(source, "P") == [("a", True), ("b", False), ("c", True)]


# ---- issue 67: one surface, a layout that shows the architecture ------------------------------

#: No module of tilemem/ is longer than this: past it a module holds two things.
MAX_LINES = 600


def too_long(files: dict[Path, str], limit: int = MAX_LINES) -> list[str]:
    """``path: N lines`` of every file of ``files`` (path -> text) over ``limit`` lines."""
    return [f"{path.relative_to(PACKAGE.parent)}: {n} lines"
            for path, text in sorted(files.items()) if (n := len(text.splitlines())) > limit]


def test_no_module_is_over_600_lines():
    files = {f: f.read_text() for f in sorted(PACKAGE.rglob("*.py"))}
    assert not too_long(files), too_long(files)


def test_the_length_rule_sees_what_it_should():
    at, over = "x = 1\n" * MAX_LINES, "x = 1\n" * (MAX_LINES + 1)
    assert too_long({PACKAGE / "a.py": at, PACKAGE / "pack" / "b.py": over}) == [
        f"tilemem/pack/b.py: {MAX_LINES + 1} lines"]


def _folder(module: str, root: Path) -> str:
    """The package (folder) a module of ours is in: a package is its own folder."""
    is_package = (root.parent.joinpath(*module.split("."))).is_dir()
    return module if is_package else module.rpartition(".")[0]


def private_imports(path: Path, source: str, root: Path = PACKAGE) -> list[str]:
    """Every import in ``source`` (the file at ``path``) of a private name (``_x``, not a
    dunder) from a module of another folder: a name one folder shares with another is
    public (within a folder, its modules are one unit and may share private names)."""
    mine = module_name(path, root)
    package = mine if path.name == "__init__.py" else mine.rpartition(".")[0]
    out = []
    for node in nodes(source):
        if not isinstance(node, ast.ImportFrom):
            continue
        target = node.module or ""
        if node.level:
            base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
        if target.split(".")[0] != "tilemem":
            continue
        for a in node.names:
            if not a.name.startswith("_") or a.name.startswith("__"):
                continue
            full = f"{target}.{a.name}"
            module = full if (root.parent.joinpath(*full.split(".")).with_suffix(".py")
                              .exists()) else target
            where = _folder(module, root)
            if where != package:
                out.append(f"{path.relative_to(root.parent)}:{node.lineno}: {a.name} from "
                           f"{where} (another folder): make it public")
    return out


def test_no_private_name_is_imported_across_folders():
    bad = [p for f in sorted(PACKAGE.rglob("*.py")) for p in private_imports(f, f.read_text())]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("file,source,found", [
    # across folders: the API and the CLI reaching into the loader
    ("api/allocation.py", "def f():\n    from ..load import _map\n", ["_map from tilemem.load"]),
    ("commands/convert.py", "from tilemem.load.jsonio import _Var\n", ["_Var from tilemem.load"]),
    ("pack/quick.py", "from .search.solver import _probe\n", ["_probe from tilemem.pack.search"]),
    ("pack/run/driver.py", "from ..quick import _meets\n", ["_meets from tilemem.pack "]),
    # within a folder (a package's modules, its __init__): one unit
    ("pack/run/driver.py", "from .tasks import _warm_up\n", []),
    ("load/stream.py", "from . import _BOM\nfrom .jsonio import _Var\n", []),
    ("pack/search/kernel.py", "from .legal import _after\n", []),
    # dunders and public names are not private
    ("api/allocation.py", "from ..load import __doc__, load_report\n", []),
])
def test_the_private_import_rule_sees_what_it_should(file, source, found):
    got = private_imports(PACKAGE / file, source)
    assert len(got) == len(found) and all(f in g for f, g in zip(found, got)), got


#: Names whose values are statuses, verdicts or kinds (``tilemem.pack.kinds``,
#: ``tilemem.figures.verdicts``): they are compared with enum members, never with strings.
STATUS_WORDS = ("status", "verdict", "method", "stage", "goal", "pass", "move")


def _named(node) -> str | None:
    """The name a compared expression goes by: ``x``, ``r.status``, ``str(r.status)``,
    ``r.status.value``, ``d["verdict"]``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return _named(node.value) if node.attr in ("value", "name") else node.attr
    if isinstance(node, ast.Subscript):
        key = node.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return key.value
        return _named(node.value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and node.func.id == "str" and node.args:
        return _named(node.args[0])
    return None


def _strings(node) -> bool:
    """A string literal, or a tuple, list or set of them."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    return (isinstance(node, (ast.Tuple, ast.List, ast.Set)) and bool(node.elts)
            and all(_strings(e) for e in node.elts))


def string_comparisons(source: str) -> list[tuple[int, str]]:
    """``(line, text)`` of every ``==``, ``!=``, ``in`` or ``not in`` between a status,
    verdict or kind (a name with one of ``STATUS_WORDS`` in it) and a string literal (or a
    collection of them)."""
    found = []
    for node in nodes(source):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        for op, a, b in zip(node.ops, sides, sides[1:]):
            if not isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)):
                continue
            for x, y in ((a, b), (b, a)):
                name = _named(x)
                if name and any(w in name.lower() for w in STATUS_WORDS) and _strings(y):
                    found.append((node.lineno, ast.unparse(node)))
                    break
    return found


def test_no_status_or_verdict_is_compared_with_a_string():
    bad = [f"{f.relative_to(PACKAGE.parent)}:{line}: {text}"
           for f in sorted(PACKAGE.rglob("*.py"))
           for line, text in string_comparisons(f.read_text())]
    assert not bad, "compare enum members (SearchStatus, Status, FitVerdict, ...): " + \
        "; ".join(bad)


@pytest.mark.parametrize("source,count", [
    ('if r.status == "optimal":\n    pass\n', 1),
    ('ok = "infeasible" != res.status\n', 1),
    ('x = str(res.status) != "optimal"\n', 1),
    ('x = d.verdict_code == "reduceData"\n', 1),
    ('x = s.verdict.value == "fits"\n', 1),
    ('x = method in ("quick", "near")\n', 1),
    ('x = t["verdict"] == "fits"\n', 1),
    ('x = s.goal == "fit" and order.move != "carry"\n', 2),
    # enum members, other names, other operators
    ("x = r.status == SearchStatus.OPTIMAL\n", 0),
    ("x = method in (Pass.QUICK, Pass.NEAR)\n", 0),
    ('x = fmt == "json"\n', 0),
    ('x = r.status.startswith("opt")\n', 0),
    ('x = f"{r.status}"\n', 0),
])
def test_the_string_comparison_rule_sees_what_it_should(source, count):
    assert len(string_comparisons(source)) == count


def test_one_vars_capnp():
    """The Cap'n Proto schema is one file, in the package (a wheel carries it as a file);
    ``schemas/vars.capnp`` is a link to it, so the two cannot drift."""
    package, schemas = PACKAGE / "vars.capnp", PACKAGE.parent / "schemas" / "vars.capnp"
    assert package.is_file() and not package.is_symlink()
    assert schemas.is_symlink() and schemas.resolve() == package.resolve()


# ---- the width of the public API -----------------------------------------------------------

#: The public functions whose parameters are counted, and the most each may take: settings
#: that belong together are one value (``tilemem.api.options``; ``tilemem.api``'s conventions).
WIDEST = 8
COUNTED = ("allocate", "diagnose", "what_if")


def too_wide(functions: dict, most: int = WIDEST) -> list[str]:
    """``name: N parameters (...)`` for each function taking more than ``most``."""
    import inspect

    out = []
    for name, fn in functions.items():
        params = list(inspect.signature(fn).parameters)
        if len(params) > most:
            out.append(f"{name}: {len(params)} parameters ({', '.join(params)})")
    return out


def test_the_public_functions_take_at_most_eight_parameters():
    import tilemem

    wide = too_wide({n: getattr(tilemem, n) for n in COUNTED})
    assert not wide, "group the settings into one value: " + "; ".join(wide)


def test_the_width_rule_sees_what_it_should():
    def planted(report, tiles=None, *, method="auto", budget=None, time_limit=None, workers=None,
                seed=0, deterministic=False):   # 8: the most allowed
        pass

    def wider(report, tiles=None, *, method="auto", budget=None, time_limit=None, workers=None,
              seed=0, deterministic=False, scheduler=None):
        pass

    assert too_wide({"planted": planted}) == []
    assert too_wide({"wider": wider}) == [
        "wider: 9 parameters (report, tiles, method, budget, time_limit, workers, seed, "
        "deterministic, scheduler)"]
