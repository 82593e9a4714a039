"""The format: pinned ids, canonical JSON, the JSON Schema export."""

from __future__ import annotations

import json

import jsonschema
from coevo.arena import TaskSpec, WorldSpec, canonical_json, dump_record, load_records
from coevo.arena.ids import episode_id
from coevo.arena.records import json_schema

from tests.factories import EXAMPLES, example, mini_task

RETAIL_WORLD_ID = "sha256:95acdefa7c40cd95de6d824c5876d0ab8673c471eefb73c67f0a434654e0776a"
ADA_TASK_ID = "sha256:a9b333b3690a285444745194760c91329f7c6ab36c0dc73b76e2c7770b190081"


def test_ids_of_an_example_world_and_task_are_pinned():
    """The ids are a pure function of content: these values must never change across machines or versions."""
    task, world = example("retail")
    assert world.world_id == RETAIL_WORLD_ID
    assert task.task_id == ADA_TASK_ID
    assert task.world_id == RETAIL_WORLD_ID


def test_task_id_ignores_key_order_solution_and_metadata():
    """Key order, whitespace, solution, features, lineage and provenance do not change a task's id."""
    data = mini_task()
    base = TaskSpec.model_validate(data).task_id
    reordered = json.loads(json.dumps(dict(reversed(list(data.items())))))
    assert TaskSpec.model_validate(reordered).task_id == base
    data2 = dict(
        data,
        solution=[{"tool": "submit", "arguments": {}}],
        features={"steps": 9},
        provenance={"by": "me"},
    )
    assert TaskSpec.model_validate(data2).task_id == base
    assert (
        TaskSpec.model_validate(dict(data, instruction=data["instruction"] + " ")).task_id != base
    )


def test_inline_world_and_world_reference_give_the_same_task_id():
    """A task's id uses its world's id whether the world is inline or referenced."""
    inline = TaskSpec.model_validate(mini_task())
    referenced = TaskSpec.model_validate(mini_task(world=inline.world_id))
    assert inline.task_id == referenced.task_id


def test_canonical_json_is_sorted_compact_and_utf8():
    """Canonical JSON sorts keys, drops spaces and keeps non-ASCII characters."""
    assert canonical_json({"b": 1, "a": [1.5, "é"]}) == '{"a":[1.5,"é"],"b":1}'


def test_model_copy_recomputes_ids():
    """A modified copy never keeps the cached id of the original."""
    task = TaskSpec.model_validate(mini_task())
    assert task.model_copy(update={"instruction": "other"}).task_id != task.task_id


def test_every_example_record_validates_against_the_exported_schema():
    """`coevo schema` describes the records the reader accepts."""
    schema = json_schema("all")
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for line in EXAMPLES.read_text().splitlines():
        record = json.loads(line)
        errors = list(validator.iter_errors(record))
        assert not errors, errors[0].message
    tasks, worlds = load_records(EXAMPLES)
    for spec in [*worlds.values(), *tasks]:
        assert not list(validator.iter_errors(dump_record(spec)))
    assert isinstance(schema["oneOf"], list) and len(schema["oneOf"]) == 2
    assert WorldSpec.model_json_schema(by_alias=True)["properties"]["schema"]["type"] == "array"


def test_model_copy_keeps_world_data_and_recomputes_ids(examples) -> None:
    """Copying a world with an update keeps its seed rows (a field) and gives the copy its own id."""
    _, worlds = examples
    world = next(iter(worlds.values()))
    copied = world.model_copy(update={"domain": "elsewhere"})
    assert copied.data == world.data
    assert copied.world_id != world.world_id


def test_episode_ids_are_pinned():
    """An episode id is a pure function of where the play happened: the loop's, a benchmark trial's, an inbox rollout's and a proposer rollout's ids must never change (resumed and retried runs match on them)."""
    assert episode_id(0, 3, "train", 17, "sha256:ab") == "ep-1ba286eaf0ec08be4926e174"
    assert episode_id(0, 2, "benchmark", "sha256:ab") == "ep-176294c4918377938eb4dd05"
    assert episode_id("inbox", "part-0001.jsonl", 4) == "ep-708650c13a8d57a477700857"
    assert (
        episode_id(0, 1, "propose", "sha256:ab", prefix="prop-") == "prop-21f369741ac2e398d52833b4"
    )
