"""`coevo examples` as a user runs it: the list of bundled files, and editable copies that never overwrite by accident."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from coevo.arena.examples import EXAMPLES, bundled, find_bundled
from coevo.run.cli import main


def test_examples_lists_every_bundled_file_with_its_path_and_description(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each bundled file's name, kind, description and installed path are printed; --json prints them as an array."""
    assert main(["examples"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    for f in bundled():
        row = next(i for i, line in enumerate(lines) if line.startswith(f"{f.name} "))
        path = next(i for i in range(row, len(lines)) if lines[i].strip() == str(f.path))
        assert f.kind in lines[row]
        # the description whole, wrapped over the lines down to the path
        assert f.description in " ".join(line.strip() for line in lines[row:path])
    assert main(["examples", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows == [
        {"name": f.name, "kind": f.kind, "path": str(f.path), "description": f.description}
        for f in bundled()
    ]


def test_copy_puts_an_editable_copy_in_a_folder_made_if_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--copy NAME DIR writes the file under its own name, byte for byte, making DIR; the copy runs by path."""
    folder = tmp_path / "mine" / "experiments"
    assert main(["examples", "--copy", "quickstart", str(folder)]) == 0
    copy = folder / "quickstart.toml"
    assert copy.read_bytes() == find_bundled("quickstart").path.read_bytes()
    assert f"copied quickstart to {copy}" in capsys.readouterr().err
    assert main(["examples", "--copy", "examples.jsonl", str(tmp_path)]) == 0
    assert (tmp_path / "examples.jsonl").read_bytes() == EXAMPLES.read_bytes()


def test_copy_never_overwrites_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file of the same name stays as it was (exit 2, the message says --force); --force replaces it."""
    target = tmp_path / "shop.sqlite"
    target.write_text("my own notes")
    assert main(["examples", "--copy", "shop", str(tmp_path)]) == 2
    assert "exists; pass --force to overwrite it" in capsys.readouterr().err
    assert target.read_text() == "my own notes"
    assert main(["examples", "--copy", "shop", str(tmp_path), "--force"]) == 0
    assert target.read_bytes() == find_bundled("shop").path.read_bytes()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--copy", "quickstrt", "{tmp}"], "did you mean 'quickstart'?"),
        (["--copy", "examples", "{tmp}/file"], "is not a directory"),
        (["--force"], "--force goes with --copy NAME DIR"),
    ],
    ids=["unknown name", "folder is a file", "force alone"],
)
def test_a_copy_that_cannot_be_made_exits_2_saying_why(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unknown name (with the closest), a DIR that is a file, or --force alone: exit 2 and the reason, nothing written."""
    (tmp_path / "file").write_text("")
    assert main(["examples", *(a.format(tmp=tmp_path) for a in args)]) == 2
    assert message in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]
