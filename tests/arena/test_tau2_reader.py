"""The τ²-bench reader: tools read with ast only, domains, tasks, and the do-nothing findings."""

from __future__ import annotations

import json
import os
from pathlib import Path

import jsonschema
import pytest
from coevo.arena.errors import CoevoError, RecordError
from coevo.arena.tau2 import (
    RewardType,
    StructuredUserInstructions,
    Task,
    count_findings,
    read_domain,
    read_tasks,
    read_tools,
    static_noop_findings,
)

from tests.arena.tau2_fixture import DATA_MODEL_PY, TASKS, TOOLS_PY, build_tau2_checkout

REAL = Path(os.environ.get("COEVO_TAU2_CHECKOUT", "/tmp/tau2research/repo"))


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    return build_tau2_checkout(tmp_path)


def _tools(**kwargs):
    return {t.name: t for t in read_tools(TOOLS_PY, **kwargs)}


# ---------------------------------------------------------------- tools


def test_every_decorated_method_is_a_tool_with_its_kind_and_write_flag():
    tools = _tools()
    flags = {name: (t.kind, t.mutates_state, t.discoverable) for name, t in tools.items()}
    assert flags == {
        "get_order": ("read", False, False),
        "cancel_order": ("write", True, False),
        "flag_order": ("write", False, False),  # WRITE with mutates_state=False
        "unlock_feature": ("generic", True, False),  # GENERIC with mutates_state=True
        "transfer_to_human_agents": ("generic", False, False),
        "think": ("think", False, False),
        "search": ("read", False, False),  # tool_type= as a keyword
        "list_categories": ("read", False, False),  # @is_tool(): READ by default
        "place_order": ("write", True, False),
        "refund_4821": ("write", True, True),  # @is_discoverable_tool
    }
    assert (
        "scratch" not in tools and "assert_order_status" not in tools and "_get_order" not in tools
    )
    assert {t.toolkit for t in tools.values()} == {"ShopTools"}
    assert list(tools) == [t.name for t in sorted(tools.values(), key=lambda t: t.line)]


def test_the_source_is_parsed_never_run():
    # the fixture's tools.py raises on its first statement, and imports modules that do not exist
    assert "raise RuntimeError" in TOOLS_PY
    assert len(read_tools(TOOLS_PY)) == 10


def test_descriptions_leave_out_the_sections_and_read_args():
    tools = _tools()
    assert tools["get_order"].description == "Get the details of an order."
    # as τ² shows it: first line, a blank line, the rest
    assert (
        tools["cancel_order"].description
        == "Cancel a pending order.\n\nThe user must confirm first."
    )
    props = tools["cancel_order"].parameters["properties"]
    assert props["order_id"]["description"] == "The order id."
    assert props["reason"]["description"] == "Why: 'no longer needed' or\n'ordered by mistake'."
    assert (
        "Returns" not in tools["get_order"].description
        and "Raises" not in tools["get_order"].description
    )
    assert tools["get_order"].returns == "Order"


def test_schemas_from_annotations_defaults_and_docstrings():
    search = _tools()["search"].parameters
    assert search["type"] == "object" and search["additionalProperties"] is False
    assert search["required"] == ["query"]
    p = search["properties"]
    assert p["query"] == {"type": "string", "description": "Words to look for."}
    assert p["limit"] == {
        "type": "integer",
        "description": "At most this many results.",
        "default": 10,
    }
    assert p["tags"]["type"] == ["array", "null"] and p["tags"]["items"] == {"type": "string"}
    assert p["tags"]["default"] is None
    assert p["exact"] == {
        "type": "boolean",
        "description": "Match whole words only.",
        "default": False,
    }
    assert p["min_price"]["type"] == ["number", "null"]
    # a Literal alias of the same file: an enum
    cancel = _tools()["cancel_order"].parameters["properties"]["reason"]
    assert cancel["type"] == "string" and cancel["enum"] == [
        "no longer needed",
        "ordered by mistake",
    ]
    # Dict[str, float] = None: an object of numbers, null allowed
    assert p["weights"]["type"] == ["object", "null"]
    assert p["weights"]["additionalProperties"] == {"type": "number"}
    # a default that is not a literal (Status.PENDING): optional, with no default given
    assert "status" not in search["required"] and "default" not in p["status"]
    assert _tools()["list_categories"].parameters == {
        "type": "object",
        "properties": {},
        "additionalProperties": False,
        "required": [],
    }


