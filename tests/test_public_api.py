"""The public surface: what users import keeps working, at the paths the docs give."""

from __future__ import annotations

import importlib

import pytest

PUBLIC = {
    "coevo.arena": [
        "World",
        "TaskSpec",
        "WorldSpec",
        "ToolCall",
        "ToolSpec",
        "CheckSpec",
        "VerifierSpec",
        "FrameColumns",
        "Lineage",
        "TableData",
        "Blob",
        "TASK_FORMAT",
        "WORLD_FORMAT",
        "Episode",
        "Observation",
        "Reward",
        "Verdict",
        "CheckResult",
        "CheckOutcome",
        "FrameViolation",
        "load_records",
        "iter_records",
        "parse_record",
        "dump_record",
        "write_records",
        "Record",
        "BadRecord",
        "assess_task",
        "WorldCache",
        "CHECK_NAMES",
        "check_valid",
        "check_oracle",
        "check_noop",
        "check_unsolved",
        "check_partial",
        "check_determinism",
        "check_grounded",
        "verify",
        "task_id",
        "world_id",
        "canonical_json",
        "Limits",
        "DEFAULT_LIMITS",
        "CoevoError",
        "SpecError",
        "RecordError",
        "EpisodeError",
        "Problem",
    ],
    "coevo.run.testing": [
        "check_role",
        "role_problems",
        "sample_tasks",
        "broken_task",
        "check_curriculum",
        "curriculum_problems",
        "curriculum_tasks",
    ],
    "coevo.arena.errors": [
        "CoevoError",
        "SpecError",
        "RecordError",
        "EpisodeError",
        "RegistryError",
        "RoleCheckError",
        "CurriculumCheckError",
        "ConfigError",
        "StateError",
        "LogError",
        "ExperimentError",
        "ArenaError",
        "CommandError",
    ],
    "coevo.arena.gamelog": [
        "GameLog",
        "RunDir",
        "SCHEMAS",
        "SCHEMA_VERSION",
        "TABLES",
        "GenerationRecord",
    ],
    "coevo.arena.state": ["pack_state", "unpack_state", "peek_state", "RoleState"],
    "coevo.arena.seeding": ["derive_seed"],
    "coevo.arena.difficulty": ["LEVELS", "difficulty", "task_level"],
    "coevo.arena.rendering": ["SYSTEM", "tool_definitions", "openai_tools", "prompt"],
    "coevo.run.experiment": ["Experiment", "load_experiment", "recorded_experiment"],
    "coevo.run.loop": ["run_experiment", "resume_run", "summarize", "Arena"],
    "coevo.run.cli": ["main"],
    "coevo.agents.protocols": [
        "Synthesizer",
        "Solver",
        "Judge",
        "WorldModel",
        "ProposalRequest",
        "LearnStats",
        "Stateful",
        "Versioned",
        "Remembers",
        "ReportsUsage",
        "ReportsAttempts",
        "kind_of",
    ],
    "coevo.agents.registry": ["REGISTRY", "RoleInfo", "Registry", "role"],
    "coevo.agents.synthesizers.procedural": ["ProceduralSynthesizer", "DOMAINS"],
    "coevo.agents.synthesizers.mutation": ["Mutator", "OPERATORS"],
    "coevo.agents.linear_pg": ["LinearPGSolver"],
    "coevo.agents.world_models": ["IRTWorldModel"],
    "coevo.curricula.base": ["Curriculum", "CurriculumConfig", "GenerationPlan", "Mutation"],
    "coevo.curricula.registry": ["CURRICULA", "curriculum_config", "make_curriculum"],
    "coevo.arena.analysis": ["load_run", "analyze", "Run"],
    "coevo.arena.analysis.export": [
        "export_run",
        "task_row",
        "read_tasks",
        "read_worlds",
        "task_from_row",
        "read_manifest",
        "EXPORT_FORMAT",
    ],
    "coevo.arena.examples": ["EXAMPLES", "bundled", "find_bundled", "example_tasks"],
    "coevo.run.tracking": ["TrackingConfig", "Tracking"],
    "coevo.run.driver.summary": ["summarize", "summary_lines"],
    "coevo.curricula.rebuild": ["curriculum_from_log"],
}


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_the_public_names_import_from_their_documented_module(module: str) -> None:
    """Every public name is importable from the module the docs name (and listed in its __all__)."""
    loaded = importlib.import_module(module)
    missing = [name for name in PUBLIC[module] if not hasattr(loaded, name)]
    assert not missing, f"{module} lost {missing}"
    listed = getattr(loaded, "__all__", None)
    if listed is not None:
        assert not set(PUBLIC[module]) - set(listed), f"{module}.__all__ lacks some public names"


def test_the_console_script_is_the_cli_main() -> None:
    """`coevo` (pyproject's console script) is coevo.run.cli:main."""
    import tomllib
    from pathlib import Path

    scripts = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    assert scripts["project"]["scripts"]["coevo"] == "coevo.run.cli:main"
