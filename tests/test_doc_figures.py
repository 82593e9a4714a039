"""Figures the docs quote from the quickstart are the quickstart's: one run, every quoted figure checked against it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from coevo.arena.gamelog import GameLog

from tests import beside
from tests.factories import run_cli

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()

pytestmark = pytest.mark.slow  # a 20-generation run (about 50 s on two cores)


@pytest.fixture(scope="module")
def quickstart() -> tuple[Path, str]:
    """`coevo run quickstart` as the README's first command runs it (roles in this process: the same log), started beside the suite (tests/beside.py); its run directory and what it printed."""
    done = beside.result("quickstart")
    assert done.returncode == 0, done.stderr[-2000:]
    return beside.QUICKSTART_OUT, done.stderr


def _without_timing(line: str) -> str:
    """A table row without its last two columns (episodes per second and seconds vary)."""
    return " ".join(line.split()[:-2])


def test_the_readme_shows_the_quickstart_s_table_and_summary(quickstart) -> None:
    """The README's rows (timing aside) and its summary lines are what the quickstart prints."""
    run_dir, printed = quickstart
    shown = re.search(r"^```text\nstarting Ray.*?\n(gen .*?)^```", README, flags=re.S | re.M)
    assert shown, "README.md: the quickstart's output block"
    table, _, summary = shown.group(1).partition("\n\n")
    rows = {  # the table's rows: ten cells, the first the generation
        line.split()[0]: line
        for line in printed.splitlines()
        if re.fullmatch(r"\s*\d+(\s+\S+){9}\s*", line)
    }
    for line in table.splitlines()[1:]:
        assert _without_timing(line) == _without_timing(rows[line.split()[0]]), line
    printed_summary = printed.replace(str(run_dir), "runs/quickstart")
    for line in summary.strip().splitlines():
        assert line in printed_summary, line


def test_analysis_and_self_play_quote_the_quickstart_s_counts(quickstart, tmp_path) -> None:
    """docs/analysis.md's exported task count and size per task, and docs/self-play.md's proposal count, are the quickstart's."""
    run_dir, _ = quickstart
    done = run_cli("export", str(run_dir), "--out", str(tmp_path / "export"))
    assert done.returncode == 0, done.stderr
    exported = json.loads((tmp_path / "export" / "export.json").read_text())["tasks"]["rows"]
    analysis = (ROOT / "docs" / "analysis.md").read_text()
    assert f"The quickstart's {exported:,} tasks" in analysis
    each = re.search(r"; (\S+ \S?B) a task$", (done.stdout + done.stderr).strip(), flags=re.M)
    assert each, f"export's last line names the size a task: {done.stdout + done.stderr}"
    assert f"instead of {each.group(1)}," in analysis, (
        f"docs/analysis.md: the quickstart's export is {each.group(1)} a task"
    )
    proposals = GameLog(str(run_dir)).read("proposals").to_pylist()
    flaky = sum(bool(p["flaky"]) for p in proposals)
    self_play = (ROOT / "docs" / "self-play.md").read_text()
    assert f"**{flaky} times** in the {len(proposals):,} proposals" in self_play
