"""No key reaches a file coevo writes or a line it prints: one rule (coevo.arena.secrets), through the real CLI."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from coevo.arena.secrets import REDACTED, redact, redact_value

from tests.agents.fake_openai import ExplorerPolicy, FakeOpenAI
from tests.conftest import SMALL_RUN
from tests.factories import IN_PROCESS_TOML, run_cli

CANARY = "sk-SECRETCANARY-12345"
"""The environment's key, also pasted into settings (what a careless user does)."""

OTHER = "sk-proj-NOTTHEENVIRONMENTSKEY0042"
"""A key that is not the environment's: caught by its shape."""

CUSTOM = "plain-custom-credential-99"
"""The key of a server whose variable the role names (``api_key_env``, no key-like suffix): caught by value."""


def _holds(path: Path, secret: str) -> bool:
    """Whether the file holds ``secret``: in its bytes, or in its rows (Parquet compresses them)."""
    if secret.encode() in path.read_bytes():
        return True
    return path.suffix == ".parquet" and secret in str(pq.read_table(path).to_pylist())


def _files_holding(folder: Path, secret: str) -> list[str]:
    """Every file under ``folder`` that holds ``secret``."""
    return sorted(
        str(path.relative_to(folder))
        for path in folder.rglob("*")
        if path.is_file() and _holds(path, secret)
    )


def test_the_rule_takes_out_keys_by_value_and_by_shape_and_leaves_ordinary_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The environment's keys (as given, quoted, or inside JSON), key-shaped tokens and Bearer tokens go; ids, hashes, UUIDs, URLs and words stay."""
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    monkeypatch.setenv("MY_SERVER", "a-custom-secret-value")  # no key suffix: named by a role
    from coevo.arena.secrets import remember_key_variable

    remember_key_variable("MY_SERVER")
    assert redact(f"the key {CANARY}!") == f"the key {REDACTED}!"
    assert redact(f"{{'api_key': {CANARY!r}}}") == f"{{'api_key': '{REDACTED}'}}"
    assert redact("used a-custom-secret-value") == f"used {REDACTED}"
    assert (
        redact(f"--set solver.config.api_key={OTHER}") == f"--set solver.config.api_key={REDACTED}"
    )
    anthropic = "sk-ant-api03-" + "x" * 40
    assert redact(f"x-api-key: {anthropic}") == f"x-api-key: {REDACTED}"
    assert (
        redact("Authorization: Bearer abcdef0123456789ghij") == f"Authorization: Bearer {REDACTED}"
    )
    assert redact("hf_" + "A1b2" * 9) == REDACTED
    assert redact("https://ada:hunter2hunter2@mlflow.internal/") == (
        f"https://ada:{REDACTED}@mlflow.internal/"
    )
    ordinary = (
        "sha256:a9b333b3690a285444745194760c91329f7c6ab36c0dc73b76e2c7770b190081 "
        "bfcf560c-5afc-47d9-b5eb-9e30f7a5bcdc http://127.0.0.1:8000/v1 task-sk-1 desk-organizer "
        "sk-short Bearer of bad news OPENAI_API_KEY Qwen/Qwen3-4B"
    )
    assert redact(ordinary) == ordinary
    nested = {"a": [CANARY, {"b": OTHER}], "n": 3, "k": "fine"}
    assert redact_value(nested) == {"a": [REDACTED, {"b": REDACTED}], "n": 3, "k": "fine"}


