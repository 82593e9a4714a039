"""The documentation is executed: README.md and docs/ run as written, link to real files, and cannot drift."""

from __future__ import annotations

import re
import sys
import tempfile
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from coevo.agents.registry import REGISTRY
from coevo.arena.gamelog import markdown_table
from coevo.run.testing import check_role

from tests.factories import plugin_on_path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
TEMPLATE = ROOT / "docs" / "templates" / "role_plugin"
SOLVER_TEMPLATE = ROOT / "docs" / "templates" / "solver_plugin"

PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", flags=re.S | re.M)
FENCED = re.compile(r"^```.*?^```", flags=re.S | re.M)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
SERVER_MARK = re.compile(r"<!-- doc-server: ([\w-]+) -->\n\Z")
"""The line before a block that talks to a server: tests/test_doc_servers.py runs it against one."""
CONTINUES = "# continues the block above"
"""The first line of a ```python block that uses what the blocks before it on the page defined."""
SECTION_REFERENCE = re.compile(r"((?:docs/)?[\w-]+\.md) \(\"([^\"]+)\"\)")
"""A pointer to a page's section by its heading: ``docs/training.md ("The tiny real loop")``."""


def server_of(text: str, block: re.Match[str]) -> str | None:
    """The server a ```python block of ``text`` talks to (its ``doc-server`` mark), or None."""
    mark = SERVER_MARK.search(text, 0, block.start())
    return mark.group(1) if mark else None


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT))


def _executed(page: Path) -> object:
    """The page as a test parameter; one whose blocks start Ray (a run) is slow."""
    blocks = "".join(PYTHON_BLOCK.findall(page.read_text()))
    slow = [pytest.mark.slow] if "run_experiment(" in blocks else []
    return pytest.param(page, marks=slow, id=_name(page))


@pytest.mark.parametrize("page", [_executed(page) for page in PAGES])
def test_every_python_block_runs(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every ```python block of the page runs as written from the repository root, pasted alone into a fresh interpreter, unless its first line says it continues the block above (then after the blocks before it, in their namespace); those that talk to a server: tests/test_doc_servers.py."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # what blocks write goes to tmp_path
    monkeypatch.setattr(sys, "path", list(sys.path))  # a block may put a package on the path
    text = page.read_text()
    namespace: dict[str, object] = {}
    for block in PYTHON_BLOCK.finditer(text):
        if server_of(text, block) is not None:
            continue  # run against its server by tests/test_doc_servers.py
        if not block.group(1).startswith(CONTINUES):
            namespace = {"__name__": f"docs:{_name(page)}"}
        line = text.count("\n", 0, block.start(1))  # so a traceback gives the page's line numbers
        # dont_inherit: this module's `from __future__ import annotations` is not the reader's
        code = compile("\n" * line + block.group(1), _name(page), "exec", dont_inherit=True)
        exec(code, namespace)


def test_the_game_log_page_holds_the_tables_of_the_row_models() -> None:
    """docs/game-log.md contains markdown_table() verbatim, so it cannot drift from the row models."""
    page = (ROOT / "docs" / "game-log.md").read_text()
    assert markdown_table() in page, (
        "docs/game-log.md is out of date: paste in the output of "
        "coevo.arena.gamelog.markdown_table() under 'The tables'"
    )


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_relative_link_points_to_a_file(page: Path) -> None:
    """Every relative Markdown link of the page (outside code blocks) names a file or folder that exists."""
    text = FENCED.sub("", page.read_text())
    missing = []
    for target in LINK.findall(text):
        if "://" in target or target.startswith(("#", "mailto:")):
            continue
        path = target.split("#", 1)[0]
        if not (page.parent / path).exists():
            missing.append(target)
    assert not missing, f"{_name(page)} links to files that do not exist: {missing}"


def _headings(page: Path) -> list[str]:
    """The page's headings as they read, outside code blocks (``## `coevo train` ...`` → ``coevo train ...``)."""
    text = FENCED.sub("", page.read_text())
    return [
        line.lstrip("#").strip().replace("`", "")
        for line in text.splitlines()
        if HEADING.match(line)
    ]


def test_every_section_reference_names_a_heading_of_its_page() -> None:
    """Where an experiment file or a page points to `docs/X.md ("Section")`, X.md exists and has a heading that begins with that name."""
    sources = [*sorted((ROOT / "experiments").glob("*.toml")), *PAGES]
    wrong, seen = [], 0
    for source in sources:
        for target, section in SECTION_REFERENCE.findall(source.read_text()):
            seen += 1
            page = ROOT / target if target.startswith("docs/") else source.parent / target
            where = f'{source.relative_to(ROOT)}: {target} ("{section}")'
            if not page.is_file():
                wrong.append(f"{where}: no such page")
            elif not any(h.startswith(section.replace("`", "")) for h in _headings(page)):
                wrong.append(f"{where}: no such heading; it has {_headings(page)}")
    assert seen, "no section reference found: has SECTION_REFERENCE stopped matching?"
    assert not wrong, "\n".join(wrong)


NUMBER_WORDS = {"eight": 8, "ten": 10, "twenty": 20, "thirty": 30}
QUICKSTART_LENGTH = re.compile(
    r"\b(\d+|eight|ten|twenty|thirty)-generation quickstart|quickstart \((\d+) generations",
    flags=re.I,
)


def test_the_docs_give_the_quickstart_its_shipped_length() -> None:
    """Every "N-generation quickstart" or "quickstart (N generations" of the docs is experiments/quickstart.toml's run.generations (a figure of an older quickstart says "then")."""
    shipped = tomllib.loads((ROOT / "experiments" / "quickstart.toml").read_text())["run"]
    wrong = []
    for page in PAGES:
        for match in QUICKSTART_LENGTH.finditer(page.read_text()):
            said = match.group(1) or match.group(2)
            if int(NUMBER_WORDS.get(said.lower(), said)) != shipped["generations"]:
                wrong.append(f"{_name(page)}: {match.group(0)!r}")
    assert not wrong, f"the quickstart runs {shipped['generations']} generations: {wrong}"


