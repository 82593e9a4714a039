"""The procedural domains' output, byte for byte: digests recorded before the domains were restructured.

For every domain, every level and every family the level draws, tasks are
drawn with fixed seeds and written as ``coevo synth`` writes them (world
records once, then the tasks by world id, one JSON object a line); each world's
SQLite database is dumped as SQL text (``iterdump``); worlds built with other
knobs are dumped too; every mutation operator is applied to some of the tasks;
and the miner mines one of the domain's worlds from an SQLite file. The sha256
of all of it must not change when the domains' code is reorganised: a change
of these digests is a change of behaviour, to make on purpose and say so.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from coevo.agents.protocols import ProposalRequest
from coevo.agents.synthesizers.mining import Miner
from coevo.agents.synthesizers.mutation import OPERATORS, Mutator
from coevo.agents.synthesizers.planner import Unfit
from coevo.agents.synthesizers.planner.plan import LEVEL_FAMILIES
from coevo.agents.synthesizers.procedural import DOMAINS, ProceduralSynthesizer
from coevo.arena import TaskSpec, World, WorldSpec, dump_record

WORLD_SEEDS = (3, 11)
"""The request seeds (one world each) every level and family is drawn in."""

PER_CASE = 2
"""Tasks drawn per (world seed, level, family)."""

OTHER_KNOBS: dict[str, dict[str, Any]] = {
    "retail": {"customers": 20, "twin_share": 0.4, "suppliers": 4, "return_share": 0.5},
    "airline": {"passengers": 25, "twin_share": 0.4, "cancelled_share": 0.3, "refund_share": 0.4},
    "clinic": {"patients": 40, "twin_share": 0.4, "insurers": 3, "newcomer_every": 3},
    "hr": {"twin_share": 0.4, "recent_joiner_share": 0.5, "payslip_months": 3},
    "warehouse": {"supplier_names": 7, "sister_companies": 2, "new_suppliers": 2},
}
"""Knobs other than the defaults, per domain: a world built with these is digested too."""

DIGESTS = {
    "retail": "69c92f70fbb91079279de1cc29d22670a73afddcf3c6935a884afbd525b627d9",
    "airline": "514d8ee95799a3e7e9094872754a4411b8db92c783a2a8edfc80ba2443d68ccd",
    "clinic": "e47fe3c209a6fb5766591dcb9ab7e8e9fa6e047292b14abf909c6cde3943ba8e",
    "hr": "a7da9bbd4031e25f07b54837d9346cf5eafb59ea119718d14594678f22a93420",
    "warehouse": "c457cdfaccc80e4c8deec6100c4bf4f4195fb0dc9522559903763cde07b20844",
    "mixed": "189e9df862886f764149c5ed38cffc61ea42916e043256f819a439dda4ca431d",
}
"""The sha256 of each part's output, recorded on the domains before their restructuring."""


def _jsonl(tasks: Iterable[TaskSpec]) -> str:
    """The tasks as ``coevo synth`` writes them: each world record once, then the tasks by world id."""
    tasks = list(tasks)
    records: list[dict[str, Any]] = []
    seen: set[str] = set()
    for task in tasks:
        assert isinstance(task.world, WorldSpec)
        if task.world_id not in seen:
            seen.add(task.world_id)
            records.append(dump_record(task.world))
    records += [dump_record(t.model_copy(update={"world": t.world_id})) for t in tasks]
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def _database(spec: WorldSpec) -> sqlite3.Connection:
    """The world's SQLite database, as built for an episode, in a connection of its own."""
    world = World(spec)
    try:
        conn = sqlite3.connect(":memory:")
        conn.deserialize(world.snapshot())
    finally:
        world.close()
    return conn


def _dump(spec: WorldSpec) -> str:
    """The world's database as SQL text."""
    conn = _database(spec)
    try:
        return "\n".join(conn.iterdump()) + "\n"
    finally:
        conn.close()


def _mutated(tasks: list[TaskSpec]) -> str:
    """Every operator applied to every task (seeded by position): the children, or why not."""
    mutator = Mutator()
    lines = []
    try:
        for i, task in enumerate(tasks):
            for op in OPERATORS:
                try:
                    lines.append(_jsonl([mutator.mutate(task, op, seed=i)]))
                except Unfit as exc:
                    lines.append(f"{op} unfit: {exc}\n")
    finally:
        mutator.close()
    return "".join(lines)


def _mined(spec: WorldSpec, folder: Path) -> str:
    """The world written to an SQLite file and mined: the mined world and tasks at every level."""
    path = folder / f"{spec.domain}.sqlite"
    conn = _database(spec)
    try:
        target = sqlite3.connect(path)
        conn.backup(target)
        target.close()
    finally:
        conn.close()
    miner = Miner(path, seed=1, per_table=40)
    tasks = [
        t
        for level in LEVEL_FAMILIES
        for t in miner.propose(ProposalRequest(n=2, seed=level, level=level))
    ]
    return json.dumps(dump_record(miner.world), ensure_ascii=False) + "\n" + _jsonl(tasks)


def domain_output(domain: str, folder: Path) -> str:
    """Everything the digest of ``domain`` covers, as text."""
    synth = ProceduralSynthesizer([domain])
    parts = []
    tasks: list[TaskSpec] = []
    for seed in WORLD_SEEDS:
        parts.append(_dump(synth.world(domain, seed)))
        for level, families in LEVEL_FAMILIES.items():
            for family in families:
                request = ProposalRequest(n=PER_CASE, seed=seed, level=level, families=[family])
                drawn = synth.propose(request)
                parts.append(f"{seed} {level} {family} misses {synth.misses}\n")
                parts.append(_jsonl(drawn))
                tasks += drawn
    knobs = dataclasses.replace(DOMAINS[domain].knobs, **OTHER_KNOBS[domain])
    parts.append(_dump(DOMAINS[domain].build_world(5, knobs)))  # type: ignore[call-arg]
    parts.append(_mutated(tasks[:: len(tasks) // 12]))
    parts.append(_mined(synth.world(domain, WORLD_SEEDS[0]), folder))
    return "".join(parts)


def mixed_output() -> str:
    """Requests over every domain at once, with the defaults and the small-model settings."""
    plain = ProceduralSynthesizer()
    small = ProceduralSynthesizer(
        world_pool=2, tool_subset=2, families=["question"], relay_share=0.5
    )
    parts = [_jsonl(plain.propose(ProposalRequest(n=10, seed=seed))) for seed in (1, 2)]
    parts += [_jsonl(small.propose(ProposalRequest(n=8, seed=seed, level=1))) for seed in (4, 5)]
    return "".join(parts)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize("domain", list(DOMAINS))
def test_a_domain_s_tasks_worlds_children_and_mined_tasks_are_as_recorded(
    domain: str, tmp_path: Path
) -> None:
    """Every level and family of the domain, its worlds' databases, children and mined tasks hash as recorded."""
    assert _sha256(domain_output(domain, tmp_path)) == DIGESTS[domain], (
        f"the {domain} domain's output changed; if on purpose, record the new digest"
    )


def test_requests_over_every_domain_are_as_recorded() -> None:
    """Mixed-domain requests, also with a world pool, tool subsets and relays, hash as recorded."""
    assert _sha256(mixed_output()) == DIGESTS["mixed"], (
        "mixed-domain output changed; if on purpose, record the new digest"
    )


def test_the_digests_cover_every_domain() -> None:
    """A domain added to the registry gets a recorded digest and knobs to vary."""
    assert set(DIGESTS) == {*DOMAINS, "mixed"}
    assert set(OTHER_KNOBS) == set(DOMAINS)
