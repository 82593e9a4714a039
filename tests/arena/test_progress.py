"""The progress bar: drawn on a terminal, silent in pipes and logs."""

from __future__ import annotations

import io

from coevo.run.driver.progress import Progress


def test_progress_draws_counts_and_ends_its_line_when_enabled() -> None:
    """An enabled bar shows done/total and ends with a newline; the final count is drawn."""
    out = io.StringIO()
    with Progress(3, "judging", stream=out, enabled=True) as bar:
        for _ in range(3):
            bar.advance()
    text = out.getvalue()
    assert "judging [" in text and "3/3" in text
    assert text.endswith("\n")


def test_progress_is_silent_when_the_stream_is_not_a_terminal() -> None:
    """By default a bar on a non-terminal stream writes nothing."""
    out = io.StringIO()
    with Progress(5, "mining", stream=out) as bar:
        bar.advance(5)
    assert out.getvalue() == ""