@pytest.mark.slow  # a whole run with MLflow (about 5 s alone)
def test_a_key_pasted_into_settings_reaches_no_file_of_the_run_nor_mlflow(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`coevo run` with the keys in extra_body and in an MLflow tag: no file of the run directory or of MLflow's store holds one, nor the output."""
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    monkeypatch.setenv("MY_SERVER_CREDENTIAL", CUSTOM)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    experiment = (
        SMALL_RUN.replace("generations = 3", "generations = 1").replace(IN_PROCESS_TOML, "")
        + '[solver]\nname = "llm-solver"\nconfig = { max_steps = 4, api_key_env = "MY_SERVER_CREDENTIAL", '
        + f'extra_body = {{ note = "{CANARY}", more = "{CUSTOM}" }} }}\n'
        + f'[tracking]\nmlflow = {{ tags = {{ note = "{CANARY}", other = "{OTHER}" }} }}\n'
        + IN_PROCESS_TOML
    )
    toml = tmp_path / "leaky.toml"
    toml.write_text(experiment)
    run_dir = tmp_path / "run"
    with FakeOpenAI(ExplorerPolicy(2), models=["fake-model"], api_key=CUSTOM) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        result = run_cli("run", str(toml), "--out", str(run_dir))
        sent = [(body.get("note"), body.get("more")) for body in server.requests]
    assert result.returncode == 0, result.stderr
    assert sent and set(sent) == {(CANARY, CUSTOM)}  # the setting still works: the server gets it
    assert (run_dir / "mlruns").is_dir()  # MLflow's file store is inside the run directory
    for secret in (CANARY, OTHER, CUSTOM):
        assert _files_holding(run_dir, secret) == []
        assert secret not in result.stdout + result.stderr
    recorded = (run_dir / "experiment.json").read_text()
    assert REDACTED in recorded
    assert "settings_redacted" in result.stderr  # said, naming the settings
    assert "solver.config.extra_body.note" in result.stderr
    tags = list((run_dir / "mlruns").rglob("tags/note"))
    assert [t.read_text() for t in tags] == [REDACTED]


def test_a_key_given_to_set_is_not_echoed_in_the_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--set solver.config.api_key=sk-proj-…` (a key the environment does not hold) is refused without showing the key."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    result = run_cli(
        "run",
        "openai-solver",
        "--set",
        f"solver.config.api_key={OTHER}",
        "--set",
        "ray.in_process=true",
    )
    assert result.returncode == 2, result.stderr
    assert "api_key" in result.stderr
    assert OTHER not in result.stdout + result.stderr
    assert REDACTED in result.stderr


LONG = "sk-proj-CANARY" + "0123456789abcdefghijklmnopqrstuvwxyz" * 2
"""A key long enough that pydantic's echo shortens it in the middle ('head...tail')."""

LONG_ENV = "envkey-" + "ZYXWVUTSRQPONMLKJIHGFEDCBA9876543210" * 2
"""The environment's key, shaped like no known key: caught by value, and by piece once shortened."""


def _pieces(secret: str, n: int = 12) -> list[str]:
    return [secret[i : i + n] for i in range(len(secret) - n + 1)]


def test_debug_output_is_redacted_by_the_same_rule_shortened_echoes_included(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`coevo --debug run ... --set solver.config.api_key=KEY`: the traceback (pydantic's frames echo the input, shortened) holds no piece of either key."""
    monkeypatch.setenv("OPENAI_API_KEY", LONG_ENV)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    result = run_cli(
        "--debug",
        "run",
        "openai-solver",
        "--out",
        str(tmp_path / "run"),
        "--set",
        f"solver.config.api_key={LONG}",
        "--set",
        f"solver.config.model={LONG_ENV}",
    )
    assert result.returncode == 2, result.stderr
    said = result.stdout + result.stderr
    assert "Traceback" in said and "input_value=" in said, said[-2000:]
    leaked = [p for p in _pieces(LONG) + _pieces(LONG_ENV) if p in said]
    assert not leaked, leaked[:3]
    assert redact(f"x='{LONG[:24]}...{LONG[-24:]}'") == f"x='{REDACTED}'"


def test_a_key_in_a_role_setting_is_not_echoed_when_the_setting_is_wrong(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A role's validation error (pydantic echoes the input) shows the key as [redacted]."""
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    toml = tmp_path / "bad.toml"
    toml.write_text(
        SMALL_RUN + f'[solver]\nname = "llm-solver"\nconfig = {{ max_steps = "{CANARY}" }}\n'
    )
    result = run_cli("run", str(toml), "--out", str(tmp_path / "run"))
    assert result.returncode == 2, result.stderr
    assert "max_steps" in result.stderr
    assert CANARY not in result.stdout + result.stderr
