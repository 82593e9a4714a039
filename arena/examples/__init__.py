"""The files that ship with coevo: example tasks, experiment files and a sample database.

``examples.jsonl`` (retail, clinic, HR and payroll): :func:`example_tasks`
reads them, each with its world inline; the conformance checkers call roles
and curricula on them. The experiment files are the package
``coevo.experiments`` (the repository's ``experiments/`` folder);
``shop.sqlite`` is written by :mod:`coevo.arena.examples.shop`.
:func:`bundled` lists every one with its installed path, and
:func:`find_bundled` finds one by name (``coevo run quickstart``, ``coevo
examples --copy shop DIR``).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Final, Literal

from coevo.arena.errors import RegistryError
from coevo.arena.records import load_records
from coevo.arena.spec import TaskSpec, WorldSpec

__all__ = ["EXAMPLES", "SHOP", "Bundled", "BundledKind", "bundled", "example_tasks", "find_bundled"]

EXAMPLES: Final = Path(str(resources.files(__name__) / "examples.jsonl"))
"""The path of the bundled ``examples.jsonl``."""

SHOP: Final = Path(str(resources.files(__name__) / "shop.sqlite"))
"""The path of the bundled sample database (written by :mod:`coevo.arena.examples.shop`)."""

BundledKind = Literal["tasks", "experiment", "database"]
"""What a bundled file is: records to check and play, an experiment to run, a database to mine."""

_EXPERIMENTS_PACKAGE: Final = "coevo.experiments"


@dataclass(frozen=True)
class Bundled:
    """A file that ships with coevo.

    Attributes:
        name: what ``coevo run`` and ``coevo examples --copy`` call it (``quickstart``, ``examples``, ``shop``).
        kind: ``tasks``, ``experiment`` or ``database``.
        path: where it is installed.
        description: one line on what it holds.
    """

    name: str
    kind: BundledKind
    path: Path
    description: str


def _first_comment(path: Path) -> str:
    """An experiment file's description: the first sentence of its opening comment (which may run over lines)."""
    said: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            if said:
                break
            continue
        if said and line.startswith("#  "):  # an indented command line: the sentence is over
            break
        said.append(line.lstrip("#").strip())
    text = " ".join(said)
    end = re.search(r"\.(\s|$)", text)
    return text[: end.start() + 1] if end else text or "an experiment"


def _experiments() -> list[Bundled]:
    folder = resources.files(_EXPERIMENTS_PACKAGE)
    files = sorted(
        (Path(str(entry)) for entry in folder.iterdir() if entry.name.endswith(".toml")),
        key=lambda p: (p.stem != "quickstart", p.stem),
    )
    return [Bundled(p.stem, "experiment", p, _first_comment(p)) for p in files]


def bundled() -> list[Bundled]:
    """Every bundled file: the example tasks, the experiments (the quickstart first), the sample database."""
    return [
        Bundled(
            "examples",
            "tasks",
            EXAMPLES,
            "Three worlds (retail, clinic, HR and payroll) and four tasks: coevo check, coevo play.",
        ),
        *_experiments(),
        Bundled(
            "shop",
            "database",
            SHOP,
            "A sample SQLite shop with real-world quirks to mine: coevo mine shop.sqlite.",
        ),
    ]


def find_bundled(name: str, kind: BundledKind | None = None) -> Bundled:
    """The bundled file called ``name`` (or whose file name is ``name``, e.g. ``quickstart.toml``).

    Args:
        name: its name, as :func:`bundled` lists it, or its file name.
        kind: look only among files of this kind.

    Raises:
        RegistryError: no bundled file (of that kind) has that name; the message names the
            closest and lists them all.
    """
    files = [f for f in bundled() if kind is None or f.kind == kind]
    for file in files:
        if name in (file.name, file.path.name):
            return file
    names = [f.name for f in files]
    close = difflib.get_close_matches(Path(name).stem, names, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    what = f"bundled {kind}" if kind else "bundled file"
    raise RegistryError(
        f"no {what} is called {name!r}{hint}; the {what}s: {', '.join(names)} "
        "(`coevo examples` lists them)"
    )


def example_tasks() -> list[TaskSpec]:
    """The bundled example tasks, in file order, each with its world inline."""
    tasks, worlds = load_records(EXAMPLES)
    return [
        t if isinstance(t.world, WorldSpec) else t.model_copy(update={"world": worlds[t.world]})
        for t in tasks
    ]
