"""The house keeps its floors: the import contract holds, nothing dodges it, no module grows unread."""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests import beside

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = beside.FOLDERS
FLOORS = ["coevo.run", "coevo.curricula", "coevo.agents", "coevo.arena"]
"""The floors, top to bottom: a folder each."""
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

# Imports inside functions are for start-up speed in the command line's dispatch, for the
# registries' lazy loading of plugins, and for optional heavy dependencies (each commented).
LAZY_ALLOWED = (
    "run/cli.py",
    "run/commands/",
    "agents/registry.py",
    "curricula/registry.py",
)
MAX_LAZY_COEVO_IMPORTS = 8

# Modules allowed over 900 lines, each with the reason (none today).
LONG_MODULES: dict[str, str] = {}

# The procedural domains are declarative tables and small generators: no function there is longer
# or more tangled than this.
PROCEDURAL = ROOT / "agents" / "synthesizers" / "procedural"
MAX_FUNCTION_LINES = 80
MAX_COMPLEXITY = 20

_BRANCHES = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.ExceptHandler, ast.IfExp, ast.match_case)


def cyclomatic_complexity(function: ast.AST) -> int:
    """McCabe's number of a function: 1, plus one per decision point in its body.

    A decision point is an ``if`` or ``elif``, a ``for`` or ``while`` loop, an
    ``except`` handler, a conditional expression, a ``match`` case, a
    comprehension's ``for`` and each of its ``if`` clauses, and every operand of
    ``and``/``or`` beyond the first. Functions and lambdas nested inside count
    toward the enclosing function too.
    """
    count = 1
    for node in ast.walk(function):
        if isinstance(node, _BRANCHES):
            count += 1
        elif isinstance(node, ast.BoolOp):
            count += len(node.values) - 1
        elif isinstance(node, ast.comprehension):
            count += 1 + len(node.ifs)
    return count


def _modules() -> list[tuple[str, Path]]:
    return beside.modules(FOLDERS)


def _lint_imports(cwd: Path, env_path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = None
    if env_path is not None:
        import os

        env = {**os.environ, "PYTHONPATH": env_path}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=cwd, capture_output=True, text=True, env=env
    )


@pytest.mark.slow  # a process of its own
def test_the_import_contract_holds():
    """`lint-imports` from the repository root keeps every contract in pyproject.toml."""
    result = _lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "broken" not in result.stdout.split("Contracts:")[-1].replace("0 broken", "")


