"""The repository keeps its promises: the README's two commands, CI running the same test command, lint."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests import beside

ROOT = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(r"```(?:bash|sh)\n(.+?)\n```", text, flags=re.S)


def test_readme_starts_with_the_two_commands():
    """The README opens (after its title) with the install-and-run and install-and-test commands."""
    text = (ROOT / "README.md").read_text()
    first_lines = [line for line in text.splitlines() if line.strip()][:7]
    assert first_lines[0].startswith("# coevo")
    commands = readme_commands()
    assert commands[0].startswith("python3 -m venv .venv") and "coevo " in commands[0]
    assert commands[1].startswith("python3 -m venv .venv") and "pytest" in commands[1]
    assert text.index(commands[1]) < text.index("\n## ")


def test_ci_runs_exactly_the_readme_test_command():
    """.ci/run ends with the README's test command, character for character."""
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1] == readme_commands()[1]


def test_every_dependency_is_declared():
    """Third-party modules imported by the package are declared in pyproject.toml."""
    pyproject = (ROOT / "pyproject.toml").read_text()
    imported = set()
    for folder in ("arena", "agents", "curricula", "run"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, ast.Import):
                    imported.update(alias.name.split(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    imported.add(node.module.split(".")[0])
    stdlib = set(sys.stdlib_module_names) | {"coevo", "__future__", "_typeshed"}
    for module in sorted(imported - stdlib):
        assert f'"{module}' in pyproject, f"{module} is imported but not declared in pyproject.toml"


@pytest.mark.slow  # a process of its own
def test_ruff_lint_and_format_pass():
    """ruff check and ruff format --check are clean."""
    for args in (["check", "."], ["format", "--check", "."]):
        result = subprocess.run(
            [sys.executable, "-m", "ruff", *args], cwd=ROOT, capture_output=True, text=True
        )
        assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_mypy_passes():
    """The packages type-check (mypy, settings in pyproject.toml; started beside the suite, tests/beside.py)."""
    result = beside.result("mypy")
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_package_is_in_the_wheel():
    """Every folder with an __init__.py under arena/, agents/, curricula/, run/, experiments/ is listed in pyproject's packages."""
    import tomllib

    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    names = {
        "arena": "coevo.arena",
        "agents": "coevo.agents",
        "curricula": "coevo.curricula",
        "run": "coevo.run",
        "experiments": "coevo.experiments",
    }
    found = {
        ".".join([names[init.relative_to(ROOT).parts[0]], *init.relative_to(ROOT).parts[1:-1]])
        for folder in names
        for init in (ROOT / folder).rglob("__init__.py")
    }
    # a plugin package is installed under its own top-level name (package-dir maps it)
    plugins = {"coevo.run.interfaces.coevo_verifiers": "coevo_verifiers"}
    found = {plugins.get(name, name) for name in found}
    assert found - listed == set(), "add these packages to [tool.setuptools] packages"
    assert listed - found == set(), "these listed packages do not exist"


def test_the_readme_stays_at_most_200_lines():
    """The README is the front door; the rest is in docs/ (docs/testing.md, docs/arena.md, ...)."""
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines: move the detail to docs/"


def test_the_real_model_environment_is_installed_from_the_sources_pip_is_configured_with(
    tmp_path, monkeypatch
) -> None:
    """uv reads no pip.conf: the sources pip has here (CI's registry mirror, local wheels) become uv's flags; a local source that is missing is left out, as pip skips it."""
    from tests.real_model import _pip_sources

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    config = tmp_path / "pip.conf"
    config.write_text(
        "[global]\nindex-url = https://mirror.invalid/simple\n"
        f"extra-index-url = file://{tmp_path}/missing https://extra.invalid/simple\n"
        f"find-links = {wheels}\ntimeout = 5\n"
    )
    monkeypatch.setenv("PIP_CONFIG_FILE", str(config))
    flags = _pip_sources()
    pairs = set(zip(flags[::2], flags[1::2], strict=True))
    assert {
        ("--index-url", "https://mirror.invalid/simple"),
        ("--extra-index-url", "https://extra.invalid/simple"),
        ("--find-links", str(wheels)),
    } <= pairs
    assert not [value for _, value in pairs if "missing" in value or value == "5"]


def test_when_uv_and_pip_both_fail_to_install_the_error_gives_both_reasons(
    tmp_path, monkeypatch
) -> None:
    """The real-model environment's installer: pip's failure, and before it uv's, in one error (uv's was dropped)."""
    from tests.real_model import _install

    monkeypatch.setenv("PIP_CONFIG_FILE", str(tmp_path / "none.conf"))  # no index but --no-index's
    with pytest.raises(RuntimeError) as failed:
        _install(Path(sys.executable), "--no-index", "coevo-no-such-package")
    said = str(failed.value)
    assert "pip install" in said and "coevo-no-such-package" in said
    assert "uv failed first" in said or "no uv here" in said, said
