"""The HTML report: valid, self-contained, every figure present; rendered by headless Chromium when there is one."""

from __future__ import annotations

import base64
import math
import shutil
import subprocess
from html.parser import HTMLParser

import pytest
from coevo.arena.analysis import analyze, load_run
from coevo.arena.analysis.report import FIGURES, _mastered_figure, render_report

from tests.curricula.test_analysis import (
    OLD_LOG,
    run,  # noqa: F401  (the module's real run, reused)
)


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.open: list[str] = []
        self.images: dict[str, str] = {}
        self.links: list[str] = []
        self.problems: list[str] = []

    def handle_starttag(self, tag, attrs) -> None:
        attributes = dict(attrs)
        if tag not in ("img", "meta", "br"):
            self.open.append(tag)
        for key in ("src", "href"):
            value = attributes.get(key)
            if value is not None and not value.startswith(("data:", "#")):
                self.links.append(value)
        if tag == "img":
            self.images[attributes.get("id", "")] = attributes.get("src", "")
        if tag in ("script", "link", "iframe"):
            self.problems.append(tag)

    def handle_endtag(self, tag) -> None:
        if not self.open or self.open[-1] != tag:
            self.problems.append(f"unbalanced </{tag}>")
        else:
            self.open.pop()


def test_the_report_is_valid_self_contained_html_with_every_figure(run, tmp_path) -> None:  # noqa: F811
    """Balanced tags, no script or external resource, one PNG per figure (two runs side by side)."""
    out = tmp_path / "report.html"
    figures = render_report([run.run_dir, run.run_dir], str(out))
    assert list(figures) == [key for key, _ in FIGURES]
    assert all(png.startswith(b"\x89PNG\r\n") for png in figures.values())
    text = out.read_text()
    assert text.startswith("<!DOCTYPE html>")
    page = _Page()
    page.feed(text)
    page.close()
    assert not page.problems and not page.open, page.problems
    assert not page.links, f"external resources: {page.links}"
    for key, _ in FIGURES:
        src = page.images[f"figure-{key}"]
        assert src.startswith("data:image/png;base64,")
        png = base64.b64decode(src.split(",", 1)[1])
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 2000


def _figures_in(text: str) -> dict[str, bytes]:
    page = _Page()
    page.feed(text)
    page.close()
    return {
        key[len("figure-") :]: base64.b64decode(src.split(",", 1)[1])
        for key, src in page.images.items()
    }


def test_the_report_shows_the_proposal_distribution_and_the_pool_diversity(run, tmp_path) -> None:  # noqa: F811
    """Both figures are in the report, titled, as PNGs, beside an older log that recorded no proposals."""
    out = tmp_path / "report.html"
    render_report([run.run_dir, OLD_LOG], str(out))
    text = out.read_text()
    titles = dict(FIGURES)
    for key in ("proposals", "diversity"):
        assert f'<h2 id="{key}">{titles[key]}</h2>' in text
    assert "Proposal distribution by generation" in text
    assert "Pool diversity and proposer reward by generation" in text
    images = _figures_in(text)
    for key in ("proposals", "diversity"):
        assert images[key][:8] == b"\x89PNG\r\n\x1a\n" and len(images[key]) > 2000


def test_an_older_log_alone_still_renders(tmp_path) -> None:
    """A log from before the proposals table renders every figure (its panels say no proposals were recorded)."""
    figures = render_report([OLD_LOG], str(tmp_path / "report.html"))
    assert list(figures) == [key for key, _ in FIGURES]
    assert all(png[:8] == b"\x89PNG\r\n\x1a\n" for png in figures.values())