@pytest.mark.slow  # a process of its own
def test_an_upward_import_breaks_the_contract_and_names_the_modules(tmp_path):
    """A runtime module that imports a role is reported, with the importer and the imported module."""
    tree = tmp_path / "coevo"
    for folder in FOLDERS:
        shutil.copytree(ROOT / folder, tree / folder, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    with (tree / "arena" / "verifier.py").open("a") as out:
        out.write("\nfrom coevo.agents import protocols as _upward  # noqa: E402\n")
    result = _lint_imports(tmp_path, env_path=str(tmp_path))
    assert result.returncode != 0, "an upward import must break the floors contract"
    assert "coevo.arena is not allowed to import coevo.agents" in result.stdout
    assert "coevo.arena.verifier -> coevo.agents.protocols" in result.stdout


def test_the_contracts_name_packages_and_each_folder_is_a_floor():
    """The floors contract names the four top-level packages, in order; no contract lists modules."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    assert sorted(config["root_packages"]) == sorted(FLOORS)
    floors = next(c for c in config["contracts"] if c["id"] == "floors")
    assert floors["layers"] == FLOORS
    packages = {name for name, path in _modules() if path.name == "__init__.py"}
    named = []
    for contract in config["contracts"]:
        for key in ("layers", "source_modules", "forbidden_modules", "containers"):
            for entry in contract.get(key, []):
                named += [part.strip() for part in re.split(r"[|:]", entry)]
        containers = contract.get("containers", [""])
        named = [
            f"{c}.{n}" if c and not n.startswith("coevo") else n for n in named for c in containers
        ]
    assert {n for n in named if n not in packages} == set(), "contracts name packages only"


def test_the_analysis_reads_the_log_without_building_a_world_or_judging():
    """Nothing `coevo.arena.analysis` imports, directly or not, builds a world or runs the Judge."""
    import grimp

    graph = grimp.build_graph("coevo.arena", cache_dir=None)
    for target in ("coevo.arena.world", "coevo.arena.judge"):
        chains = graph.find_shortest_chains(
            importer="coevo.arena.analysis", imported=target, as_packages=True
        )
        assert not chains, f"analysis reaches {target}: {sorted(chains)}"


def test_no_entry_point_points_up_a_floor():
    """Each runtime entry point lies on the floor of the code that loads it (code worlds' runtimes: the task runtime)."""
    entry_points = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    loader_floor = {"coevo.runtimes": "coevo.arena"}
    assert set(entry_points) <= set(loader_floor), "say which floor loads each entry-point group"
    for group, points in entry_points.items():
        for name, target in points.items():
            assert target.startswith(loader_floor[group] + "."), f"{group} {name} = {target}"


def _lazy_imports(path: Path) -> list[tuple[int, str, bool]]:
    """(line, imported module, commented) for each import made inside a function."""
    lines = path.read_text().splitlines()
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for inner in ast.walk(node):
            if isinstance(inner, ast.ImportFrom) and inner.module and not inner.level:
                names = [inner.module]
            elif isinstance(inner, ast.Import):
                names = [alias.name for alias in inner.names]
            else:
                continue
            context = " ".join(lines[max(0, inner.lineno - 4) : inner.end_lineno])
            for name in names:
                out.append((inner.lineno, name, "#" in context))
    return out


def test_imports_inside_functions_are_few_and_say_why():
    """Outside the CLI and the registries, at most a handful of coevo imports sit in functions, each commented."""
    coevo_lazy = []
    for _, path in _modules():
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith(LAZY_ALLOWED):
            continue
        for line, name, commented in _lazy_imports(path):
            where = f"{relative}:{line} imports {name}"
            assert commented, f"{where} inside a function without a comment saying why"
            if name.startswith("coevo"):
                coevo_lazy.append(where)
    assert len(coevo_lazy) <= MAX_LAZY_COEVO_IMPORTS, "\n".join(coevo_lazy)


def test_no_module_is_over_900_lines_without_a_reason():
    """Modules stay readable in one sitting: over 900 lines only where LONG_MODULES says why."""
    for _, path in _modules():
        relative = path.relative_to(ROOT).as_posix()
        lines = len(path.read_text().splitlines())
        if relative in LONG_MODULES:
            continue
        assert lines <= 900, f"{relative} has {lines} lines; split it or say why in LONG_MODULES"


def test_the_complexity_count_is_mccabe_s():
    """The count adds one per branch, loop, handler, conditional, comprehension clause and extra operand."""
    source = """
def f(xs, y):
    if y and xs or not y:
        return [x for x in xs if x if y]
    elif y:
        pass
    for x in xs:
        while x:
            x = 1 if x else 0
    try:
        pass
    except ValueError:
        pass
    match y:
        case 1:
            pass
        case _:
            pass
"""
    (function,) = ast.parse(source).body
    # 1 + if, elif + 2 extra operands + comprehension for and its 2 ifs + for, while + conditional
    # + except + 2 cases
    assert cyclomatic_complexity(function) == 1 + 2 + 2 + 3 + 2 + 1 + 1 + 2


def test_procedural_functions_are_short_and_simple():
    """Every function of the procedural domains is at most 80 lines long and of complexity at most 20."""
    too_big = []
    functions = 0
    for path in sorted(PROCEDURAL.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            functions += 1
            where = f"{path.relative_to(ROOT).as_posix()}:{node.lineno} {node.name}"
            lines = node.end_lineno - node.lineno + 1
            complexity = cyclomatic_complexity(node)
            if lines > MAX_FUNCTION_LINES:
                too_big.append(f"{where} has {lines} lines (at most {MAX_FUNCTION_LINES})")
            if complexity > MAX_COMPLEXITY:
                too_big.append(f"{where} has complexity {complexity} (at most {MAX_COMPLEXITY})")
    assert functions > 100, f"only {functions} functions found under {PROCEDURAL}"
    assert not too_big, (
        "split these into smaller generators driven by tables (see the retail/ package):\n"
        + "\n".join(too_big)
    )


TRAIN_EXTRA_PACKAGE = "coevo.run.train."
"""The modules of `coevo train` that import torch, transformers or peft (the train extra)."""
TRAIN_EXTRA = {"torch", "transformers", "peft", "safetensors", "gguf"}


@pytest.fixture(scope="module")
def fresh_imports() -> dict[str, dict]:
    """Each module's import in a child with no coevo module loaded (started beside the suite: tests/beside.py)."""
    done = beside.result("imports")
    assert done.returncode == 0, done.stderr[-2000:]
    return {r["name"]: r for r in map(json.loads, done.stdout.splitlines())}


@pytest.mark.slow
@pytest.mark.parametrize("name", [name for name, _ in _modules()])
def test_every_module_imports_on_its_own(name, fresh_imports):
    """Each module imports with no other coevo module loaded before it (no order-dependent cycle); `coevo train`'s need the train extra, and say so."""
    result = fresh_imports[name]
    if result["status"] != 0 and name.startswith(TRAIN_EXTRA_PACKAGE):
        # no torch here: such a module may fail only for a package of the train extra
        missing = re.search(r"No module named '([^'.]+)", result["error"] or "")
        assert importlib.util.find_spec("torch") is None, result["error"]
        assert missing and missing.group(1) in TRAIN_EXTRA, result["error"]
        return
    assert result["status"] == 0, result["error"]


_LOADED = """
import sys
{imports}
print("loaded:", ",".join(sorted(m for m in {heavy!r} if m in sys.modules)))
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    "imports",
    [
        "import coevo.run.actors.hosts",
        "import coevo.run.loop",
        "from coevo.run.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass",
    ],
    ids=["hosts", "loop", "coevo --help"],
)
def test_the_run_starts_without_pandas_or_the_llm_sdks(imports):
    """What every actor imports (hosts), the loop and `coevo --help` load no pandas, no LLM SDK, no HTTP client."""
    heavy = ("pandas", "anthropic", "openai", "aiohttp", "httpx2", "torch", "matplotlib")
    code = _LOADED.format(imports=imports, heavy=heavy)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == "loaded: ", done.stdout[-500:]
