"""``coevo import tau2`` and ``coevo audit``: a τ² domain as code tasks, replayed in sandboxed workers.

On a runnable τ²-format checkout the test builds (``tau2_runnable.py``), and
on the real benchmark when ``COEVO_TAU2_CHECKOUT`` names a checkout, with an independent replay of the benchmark's own
database check to compare the counts with.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from coevo.arena.codeworld import CodeWorlds
from coevo.arena.tau2 import read_domain
from coevo.arena.tau2_import import audit, import_domain, static_findings

from tests.arena.tau2_runnable import build_runnable_checkout
from tests.factories import run_cli

REAL = Path(
    os.environ.get("COEVO_TAU2_CHECKOUT", "/nonexistent/tau2-bench")
)  # minutes per domain: opt in


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    return build_runnable_checkout(tmp_path_factory.mktemp("tau2"))


def _coevo(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``coevo *args`` run from ``cwd``, in this process."""
    return run_cli(*args, cwd=cwd)


def test_import_writes_every_task_as_records_that_read_back(checkout, tmp_path) -> None:
    out = tmp_path / "kiosk.jsonl"
    done = _coevo(
        "import", "tau2", str(checkout), "--domain", "kiosk", "--out", str(out), cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert "kiosk: 6 of 6 tasks imported over 1 world(s)" in done.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["format"] for r in records] == ["coevo.codeworld/1"] + ["coevo.codetask/1"] * 6
    world, first = records[0], records[1]
    assert world["runtime"] == "tau2" and world["system"].startswith("# Kiosk policy")
    assert {t["name"]: t["effect"] for t in world["tools"]} == {
        "get_order": "read",
        "cancel_order": "write",
        "refund": "write",
        "add_items": "write",
    }
    assert first["world"] == world["id"] and first["provenance"]["task"] == "0"
    assert first["solution"] == [
        {"tool": "get_order", "arguments": {"order_id": "#K1"}},
        {"tool": "cancel_order", "arguments": {"order_id": "#K1"}},
    ]
    assert (
        "scenario 0" in first["instruction"]
        and first["user_scenario"]["instructions"]["known_info"] == "You are Ana."
    )
    assert records[3]["verifier"]["communicate"] == ["cake"]