def test_names_from_other_modules_are_objects_unless_context_resolves_them():
    alone = _tools()
    mode = alone["search"].parameters["properties"]["mode"]
    assert mode["type"] == "object" and "SearchMode" in mode["description"]
    assert set(alone["search"].unresolved) == {"SearchMode", "Status"}
    with_context = _tools(context=[DATA_MODEL_PY])
    p = with_context["search"].parameters["properties"]
    assert p["mode"] == {
        "type": "string",
        "enum": ["fast", "thorough"],
        "description": "How hard to look.",
        "default": "fast",
    }
    assert p["status"]["enum"] == ["pending", "cancelled"]
    assert with_context["search"].unresolved == ()
    # a pydantic model stays an object, noted and recorded
    place = with_context["place_order"]
    assert place.unresolved == ("LineItem",)
    items = place.parameters["properties"]["items"]
    assert items["type"] == "array" and items["items"] == {"type": "object"}
    assert "LineItem" in items["description"] and items["description"].startswith(
        "The items to buy."
    )
    payment = place.parameters["properties"]["payment"]  # LineItem | dict
    assert payment["type"] == "object" and "LineItem" in payment["description"]
    assert place.parameters["properties"]["note"]["type"] == ["string", "null"]  # "Optional[str]"
    assert place.parameters["required"] == ["items", "payment"]


def test_every_schema_is_valid_json_schema_and_accepts_a_good_call():
    for tool in read_tools(TOOLS_PY, context=[DATA_MODEL_PY]):
        jsonschema.Draft202012Validator.check_schema(tool.parameters)
        assert tool.openai_schema()["function"]["name"] == tool.name
    search = _tools(context=[DATA_MODEL_PY])["search"].parameters
    jsonschema.validate({"query": "shoes", "limit": 3, "tags": None, "mode": "thorough"}, search)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"query": "shoes", "mode": "slow"}, search)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"query": "shoes", "colour": "red"}, search)  # additionalProperties


def test_toolkit_selects_a_class_and_bad_sources_are_clear_errors():
    user = read_tools(
        "class A:\n    @is_tool(ToolType.WRITE)\n    def a(self) -> str: ...\n"
        "class B:\n    @is_tool(ToolType.READ)\n    def b(self, x: int) -> str: ...\n",
        toolkit="B",
    )
    assert [t.name for t in user] == ["b"]
    with pytest.raises(RecordError, match="no class C"):
        read_tools("class A: pass\n", toolkit="C")
    with pytest.raises(RecordError, match="not Python"):
        read_tools("class A(:\n")
    with pytest.raises(RecordError, match="unknown tool type"):
        read_tools("class A:\n    @is_tool(ToolType.DELETE)\n    def a(self): ...\n")
    assert issubclass(RecordError, CoevoError)


# ---------------------------------------------------------------- tasks and domains


def test_read_domain_from_a_checkout(checkout: Path):
    domain = read_domain(checkout, "shop")
    assert domain.name == "shop" and domain.db_file.name == "db.json"
    assert set(domain.db) == {"orders", "unlocked"} and domain.user_db is None
    assert domain.policy is not None and domain.policy.startswith("# Shop policy")
    assert domain.policy_file is not None and domain.policy_file.name == "policy.md"
    assert [t.id for t in domain.tasks] == [t["id"] for t in TASKS]
    assert len(domain.tools) == 10 and [t.name for t in domain.user_tools] == [
        "check_inbox",
        "pay_bill",
    ]
    assert domain.tool("pay_bill", "user") is not None and domain.tool("pay_bill") is None
    assert domain.splits is not None and [t.id for t in domain.split("train")] == ["0", "1", "2"]
    with pytest.raises(RecordError, match="no split 'dev'"):
        domain.split("dev")
    # data_model.py is read as context: the SearchMode alias is an enum
    search = domain.tool("search")
    assert search is not None and search.parameters["properties"]["mode"]["enum"] == [
        "fast",
        "thorough",
    ]