@pytest.fixture
def template_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict]:
    with plugin_on_path(TEMPLATE, tmp_path, monkeypatch):
        yield tomllib.loads((TEMPLATE / "pyproject.toml").read_text())["project"]


def test_the_role_plugin_template_installs_and_conforms(template_installed: dict) -> None:
    """The template's role is found through its entry point, with its origin, and passes check_role."""
    meta = template_installed
    ((name, target),) = meta["entry-points"]["coevo.roles"].items()
    info = REGISTRY.get(name)
    assert info.origin == f"{meta['name']} {meta['version']}"
    assert f"{info.factory.__module__}:{info.factory.__qualname__}" == target
    assert info.kind == "world model" and "stateful" in info.capabilities
    assert info.description, (
        "the role's class needs a docstring (its first line is the description)"
    )
    check_role(info.create({}), name=name)


def test_the_solver_template_conforms_and_plays_a_run_swapped_in_from_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Solver template passes check_role (the broken task a failed episode), and `--set solver.name=lookup-solver` plays the quickstart with it."""
    from coevo.arena.gamelog import GameLog
    from coevo.run.cli import main

    with plugin_on_path(SOLVER_TEMPLATE, tmp_path, monkeypatch):
        meta = tomllib.loads((SOLVER_TEMPLATE / "pyproject.toml").read_text())["project"]
        ((name, _),) = meta["entry-points"]["coevo.roles"].items()
        info = REGISTRY.get(name)
        assert info.kind == "solver" and info.description
        check_role(info.create({}), name=name)
        run = tmp_path / "run"
        sets = ["solver.name=lookup-solver", "run.generations=1", "ray.in_process=true"]
        flags = [item for s in sets for item in ("--set", s)]
        assert main(["run", "quickstart", "--out", str(run), *flags]) == 0
        episodes = GameLog(str(run)).read("episodes").to_pylist()
        assert episodes and {str(e["solver"]).split("@")[0] for e in episodes} == {"lookup-solver"}
        assert all(e["steps"] >= 1 and e["failure"] is None for e in episodes), (
            "each played and submitted"
        )


BENCHMARK_COMMAND = re.compile(r"python benchmarks/(bench_\w+\.py)([^`\n]*)")
HEADING = re.compile(r"^#+ ", flags=re.M)


def _benchmark_options(script: Path) -> dict[str, tuple[object, str]]:
    """``--option`` → (its default, its help) as the script's argparse calls declare them."""
    import ast

    options: dict[str, tuple[object, str]] = {}
    for node in ast.walk(ast.parse(script.read_text())):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_argument"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            keywords = {k.arg: k.value for k in node.keywords}
            default = keywords.get("default")
            help_ = keywords.get("help")
            try:  # a default computed at run time (",".join(SETUPS)) is not known here
                value = ast.literal_eval(default) if default is not None else None
            except ValueError:
                value = None
            options[str(node.args[0].value)] = (
                value,
                help_.value if isinstance(help_, ast.Constant) else "",
            )
    return options


def test_benchmark_figures_in_the_docs_name_the_counts_the_scripts_use() -> None:
    """Where a page shows `python benchmarks/bench_X.py [--opt V]`, each option exists, and every "N tasks per level" (or any "N things per ...") the section states is the value the command runs with: the one given, else the script's default."""
    wrong = []
    for page in PAGES:
        for section in HEADING.split(page.read_text()):
            for script_name, given in BENCHMARK_COMMAND.findall(section):
                script = ROOT / "benchmarks" / script_name
                assert script.exists(), f"{_name(page)} runs {script_name}, which does not exist"
                options = _benchmark_options(script)
                values = {k: v for k, (v, _) in options.items()}
                for option, value in re.findall(r"(--[\w-]+)(?:[ =](\S+))?", given):
                    if option not in options:
                        wrong.append(f"{_name(page)}: {script_name} has no option {option}")
                    elif value:
                        values[option] = value.strip("`[]")
                for option, (_, help_) in options.items():
                    counted = re.match(r"([\w-]+ per \w+)", help_)
                    if not counted or values[option] is None:
                        continue
                    for stated in re.findall(rf"([\d,]+) {re.escape(counted.group(1))}", section):
                        if int(stated.replace(",", "")) != int(str(values[option])):
                            wrong.append(
                                f"{_name(page)}: '{stated} {counted.group(1)}' but {script_name} "
                                f"runs with {option} {values[option]}"
                            )
    assert not wrong, "\n".join(wrong)


def test_the_run_page_explains_every_column_of_the_live_table() -> None:
    """docs/arena.md has a row per column of `coevo run`'s table, with the meaning `coevo run --help` gives."""
    from coevo.run.driver.columns import COLUMNS

    page = (ROOT / "docs" / "arena.md").read_text()
    missing = [name for name, _, _, meaning in COLUMNS if f"| `{name}` | {meaning} |" not in page]
    assert not missing, f"docs/arena.md does not explain these columns as COLUMNS does: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_code_fence_closes_on_a_line_of_its_own(page: Path) -> None:
    """A fence is ``` alone (or with a language when it opens): text after a closing fence keeps the block open."""
    opened = False
    wrong = []
    for number, line in enumerate(page.read_text().splitlines(), 1):
        if line.startswith("```"):
            if opened and line.strip() != "```":
                wrong.append(number)
            opened = not opened if line.strip() == "```" or not opened else opened
    assert not wrong and not opened, f"{_name(page)}: fences that do not close at lines {wrong}"