def test_a_missing_domain_says_what_to_pass(checkout, tmp_path) -> None:
    done = _coevo(
        "import",
        "tau2",
        str(checkout),
        "--domain",
        "shop",
        "--out",
        str(tmp_path / "x.jsonl"),
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert "no domain 'shop'" in done.stderr and "its domains are ['kiosk']" in done.stderr
    elsewhere = _coevo(
        "import", "tau2", str(tmp_path), "--domain", "kiosk", "--out", "x.jsonl", cwd=tmp_path
    )
    assert elsewhere.returncode == 2 and "checkout" in elsewhere.stderr, elsewhere.stderr


def _benchmark_db_replay(root: Path, domain: str) -> dict[str, bool]:
    """The benchmark's own database check for a do-nothing trajectory, replayed independently of coevo's.

    For each task: the domain's toolkit over its database, the gold agent
    actions applied in order, a failing one skipped (as τ²'s evaluator
    does), and the SHA-256 of the database's canonical JSON compared with
    the untouched database's.
    """
    sys.path.insert(0, str(root / "src"))
    saved = {k: v for k, v in sys.modules.items() if k == "tau2" or k.startswith("tau2.")}
    try:
        import types

        package = types.ModuleType("tau2")
        package.__path__ = [str(root / "src" / "tau2")]
        sys.modules["tau2"] = package
        tools = importlib.import_module(f"tau2.domains.{domain}.tools")
        model = importlib.import_module(f"tau2.domains.{domain}.data_model")
        db_path = root / "data" / "tau2" / "domains" / domain / "db.json"
        db_class = next(
            v
            for v in vars(model).values()
            if isinstance(v, type)
            and v.__module__ == model.__name__
            and any(b.__name__ == "DB" for b in v.__mro__[1:])
        )
        toolkit = next(
            v
            for v in vars(tools).values()
            if isinstance(v, type)
            and v.__module__ == tools.__name__
            and not v.__name__.endswith("UserTools")
            and any(b.__name__ == "ToolKitBase" for b in v.__mro__[1:])
        )

        def digest(db: Any) -> str:
            return hashlib.sha256(
                json.dumps(db.model_dump(mode="json"), sort_keys=True).encode()
            ).hexdigest()

        initial = digest(db_class.model_validate(json.loads(db_path.read_text())))
        out = {}
        for task in json.loads(
            (root / "data" / "tau2" / "domains" / domain / "tasks.json").read_text()
        ):
            kit = toolkit(db_class.model_validate(json.loads(db_path.read_text())))
            for action in (task.get("evaluation_criteria") or {}).get("actions") or []:
                if action.get("requestor", "assistant") != "assistant":
                    continue
                with contextlib.suppress(
                    Exception
                ):  # τ²'s evaluator skips a gold action that raises
                    kit.use_tool(action["name"], **action["arguments"])
            out[task["id"]] = digest(kit.db) == initial
        return out
    finally:
        sys.path.remove(str(root / "src"))
        for key in [k for k in sys.modules if k == "tau2" or k.startswith("tau2.")]:
            del sys.modules[key]
        sys.modules.update(saved)


def test_audit_by_replay_matches_the_benchmarks_own_check_and_differs_from_static(checkout) -> None:
    domain = read_domain(checkout, "kiosk")
    imported = import_domain(domain)
    with CodeWorlds(paths=[str(checkout / "src")], seconds=30) as worlds:
        replayed = {a.task.provenance["task"]: a for a in audit(imported.tasks, worlds)}
    static = {
        a.task.provenance["task"]: a for a in audit(imported.tasks, None, static_findings(domain))
    }
    expected = _benchmark_db_replay(checkout, "kiosk")
    assert {k: a.noop_passes_db_check for k, a in replayed.items()} == expected
    assert expected == {"0": False, "1": True, "2": True, "3": True, "4": True, "5": False}
    assert static["3"].noop_passes_db_check is False  # statically the refund is a write
    assert {k: a.noop_passes_reward for k, a in replayed.items()} == {
        "0": False,
        "1": True,
        "2": False,  # it must say "cake"
        "3": True,
        "4": None,  # an LLM judge decides
        "5": False,
    }
    assert replayed["3"].verdict.checks["oracle"].passed is False
    assert "Refunds above 50 need a manager" in replayed["3"].verdict.checks["oracle"].reason
    assert replayed["5"].verdict.checks["partial"].passed is False
    assert (
        replayed["0"].verdict.accepted
        and replayed["0"].basis == "replay"
        and static["0"].basis == "static"
    )
    # two workers replay side by side (each its own lock) and find the same, in the same order
    with CodeWorlds(paths=[str(checkout / "src")], seconds=30, workers=2) as worlds:
        both = audit(imported.tasks, worlds)
    assert [a.row() for a in both] == [a.row() for a in replayed.values()]


def test_audit_json_prints_one_task_object_per_line_and_the_summary_on_stderr(
    checkout, tmp_path
) -> None:
    out = tmp_path / "kiosk.jsonl"
    assert (
        _coevo(
            "import", "tau2", str(checkout), "--domain", "kiosk", "--out", str(out), cwd=tmp_path
        ).returncode
        == 0
    )
    done = _coevo("audit", str(out), "--json", "--code", str(checkout / "src"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["id"] for r in rows] == ["0", "1", "2", "3", "4", "5"]
    assert all(
        r["kind"] == "task" and r["basis"] == "replay" and r["domain"] == "kiosk" for r in rows
    )
    assert [r["noop_passes_db_check"] for r in rows] == [False, True, True, True, True, False]
    assert [r["noop_passes_reward"] for r in rows] == [False, True, False, True, None, False]
    assert set(rows[0]["checks"]) == {
        "valid",
        "oracle",
        "noop",
        "unsolved",
        "partial",
        "determinism",
    }
    assert "kiosk" in done.stderr and "task 3: oracle:" in done.stderr
    static = _coevo("audit", str(out), "--json", cwd=tmp_path)  # no code: the static basis
    rows = [json.loads(line) for line in static.stdout.splitlines()]
    assert {r["basis"] for r in rows} == {"static"} and rows[3]["noop_passes_db_check"] is False
    assert (
        rows[0]["checks"]["valid"]["passed"] is True
        and rows[0]["checks"]["oracle"]["passed"] is None
    )


@pytest.mark.slow
@pytest.mark.skipif(
    not (REAL / "data" / "tau2" / "domains" / "airline" / "db.json").exists(),
    reason="no τ²-bench checkout: set COEVO_TAU2_CHECKOUT to one (with airline's db.json and the code's "
    "small dependencies installed, docs/benchmarks-import.md) to audit the real domains",
)
@pytest.mark.parametrize("name", ["airline", "retail"])
def test_the_real_domains_import_and_audit_like_the_benchmarks_own_check(name, tmp_path) -> None:
    """Every task imports and is valid; the do-nothing counts by replay equal the independent replay's."""
    domain = read_domain(REAL, name)
    imported = import_domain(domain)
    assert len(imported.tasks) == len(domain.tasks) and not imported.skipped
    with CodeWorlds(paths=[str(REAL / "src")], seconds=120) as worlds:
        audits = audit(imported.tasks, worlds)
    assert all(a.verdict.checks["valid"].passed for a in audits)
    expected = _benchmark_db_replay(REAL, name)
    assert {a.task.provenance["task"]: a.noop_passes_db_check for a in audits} == expected
    complete = [a for a in audits if not a.task.provenance["user_actions"]]
    failing = {
        a.task.provenance["task"] for a in complete if a.verdict.checks["oracle"].passed is False
    }
    print(name, "noop DB passes", sum(expected.values()), "gold fails", sorted(failing))


def test_audit_without_the_domains_code_says_so_and_audits_statically(checkout, tmp_path) -> None:
    out = tmp_path / "kiosk.jsonl"
    assert (
        _coevo(
            "import", "tau2", str(checkout), "--domain", "kiosk", "--out", str(out), cwd=tmp_path
        ).returncode
        == 0
    )
    empty = tmp_path / "no-code"
    empty.mkdir()
    done = _coevo("audit", str(out), "--json", "--code", str(empty), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "the domain's code could not run" in done.stderr and "auditing statically" in done.stderr
    assert "ModuleNotFoundError" in done.stderr
    assert {json.loads(line)["basis"] for line in done.stdout.splitlines()} == {"static"}


# ---- what the import reads: files inside the checkout, bounded --------------------------------


def _copy(checkout: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "checkout"
    shutil.copytree(checkout, copy, symlinks=True)
    return copy


@pytest.mark.parametrize("name", ["policy.md", "db.json", "tasks.json"])
def test_a_domain_file_that_links_out_of_the_checkout_is_refused(checkout, tmp_path, name) -> None:
    """`ln -sf /some/secret.txt CK/.../policy.md` (or db.json, tasks.json): the import refuses, naming the file that points out; the secret reaches no record."""
    copy = _copy(checkout, tmp_path)
    data = copy / "data" / "tau2" / "domains" / "kiosk"
    secret = tmp_path / "secret.txt"
    secret.write_text((data / name).read_text().replace("Kiosk policy", "SECRET-CANARY") + "\n")
    (data / name).unlink()
    (data / name).symlink_to(secret)
    out = tmp_path / "o.jsonl"
    done = _coevo("import", "tau2", str(copy), "--domain", "kiosk", "--out", str(out), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert f"{data / name} points out of the checkout (to {secret})" in done.stderr
    assert "Traceback" not in done.stderr and not out.exists()


def test_a_link_inside_the_checkout_is_followed(checkout, tmp_path) -> None:
    """A domain file that is a link to another file of the checkout is read (checkouts may share files)."""
    copy = _copy(checkout, tmp_path)
    data = copy / "data" / "tau2" / "domains" / "kiosk"
    (data / "policy.md").rename(copy / "shared-policy.md")
    (data / "policy.md").symlink_to(copy / "shared-policy.md")
    out = tmp_path / "o.jsonl"
    done = _coevo("import", "tau2", str(copy), "--domain", "kiosk", "--out", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text().splitlines()[0])["system"].startswith("# Kiosk policy")


def test_a_domain_file_that_is_a_device_or_a_fifo_is_refused_at_once(checkout, tmp_path) -> None:
    """policy.md a FIFO (no writer) or db.json a device: refused without waiting or reading, naming the file."""
    copy = _copy(checkout, tmp_path)
    data = copy / "data" / "tau2" / "domains" / "kiosk"
    (data / "policy.md").unlink()
    os.mkfifo(data / "policy.md")
    done = _coevo(
        "import", "tau2", str(copy), "--domain", "kiosk", "--out", "o.jsonl", cwd=tmp_path
    )
    assert done.returncode == 2
    assert f"{data / 'policy.md'} is a FIFO, not a regular file" in done.stderr


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("tasks.json", "[" * 200_000 + "]" * 200_000),
        ("db.json", '{"orders": ' + "[" * 200_000 + "]" * 200_000 + "}"),
        ("db.toml", "x = " + "[" * 5_000 + "]" * 5_000 + "\n"),
        (
            "db.json",
            '{"orders": ' + "[" * 500 + "]" * 500 + "}",
        ),  # parses, but past the depth limit
    ],
)
def test_a_domain_file_nested_too_deep_is_named_not_a_recursion_error(
    checkout, tmp_path, name, content
) -> None:
    """tasks.json or db.json nested 200,000 deep, db.toml 5,000 deep, or any past the depth limit: exit 2 naming the file, no traceback."""
    copy = _copy(checkout, tmp_path)
    data = copy / "data" / "tau2" / "domains" / "kiosk"
    if name == "db.toml":
        (data / "db.json").unlink()
    (data / name).write_text(content)
    done = _coevo(
        "import", "tau2", str(copy), "--domain", "kiosk", "--out", "o.jsonl", cwd=tmp_path
    )
    assert done.returncode == 2, done.stderr
    assert f"{data / name} is nested" in done.stderr and "Traceback" not in done.stderr


def test_import_refuses_to_write_over_its_own_input(checkout, tmp_path) -> None:
    """`--out` naming a file of the domain's folders (its tasks.json, say) is refused; the input is untouched."""
    copy = _copy(checkout, tmp_path)
    tasks = copy / "data" / "tau2" / "domains" / "kiosk" / "tasks.json"
    before = tasks.read_bytes()
    done = _coevo(
        "import", "tau2", str(copy), "--domain", "kiosk", "--out", str(tasks), cwd=tmp_path
    )
    assert done.returncode == 2
    assert f"--out {tasks} is inside the domain's own folder" in done.stderr
    assert tasks.read_bytes() == before


def test_import_onto_a_folder_is_refused_and_leaves_nothing_behind(checkout, tmp_path) -> None:
    """`--out DIR` naming an existing folder: exit 2 saying to give a file, before the checkout is read; no DIR.partial is left."""
    out = tmp_path / "impdir"
    out.mkdir()
    done = _coevo(
        "import", "tau2", str(checkout), "--domain", "kiosk", "--out", str(out), cwd=tmp_path
    )
    assert done.returncode == 2, done.stderr
    assert f"--out {out} is a folder" in done.stderr and "Traceback" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["impdir"] and not any(out.iterdir())