def test_tasks_parse_with_tau2_defaults(checkout: Path):
    tasks = {t.id: t for t in read_domain(checkout, "shop").tasks}
    zero = tasks["0"].evaluation_criteria
    assert zero is not None and zero.reward_basis == [
        RewardType.DB,
        RewardType.COMMUNICATE,
    ]  # default
    assert isinstance(tasks["0"].user_scenario.instructions, StructuredUserInstructions)
    assert tasks["0"].user_scenario.instructions.unknown_info is None
    assert zero.actions is not None and zero.actions[0].requestor == "assistant"
    four = tasks["4"]
    assert four.user_scenario.instructions == "Your phone is locked. Ask for help."
    assert four.initial_state is not None and four.initial_state.initialization_actions is not None
    assert four.initial_state.initialization_actions[0].env_type == "user"
    assert four.initial_state.initialization_data is not None
    assert four.initial_state.initialization_data.agent_data == {"unlocked": ["beta"]}
    criteria = four.evaluation_criteria
    assert criteria is not None and criteria.env_assertions is not None
    assert criteria.env_assertions[0].assert_value is True  # default
    assert criteria.actions is not None and criteria.actions[1].compare_args == []
    assert criteria.reward_basis == [RewardType.ENV_ASSERTION, RewardType.ACTION]
    assert tasks["5"].ticket == "Solo mode ticket."
    five = tasks["5"].evaluation_criteria
    assert five is not None and five.actions is None and five.env_assertions is None


def test_task_types_that_matter_are_strict(tmp_path: Path):
    good = json.loads(json.dumps(TASKS[1]))
    Task.model_validate({**good, "extra_key": 1})  # extra keys are ignored
    for broken, where in [
        (
            {
                **good,
                "evaluation_criteria": {**good["evaluation_criteria"], "reward_basis": ["OUTPUT"]},
            },
            "reward_basis",
        ),
        ({**good, "id": 1}, "id"),
        ({k: v for k, v in good.items() if k != "user_scenario"}, "user_scenario"),
    ]:
        path = tmp_path / "tasks.json"
        path.write_text(json.dumps([broken]))
        with pytest.raises(RecordError, match=where):
            read_tasks(path)
    path.write_text(json.dumps([good, good]))
    with pytest.raises(RecordError, match="twice"):
        read_tasks(path)
    path.write_text("{}")
    with pytest.raises(RecordError, match="not an array"):
        read_tasks(path)


def test_a_toml_database_and_main_policy(tmp_path: Path):
    root = build_tau2_checkout(
        tmp_path, domain="phone", db_format="toml", policy_name="main_policy.md"
    )
    domain = read_domain(root, "phone")
    assert domain.db_file.name == "db.toml" and [o["order_id"] for o in domain.db["orders"]] == [
        "#W0001",
        "#W0002",
    ]
    assert domain.user_db == {"device": {"airplane_mode": False}}
    assert domain.policy_file is not None and domain.policy_file.name == "main_policy.md"


def test_an_installed_package_layout_and_explicit_roots(tmp_path: Path):
    site = build_tau2_checkout(tmp_path / "site", layout="site-packages")
    assert len(read_domain(site, "shop").tasks) == len(TASKS)
    assert len(read_domain(site / "tau2", "shop").tasks) == len(TASKS)  # the package itself
    other = tmp_path / "elsewhere"
    domain = read_domain(
        other, "shop", data_root=site / "tau2/data/tau2/domains", code_root=site / "tau2/domains"
    )
    assert len(domain.tools) == 10


def test_missing_files_are_named_with_the_fix(checkout: Path, tmp_path: Path):
    with pytest.raises(
        RecordError, match=r"no data/tau2/domains under .*pass the root of a τ²-bench checkout"
    ):
        read_domain(tmp_path / "nothing", "shop")
    with pytest.raises(RecordError, match=r"no domain 'retail' .*\['shop'\]"):
        read_domain(checkout, "retail")
    (checkout / "data/tau2/domains/shop/tasks.json").unlink()
    with pytest.raises(
        RecordError, match=r"no data/tau2/domains/shop/tasks\.json under .*pass the root"
    ):
        read_domain(checkout, "shop")
    build_tau2_checkout(checkout)
    (checkout / "data/tau2/domains/shop/db.json").unlink()
    with pytest.raises(RecordError, match=r"db\.json or db\.toml"):
        read_domain(checkout, "shop")
    build_tau2_checkout(checkout)
    (checkout / "src/tau2/domains/shop/tools.py").unlink()
    with pytest.raises(RecordError, match=r"src/tau2/domains/shop/tools\.py"):
        read_domain(checkout, "shop")
    build_tau2_checkout(checkout)
    (checkout / "data/tau2/domains/shop/db.json").write_text("{not json")
    with pytest.raises(RecordError, match="not valid JSON"):
        read_domain(checkout, "shop")


