"""The docs' blocks that talk to a server (MCP, OpenEnv, verifiers) run as written against a real server.

A block is marked by the line ``<!-- doc-server: NAME -->`` before it;
:data:`SERVERS` says how each NAME's server starts (the command the page
shows, on a free port). Blocks run in a folder holding ``examples.jsonl``
(``coevo examples --copy examples .``, as the pages say), with ``coevo`` on
``PATH``. The only change made to a block is the port of its server's URL
(the page's 8000 or 8765 becomes the port the test's server listens on).
A shell block runs its ``vf-eval`` command (its ``pip install`` line is what
this environment already did), against the loopback OpenAI-compatible fake
in place of the model server.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agents.fake_openai import ExplorerPolicy, FakeOpenAI
from tests.factories import run_cli
from tests.test_docs import PAGES, PYTHON_BLOCK, ROOT, SERVER_MARK, server_of

BIN = Path(sys.executable).parent
"""Where this environment's ``coevo`` and ``python`` are."""

SERVERS: dict[str, list[str] | None] = {
    "mcp-stdio": None,  # the block starts `coevo serve` itself
    "mcp-http": [
        str(BIN / "coevo"),
        *("serve", "examples.jsonl", "--task", "1", "--transport", "http", "--port", "0"),
    ],
    "openenv": [
        sys.executable,
        *("-m", "coevo.run.interfaces.openenv_server", "examples.jsonl", "--port", "0"),
    ],
}
"""Each marked ```python block's server: the command that starts it (None: the block starts its own)."""

SHELL_BLOCKS = ("verifiers",)
"""Marked shell blocks: each has a test of its own below."""

URL = re.compile(r"http://(?:127\.0\.0\.1|localhost):(\d+)")
MARKED = re.compile(r"^```(\w+)\n(.*?)^```", flags=re.S | re.M)
TALKS_TO_A_SERVER = re.compile(r"127\.0\.0\.1|localhost|StdioServerParameters|base_url=[\"']")
"""What a block that talks to a server outside itself shows (one that starts its own, as
docs/llm-backends.md's FakeOpenAI block, runs in tests/test_docs.py)."""


def _blocks() -> dict[str, tuple[str, int, str]]:
    """NAME → (page, line of the block, its code) for every marked block of the docs (any language)."""
    found: dict[str, tuple[str, int, str]] = {}
    for page in PAGES:
        text = page.read_text()
        for block in MARKED.finditer(text):
            mark = SERVER_MARK.search(text, 0, block.start())
            if mark is not None:
                name = mark.group(1)
                assert name not in found, f"two blocks are marked doc-server: {name}"
                line = text.count("\n", 0, block.start(2))
                found[name] = (str(page.relative_to(ROOT)), line, block.group(2))
    return found


def test_every_block_that_talks_to_a_server_is_marked_and_every_mark_has_a_server() -> None:
    """A ```python block naming a server address or a stdio server is marked, and each mark is one this file starts."""
    unmarked = []
    for page in PAGES:
        text = page.read_text()
        for block in PYTHON_BLOCK.finditer(text):
            if server_of(text, block) is None and TALKS_TO_A_SERVER.search(block.group(1)):
                unmarked.append(f"{page.relative_to(ROOT)}:{text.count(chr(10), 0, block.start())}")
    assert not unmarked, f"blocks that talk to a server without a doc-server mark: {unmarked}"
    assert sorted(_blocks()) == sorted([*SERVERS, *SHELL_BLOCKS])


@pytest.fixture
def examples_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with ``examples.jsonl`` as ``coevo examples --copy`` writes it, the working directory."""
    copied = run_cli("examples", "--copy", "examples", ".", cwd=tmp_path)
    assert copied.returncode == 0, copied.stderr
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    return tmp_path


@pytest.fixture
def server(request: pytest.FixtureRequest, examples_folder: Path) -> Iterator[int | None]:
    """The marked block's server, started as its page says on a free port; yields the port (None: no server)."""
    command = SERVERS[request.param]
    if command is None:
        yield None
        return
    process = subprocess.Popen(
        command, cwd=examples_folder, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
    )
    try:
        assert process.stderr is not None
        said = []
        for line in process.stderr:  # until it says where it listens (or ends)
            said.append(line)
            if found := URL.search(line):
                break
        else:
            pytest.fail(f"{command} ended before it listened:\n{''.join(said)}")
        drain = threading.Thread(
            target=process.stderr.read, daemon=True
        )  # a full pipe would stall it
        drain.start()
        yield int(found.group(1))
    finally:
        process.terminate()
        process.wait(timeout=60)


@pytest.mark.slow
@pytest.mark.parametrize("server", sorted(SERVERS), indirect=True)
def test_a_block_that_talks_to_a_server_runs_as_written(server: int | None, request) -> None:
    """The marked block runs unchanged but for its server's port, against a real `coevo serve` / OpenEnv server."""
    name = request.node.callspec.params["server"]
    page, line, code = _blocks()[name]
    if server is not None:
        code, count = URL.subn(f"http://127.0.0.1:{server}", code)
        assert count == 1, f"{page}: the {name} block should name its server's URL once"
    exec(compile("\n" * line + code, page, "exec"), {"__name__": f"docs:{page}"})


def _command(code: str, program: str) -> list[str]:
    """The shell block's command that starts with ``program``, its continued lines joined, as argv."""
    start = code.index(f"\n{program} ") + 1
    lines = []
    for line in code[start:].splitlines():
        lines.append(line.removesuffix("\\"))
        if not line.endswith("\\"):
            break
    return shlex.split(" ".join(lines), comments=True)


@pytest.mark.slow
def test_the_vf_eval_command_runs_as_written_and_fills_the_runs_inbox(
    examples_folder: Path, finished_small_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/verifiers.md's `vf-eval coevo-verifiers ...` plays runs/quickstart's pool against a model server and sends the rollouts to its inbox."""
    page, _, code = _blocks()["verifiers"]
    run = examples_folder / "runs" / "quickstart"
    shutil.copytree(finished_small_run, run)
    argv = _command(code, "vf-eval")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-test-key")
    monkeypatch.setenv("HOME", str(examples_folder))
    model = argv[argv.index("--model") + 1]
    with FakeOpenAI(ExplorerPolicy(2), models=[model]) as server:
        port = server.url.rsplit(":", 1)[1].split("/")[0]
        argv = [URL.sub(lambda m: m.group(0).replace(m.group(1), port), a) for a in argv]
        done = subprocess.run(
            argv, cwd=examples_folder, capture_output=True, text=True, timeout=600
        )
        asked = len(server.requests)
    assert done.returncode == 0, f"{page}: {done.stderr[-3000:]}"
    assert asked > 0, "vf-eval never asked the model server"
    assert list((run / "inbox").glob("*.parquet")), "no rollout reached the run's inbox"
