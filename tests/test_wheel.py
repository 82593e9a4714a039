"""The wheel: built from the repository's files and installed (not editable) in a fresh environment, it runs the README's tour from an empty folder.

Everything the README's tour names (the example tasks, the experiment files,
the sample database) must ship in the package: the tour's ``$ coevo ...``
lines are read out of README.md and run, after a shortened quickstart, in an
empty temporary folder with the installed ``coevo``; each must exit 0 and
print the lines the README shows (``...`` stands for anything).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ["run", "quickstart", "--set", "run.generations=2"]
"""The README's first command, by name, shortened: analyze, report and export then have a run."""

pytestmark = pytest.mark.slow


@dataclass
class Step:
    """A ``$ coevo ...`` line of the README: its arguments, its standard input, the output it shows."""

    args: list[str]
    stdin: list[str] = field(default_factory=list)
    shows: list[str] = field(default_factory=list)


def tour_steps(readme: str) -> list[Step]:
    """The ``$ coevo ...`` lines of the README's tour, in order, with the ``> `` lines after each as its input."""
    tour = readme.split("## A five-minute tour", 1)[1].split("\n## ", 1)[0]
    steps: list[Step] = []
    for block in re.findall(r"^```text\n(.*?)^```", tour, flags=re.S | re.M):
        for line in block.splitlines():
            if line.startswith("$ "):
                words = shlex.split(line[2:])
                assert words[0] == "coevo", f"the tour runs only coevo commands: {line!r}"
                steps.append(Step(words[1:]))
            elif line.startswith("> "):
                steps[-1].stdin.append(line[2:])
            elif line.strip() and line.strip() != "...":
                steps[-1].shows.append(line.strip())
    return steps


def _pattern(shown: str) -> re.Pattern[str]:
    """A line the README shows, as a pattern: ``...`` inside it stands for anything."""
    return re.compile(".*".join(re.escape(part) for part in shown.split("...")))


def assert_shows(step: Step, output: str) -> None:
    """Every line the README shows after the command appears in ``output``, in the README's order."""
    lines = iter(output.splitlines())
    for shown in step.shows:
        pattern = _pattern(shown)
        assert any(pattern.search(line) for line in lines), (
            f"`coevo {shlex.join(step.args)}` did not print {shown!r} (in the README's order):\n{output}"
        )


def _repository_files() -> list[str]:
    """The files of the repository (tracked, and new ones not ignored): what a checkout holds.

    Outside a git checkout: pyproject.toml, README.md and the package folders pyproject maps.
    """
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split("\0")
    except (OSError, subprocess.CalledProcessError):
        folders = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
        listed = ["pyproject.toml", "README.md"] + [
            str(path.relative_to(ROOT))
            for folder in folders["package-dir"].values()
            for path in (ROOT / folder).rglob("*")
            if "__pycache__" not in path.parts
        ]
    return [name for name in listed if name and (ROOT / name).is_file()]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with coevo's wheel installed (not editable); its ``bin`` folder.

    The wheel is built offline from a copy of the repository's files, so no
    ``build/`` or egg-info lands in the checkout. The environment sees the test
    environment's packages (coevo's dependencies) through a ``.pth`` line; the
    ``.pth`` files there, the editable coevo's among them, are not processed.
    """
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"
    for name in _repository_files():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, source / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [
            *pip,
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-w",
            tmp / "dist",
            source,
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = (tmp / "dist").glob("coevo-*.whl")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [*pip, "--python", python, "install", "--no-deps", "--no-index", wheel],
        check=True,
        capture_output=True,
    )
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (venv / "lib" / version / "site-packages" / "test-environment.pth").write_text(
        "".join(f"{path}\n" for path in sorted(ours))
    )
    return venv / "bin"


def _environment(bin_dir: Path) -> dict[str, str]:
    """The environment of a user of the installed package: its ``bin`` first, no repository on the path."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "VIRTUAL_ENV", "RAY_ADDRESS", "COEVO_DEBUG")
    }
    return {**env, "PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", "CI": "true"}


def test_the_installed_package_is_the_wheel_not_the_checkout(
    installed: Path, tmp_path: Path
) -> None:
    """In the new environment, coevo is imported from its own site-packages, with its data files."""
    script = (
        "import coevo.arena, coevo.experiments\n"
        "from coevo.arena.examples import bundled\n"
        "print(coevo.arena.__file__)\n"
        "for f in bundled(): print(f.path)\n"
    )
    done = subprocess.run(
        [installed / "python", "-c", script],
        cwd=tmp_path,
        env=_environment(installed),
        capture_output=True,
        text=True,
        check=True,
    )
    venv = installed.parent.resolve()
    paths = [Path(line) for line in done.stdout.splitlines()]
    assert all(p.resolve().is_relative_to(venv) for p in paths), (
        f"coevo must come from the new environment {venv}, not the checkout: {paths}"
    )
    assert all(p.is_file() for p in paths[1:]), f"a bundled file is not in the wheel: {paths}"


def test_the_readme_tour_runs_from_an_empty_folder(installed: Path, tmp_path: Path) -> None:
    """The quickstart by name, then every `$ coevo` line of the README's tour: each exits 0 and prints what the README shows."""
    env = _environment(installed)
    steps = [
        Step(QUICKSTART, shows=["game log: runs/quickstart/log"]),
        *tour_steps(ROOT.joinpath("README.md").read_text()),
    ]
    assert len(steps) > 5 and any(s.args[0] == "play" and s.stdin for s in steps), steps
    for step in steps:
        done = subprocess.run(
            [installed / "coevo", *step.args],
            input="".join(f"{line}\n" for line in step.stdin),
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        output = done.stdout + done.stderr
        assert done.returncode == 0, (
            f"`coevo {shlex.join(step.args)}` exited {done.returncode}:\n{output}"
        )
        assert_shows(step, output)