def test_runs_of_a_setup_are_drawn_as_their_mean_with_an_interval_and_each_figure_is_written(
    run,  # noqa: F811
    tmp_path,
) -> None:
    """--group synthesizer.name puts two runs in one setup: each generation's eval is their mean, its interval a bootstrap over them; the CSV holds what analyze computes; a PNG per figure."""
    import csv

    from coevo.arena.analysis.paired import paired_bootstrap

    runs = [OLD_LOG, run.run_dir]
    figures = render_report(
        runs,
        str(tmp_path / "report.html"),
        group="synthesizer.name",
        csv_dir=str(tmp_path / "csv"),
        png_dir=str(tmp_path / "png"),
    )
    for key, png in figures.items():
        assert (tmp_path / "png" / f"{key}.png").read_bytes() == png
    with (tmp_path / "csv" / "success.csv").open() as handle:
        rows = [r for r in csv.DictReader(handle) if r["curve"] == "eval"]
    assert {r["setup"] for r in rows} == {"synthesizer.name=procedural (2 seeds)"}
    per_run = [
        {r["gen"]: r["success"] for r in analyze(load_run(d), irt=False)["success"]["eval"]}
        for d in runs
    ]
    assert [int(r["gen"]) for r in rows] == sorted(set(per_run[0]) | set(per_run[1]))
    for row in rows:
        values = [s[int(row["gen"])] for s in per_run if int(row["gen"]) in s]
        mean, low, high = paired_bootstrap(values, n=10_000, seed=0)
        assert int(row["runs"]) == len(values)
        assert [float(row[k]) for k in ("success", "low", "high")] == pytest.approx(
            [mean, low, high]
        )
    assert any(int(r["runs"]) == 2 and float(r["low"]) < float(r["high"]) for r in rows), (
        "no generation where the two runs differ: the interval is not shown"
    )
    with (tmp_path / "csv" / "levels.csv").open() as handle:
        levels = list(csv.DictReader(handle))
    assert levels and {"level", "gen", "success", "low", "high"} <= set(levels[0])
    text = (tmp_path / "report.html").read_text()
    assert "quickstart seed 0" in text and "seed 11" in text, "runs are labelled by name and seed"


def test_a_figure_file_that_is_a_link_is_refused_and_what_it_points_to_is_left_alone(
    run,  # noqa: F811
    tmp_path,
) -> None:
    """`coevo report --csv DIR` with DIR/success.csv a link to another file: exit 2 naming the link; the file it points to unchanged."""
    from tests.factories import run_cli

    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "success.csv").symlink_to(victim)
    done = run_cli(
        "report", run.run_dir, "--out", str(tmp_path / "r.html"), "--csv", str(tmp_path / "figures")
    )
    assert done.returncode == 2, done.stderr
    assert "success.csv is a symbolic link" in done.stderr
    assert victim.read_text() == "keep me"


def test_a_group_key_the_runs_lack_is_refused_naming_it(run, tmp_path) -> None:  # noqa: F811
    """--group with a key no experiment has is an error naming the key and the run."""
    from coevo.arena.errors import CoevoError

    with pytest.raises(CoevoError, match=r"--group curriculum\.nope: .* has no such key"):
        render_report([run.run_dir], str(tmp_path / "r.html"), group="curriculum.nope")


def test_a_generation_with_no_level_mastered_is_a_gap_not_level_0(run) -> None:  # noqa: F811
    """The report's mastered line has analyze's value at each generation, and no point (NaN) where analyze has none ("–"), never 0."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    seen = []
    for run_dir in (OLD_LOG, run.run_dir):
        metrics = analyze(load_run(run_dir), irt=False)
        metrics["legend"] = run_dir
        fig = _mastered_figure(plt, [metrics])
        try:
            mastered = fig.axes[0].get_lines()[0]
            drawn = [None if math.isnan(v) else float(v) for v in mastered.get_ydata()]
        finally:
            plt.close(fig)
        expected = [r["mastered"] for r in metrics["mastered"]]
        assert drawn == expected, f"{run_dir}: drawn {drawn}, analyze says {expected}"
        seen += expected
    assert None in seen, "no generation without a level mastered: the test shows nothing"


CHROMIUM = next(
    (c for c in ("chromium", "chromium-browser", "google-chrome") if shutil.which(c)), None
)


@pytest.mark.skipif(
    CHROMIUM is None, reason="no headless Chromium on this machine (apt install chromium)"
)
def test_chromium_renders_the_report(run, tmp_path) -> None:  # noqa: F811
    """Headless Chromium opens the report offline and renders it to a non-trivial PNG."""
    out = tmp_path / "report.html"
    render_report([run.run_dir], str(out))
    shot = tmp_path / "report.png"
    subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            f"--screenshot={shot}",
            "--window-size=1280,4000",
            out.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    assert shot.stat().st_size > 20_000