# ---------------------------------------------------------------- findings


def test_static_noop_findings(checkout: Path):
    findings = static_noop_findings(read_domain(checkout, "shop"))
    summary = {k: (f.noop_passes_db, f.noop_full_reward) for k, f in findings.items()}
    assert summary == {
        "0": (True, True),  # reads only, default basis, nothing to say (nl_assertions do not gate)
        "1": (False, False),  # a gold write, a string to say
        "2": (True, None),  # no actions, but an NL assertion gates: needs a judge
        "3": (True, True),  # a WRITE that does not mutate state, and a transfer
        "4": (False, False),  # a user-side gold write; ENV needs a replay, ACTION fails
        "5": (True, True),  # no actions nor assertions; "HELP" is in the fixed greeting
        "6": (False, False),  # a GENERIC tool that mutates state; ACTION fails
        "7": (None, None),  # a gold action naming no tool read
    }
    assert findings["1"].gold_writes == ("cancel_order",)
    assert findings["1"].components == {RewardType.DB: False, RewardType.COMMUNICATE: False}
    assert "'42'" in findings["1"].text
    assert findings["2"].components == {RewardType.DB: True, RewardType.NL_ASSERTION: None}
    assert "LLM judge" in findings["2"].text
    four = findings["4"]
    assert four.gold_writes == ("user:pay_bill",)
    assert four.components == {RewardType.ENV_ASSERTION: None, RewardType.ACTION: False}
    assert "DB does not gate" in four.text and "replay" in four.text
    assert findings["6"].gold_writes == ("unlock_feature",)
    assert findings["7"].unknown_actions == ("KB_search",)
    assert all(f.reasons for f in findings.values())
    assert count_findings(findings) == {
        "tasks": 8,
        "noop_passes_db": 4,
        "noop_full_reward": 3,
        "undecided": 2,
    }


def test_no_evaluation_criteria_scores_one(tmp_path: Path):
    tasks = [{**TASKS[0], "evaluation_criteria": None}]
    domain = read_domain(build_tau2_checkout(tmp_path, tasks=tasks), "shop")
    finding = static_noop_findings(domain)["0"]
    assert finding.noop_full_reward is True and finding.components == {}


# ---------------------------------------------------------------- the real benchmark


@pytest.mark.skipif(
    not (REAL / "data/tau2/domains").is_dir(),
    reason=f"no τ²-bench checkout at {REAL} (set COEVO_TAU2_CHECKOUT to the root of one)",
)
def test_the_real_airline_and_retail_domains():
    expected = {  # domain: (tasks, agent tools, gold with no state-mutating tool, do-nothing scores 1)
        "airline": (50, 14, 24, 23),
        "retail": (114, 16, 10, 6),
    }
    for name, (tasks, tools, no_write, full) in expected.items():
        domain = read_domain(REAL, name)
        assert len(domain.tasks) == tasks and len(domain.tools) == tools and domain.user_tools == []
        findings = static_noop_findings(domain)
        assert not any(f.unknown_actions for f in findings.values())
        assert sum(not f.gold_writes for f in findings.values()) == no_write
        assert count_findings(findings)["noop_full_reward"] == full
        for tool in domain.tools:
            jsonschema.Draft202012Validator.check_schema(tool.parameters)
    airline = static_noop_findings(read_domain(REAL, "airline"))
    assert [k for k, f in airline.items() if f.noop_passes_db] == [
        *[
            "0",
            "1",
            "2",
            "3",
            "4",
            "5",
            "6",
            "9",
            "10",
            "13",
            "26",
            "27",
            "28",
            "31",
            "34",
            "36",
            "38",
            "41",
            "43",
            "45",
            "46",
            "47",
            "48",
            "49",
        ]
    ]
    assert airline["3"].noop_full_reward is False  # its communicate_info "4" must be said
    retail = static_noop_findings(read_domain(REAL, "retail"))
    assert [k for k, f in retail.items() if f.noop_passes_db] == [
        "10",
        "12",
        "24",
        "25",
        "50",
        "57",
        "62",
        "65",
        "67",
        "68",
    ]
    writes = {t.name for t in read_domain(REAL, "retail").tools if t.mutates_state}
    assert writes == {
        "cancel_pending_order",
        "exchange_delivered_order_items",
        "modify_pending_order_address",
        "modify_pending_order_items",
        "modify_pending_order_payment",
        "modify_user_address",
        "return_delivered_order_items",
    }
