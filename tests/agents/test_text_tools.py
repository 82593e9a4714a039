"""The text protocol for tool calls (models whose chat template has no tools section): rendering, parsing, and a Solver that plays by it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from coevo.agents.llm.solver import LLMSolver
from coevo.agents.llm.text_tools import (
    CALL_CLOSE,
    CALL_OPEN,
    RESPONSE_OPEN,
    example_call,
    parse_tool_calls,
    text_messages,
    tools_text,
)
from coevo.arena.rendering import openai_tools, tool_definitions
from coevo.run.testing import sample_tasks
from hypothesis import given
from hypothesis import strategies as st

from tests.agents.fake_openai import END, SPECIAL, FakeOpenAI, ScriptedPolicy, decode, encode, text

TOOL = {
    "type": "function",
    "function": {
        "name": "find_customer",
        "description": "Look a customer up.",
        "parameters": {
            "type": "object",
            "properties": {"email": {"type": "string"}, "limit": {"type": "integer"}},
            "required": ["email", "limit"],
        },
    },
}


@pytest.fixture(autouse=True)
def api_key(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-test-key")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def test_calls_are_read_from_the_tags_in_order_and_text_around_them_is_ignored() -> None:
    """Two tagged calls with words around them give two calls, named and parsed, with ids from the prefix."""
    said = (
        'I will look. <tool_call>{"name": "find_customer", "arguments": {"email": "a@b.c"}}'
        '</tool_call> then <tool_call>\n{"name": "submit", "arguments": {}}\n</tool_call> done'
    )
    first, second = parse_tool_calls(said, prefix="call_3_")
    assert (first.id, first.name, first.arguments) == (
        "call_3_0",
        "find_customer",
        {"email": "a@b.c"},
    )
    assert (second.id, second.name, second.arguments) == ("call_3_1", "submit", {})


def test_a_call_cut_off_or_unclosed_is_read_to_the_end_and_a_broken_one_says_why() -> None:
    """A last call with no closing tag is read; JSON that does not parse keeps its name and a reason; no name is an error."""
    (unclosed,) = parse_tool_calls('<tool_call>{"name": "submit", "arguments": {"answer": "gold"}}')
    assert unclosed.arguments == {"answer": "gold"}
    (broken,) = parse_tool_calls(
        '<tool_call>{"name": "find_customer", "arguments": {"email": </tool_call>'
    )
    assert (
        broken.name == "find_customer"
        and broken.arguments is None
        and "not a JSON object" in (broken.error or "")
    )
    (nameless,) = parse_tool_calls('<tool_call>{"arguments": {}}</tool_call>')
    assert nameless.arguments is None and "names no tool" in (nameless.error or "")
    assert parse_tool_calls("no call here") == [] and parse_tool_calls(None) == []


def test_an_unclosed_call_ends_where_the_next_one_opens() -> None:
    """`<tool_call>{a}` left open, then `<tool_call>{b}</tool_call>`: both calls, in order; a broken one left open does not swallow the next either."""
    said = (
        '<tool_call>{"name": "find_customer", "arguments": {"email": "a@b.c"}}\n'
        '<tool_call>{"name": "submit", "arguments": {}}</tool_call>'
    )
    first, second = parse_tool_calls(said)
    assert (first.name, first.arguments) == ("find_customer", {"email": "a@b.c"})
    assert (second.name, second.arguments, second.id) == ("submit", {}, "call_1")
    broken, after = parse_tool_calls(
        '<tool_call>{"name": "find_customer", "arguments": {"email": \n'
        '<tool_call>{"name": "submit", "arguments": {}}</tool_call>'
    )
    assert broken.name == "find_customer" and broken.arguments is None
    assert (after.name, after.arguments) == ("submit", {})


@pytest.mark.parametrize(
    "fenced",
    [
        '```json\n{"name": "submit", "arguments": {"answer": "gold"}}\n```',
        '\n```\n{"name": "submit", "arguments": {"answer": "gold"}}\n```\n',
        '```JSON {"name": "submit", "arguments": {"answer": "gold"}}```',
    ],
)
def test_a_code_fence_inside_the_tag_is_read_through(fenced: str) -> None:
    """Models often wrap the call's JSON in a Markdown fence inside the tag: the call is the JSON in it."""
    (read,) = parse_tool_calls(f"{CALL_OPEN}{fenced}{CALL_CLOSE}")
    assert (read.name, read.arguments, read.error) == ("submit", {"answer": "gold"}, None)


def test_a_tag_written_twice_or_a_tag_inside_a_string_makes_one_call() -> None:
    """`<tool_call><tool_call>{...}</tool_call></tool_call>` is one call; a tag inside an argument's string is the argument's."""
    (doubled,) = parse_tool_calls(
        '<tool_call><tool_call>{"name": "submit", "arguments": {}}</tool_call></tool_call>'
    )
    assert (doubled.name, doubled.arguments) == ("submit", {})
    (quoted,) = parse_tool_calls(
        '<tool_call>{"name": "note", "arguments": {"text": "use <tool_call> tags"}}</tool_call>'
    )
    assert quoted.arguments == {"text": "use <tool_call> tags"}


def test_hostile_text_is_read_without_failing() -> None:
    """JSON nested 100,000 deep, a number past Python's digit limit, unpaired surrogates and 10,000 calls (closed or not) are read as calls or failed steps, never an exception."""
    (deep,) = parse_tool_calls(CALL_OPEN + "[" * 100_000 + CALL_CLOSE)
    assert deep.arguments is None and deep.error
    (deep_arguments,) = parse_tool_calls(
        CALL_OPEN + '{"name": "f", "arguments": ' + '{"a": ' * 100_000 + "1" + CALL_CLOSE
    )
    assert deep_arguments.arguments is None
    (long_number,) = parse_tool_calls(
        CALL_OPEN + '{"name": "f", "arguments": {"n": ' + "9" * 5_000 + "}}" + CALL_CLOSE
    )
    assert long_number.name == "f" and long_number.arguments is None
    (surrogate,) = parse_tool_calls(
        CALL_OPEN + '{"name": "f", "arguments": {"s": "\\ud800 \ufffd"}}' + CALL_CLOSE
    )
    assert surrogate.arguments == {"s": "\ud800 \ufffd"}
    surrogate.raw.encode("utf-8")  # what a trajectory records is valid UTF-8
    call = '{"name": "f", "arguments": {"i": 1}}'
    for joined in (f"{CALL_OPEN}{call}{CALL_CLOSE}\n", f"{CALL_OPEN}{call}\n"):
        calls = parse_tool_calls(joined * 10_000)
        assert len(calls) == 10_000 and calls[-1].id == "call_9999"
        assert all(c.arguments == {"i": 1} for c in calls)


_CALL_TEXT = st.builds(
    lambda name, arguments: {"name": name, "arguments": arguments},
    st.from_regex(r"[a-z_][a-z0-9_]{0,12}", fullmatch=True),
    st.dictionaries(
        st.text(max_size=6),
        st.one_of(st.integers(), st.text(max_size=10), st.booleans(), st.none()),
        max_size=3,
    ),
)
_BETWEEN = st.text(max_size=20).filter(lambda t: CALL_OPEN not in t and "`" not in t)


@given(
    written=st.lists(
        st.tuples(_CALL_TEXT, st.booleans(), st.booleans(), _BETWEEN), min_size=1, max_size=6
    )
)
def test_calls_written_closed_or_not_fenced_or_not_are_read_back_in_order(written) -> None:
    """Any sequence of calls, each closed or left open, fenced or not, with text between them, parses to the same calls in order."""
    parts = []
    for call, closed, fenced, between in written:
        body = json.dumps(call, ensure_ascii=False)
        body = f"```json\n{body}\n```" if fenced else body
        parts.append(f"{CALL_OPEN}{body}{CALL_CLOSE if closed else ''}{between}")
    read = parse_tool_calls("".join(parts))
    assert [(c.name, c.arguments, c.error) for c in read] == [
        (call["name"], call["arguments"], None) for call, *_ in written
    ]


@given(
    st.lists(
        st.sampled_from(
            [
                CALL_OPEN,
                CALL_CLOSE,
                "{",
                "}",
                "[",
                '"',
                "\\",
                ":",
                ",",
                "```",
                "name",
                " ",
                "\n",
                "1",
            ]
        ),
        max_size=60,
    )
)
def test_any_text_parses_to_at_most_one_call_per_opening_tag(pieces) -> None:
    """Whatever a model writes, parsing never raises, and every call found opened with its own tag."""
    said = "".join(pieces)
    calls = parse_tool_calls(said)
    assert len(calls) <= said.count(CALL_OPEN)
    assert all((c.arguments is None) == (c.error is not None) for c in calls)


def test_arguments_may_be_written_as_parameters_or_as_a_json_string() -> None:
    """Both spellings models use are read as the call's arguments."""
    (named,) = parse_tool_calls('<tool_call>{"name": "f", "parameters": {"x": 1}}</tool_call>')
    (quoted,) = parse_tool_calls(
        '<tool_call>{"name": "f", "arguments": "{\\"x\\": 2}"}</tool_call>'
    )
    assert named.arguments == {"x": 1} and quoted.arguments == {"x": 2}


@given(
    name=st.from_regex(r"[a-z_][a-z0-9_]{0,20}", fullmatch=True),
    arguments=st.dictionaries(
        st.text(min_size=1, max_size=8),
        st.one_of(st.integers(), st.text(max_size=12), st.booleans(), st.none()),
        max_size=4,
    ),
    before=st.text(max_size=30).filter(lambda t: "<tool_call>" not in t),
)
def test_any_call_written_by_the_protocol_is_read_back(name, arguments, before) -> None:
    """Whatever the arguments and the text before it, a call written as the protocol says parses to itself."""
    written = (
        before + f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"
    )
    (read,) = parse_tool_calls(written)
    assert (read.name, read.arguments, read.error) == (name, arguments, None)


def test_the_tools_text_holds_every_schema_and_an_example_of_the_first_tool() -> None:
    """The system text lists each tool's JSON schema between <tools> tags and shows a call with placeholder values."""
    described = tools_text(
        [TOOL, {"type": "function", "function": {"name": "submit", "parameters": {}}}]
    )
    assert json.dumps(TOOL["function"]) in described and '"name": "submit"' in described
    assert (
        example_call(TOOL)
        == '<tool_call>{"name": "find_customer", "arguments": {"email": "...", "limit": 1}}</tool_call>'
    )
    assert example_call(TOOL) in described
    assert "Answer with a call of submit" in tools_text([TOOL], forced="submit")


def test_a_conversation_is_sent_as_text_and_can_be_rebuilt_from_the_record() -> None:
    """Tools go in the system text, an assistant's native calls become tags, a turn's results one user message."""
    record = [
        {"role": "system", "content": "Be careful."},
        {"role": "user", "content": "Find Ada."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c0",
                    "type": "function",
                    "function": {"name": "find_customer", "arguments": '{"email": "a@b.c"}'},
                },
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "find_customer", "arguments": '{"email": "d@e.f"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c0", "content": '{"rows": [[1]]}'},
        {"role": "tool", "tool_call_id": "c1", "content": "error: no such row"},
    ]
    sent = text_messages(record, [TOOL])
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert (
        sent[0]["content"].startswith("Be careful.\n\n# Tools")
        and "find_customer" in sent[0]["content"]
    )
    assert sent[2]["content"].count(CALL_OPEN) == 2 and '"email": "a@b.c"' in sent[2]["content"]
    assert (
        sent[3]["content"].count(RESPONSE_OPEN) == 2 and "error: no such row" in sent[3]["content"]
    )
    assert all(set(m) == {"role", "content"} for m in sent)
    assert text_messages(record[1:2], [TOOL])[0]["role"] == "system"  # a system message is made
    assert text_messages(record, None)[0] == record[0]  # no tools: no tools text


def _solution_in_text(task) -> list:
    """The task's reference solution as a model speaking the text protocol would write it, one call a turn."""
    return [
        text(
            f"Next step.\n<tool_call>{json.dumps({'name': c.tool, 'arguments': c.arguments})}</tool_call>"
        )
        for c in task.solution
    ]


def test_a_solver_on_the_text_protocol_sends_no_tools_and_plays_the_calls_it_reads() -> None:
    """tool_protocol = text: the server gets the tools in the system text (none natively), and calls in the answer's text are made."""
    task = sample_tasks()[0]
    with FakeOpenAI(ScriptedPolicy(_solution_in_text(task))) as server:
        solver = LLMSolver(base_url=server.url, tool_protocol="text", token_prompts=False)
        (episode,) = solver.attempt([task], seed=0)
        sent = server.requests
    assert episode.reward.value == 1, episode.reward.reason
    assert all("tools" not in body and "tool_choice" not in body for body in sent)
    assert "<tools>" in sent[0]["messages"][0]["content"]
    assert (
        sent[-1]["messages"][-1]["role"] == "user"
        and RESPONSE_OPEN in sent[-1]["messages"][-1]["content"]
    )
    assistant = [m for m in episode.trajectory.messages if m["role"] == "assistant"]
    assert (
        assistant[0]["content"].startswith("Next step.")
        and assistant[0]["tool_calls"][0]["function"]["name"] == task.solution[0].tool
    )


def test_a_required_call_in_the_text_protocol_opens_the_turn_with_the_tag() -> None:
    """tool_choice = required: the request ends with an assistant turn holding the tag, continued; the model's text is read after it."""
    task = sample_tasks()[0]
    replies = [
        text(json.dumps({"name": c.tool, "arguments": c.arguments}) + "</tool_call>")
        for c in task.solution
    ]
    with FakeOpenAI(ScriptedPolicy(replies)) as server:
        solver = LLMSolver(
            base_url=server.url, tool_protocol="text", token_prompts=False, tool_choice="required"
        )
        (episode,) = solver.attempt([task], seed=0)
        first = server.requests[0]
    assert episode.reward.value == 1, episode.reward.reason
    assert first["messages"][-1] == {"role": "assistant", "content": CALL_OPEN}
    assert first["continue_final_message"] is True and first["add_generation_prompt"] is False
    assert episode.trajectory.messages[2]["content"].startswith(CALL_OPEN)


def test_a_server_that_renders_no_template_keeps_native_tools_and_the_chat_path() -> None:
    """The loopback fake has no /tokenize: auto settles on native tools and no token prompts, and the role says why."""
    with FakeOpenAI(ScriptedPolicy([])) as server:
        solver = LLMSolver(base_url=server.url)
    assert (solver.client.protocol, solver.client.token_prompts) == ("native", False)
    assert solver.client.template is not None and not solver.client.template.renders


def test_token_prompts_true_against_a_server_that_cannot_is_refused_at_start() -> None:
    """token_prompts = true needs a server that renders chat templates: the error names the server and why."""
    from coevo.agents.llm.turns import LLMConfigError

    with (
        FakeOpenAI(ScriptedPolicy([])) as server,
        pytest.raises(LLMConfigError, match="token_prompts = true"),
    ):
        LLMSolver(base_url=server.url, token_prompts=True)


def test_the_text_protocol_is_for_openai_compatible_servers(monkeypatch) -> None:
    """Anthropic's API calls tools natively: asking it for the text protocol is a configuration error."""
    from coevo.agents.llm.client import LLMClient

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-fake-test-key")
    from coevo.agents.llm.turns import LLMConfigError

    with pytest.raises(LLMConfigError, match="openai"):
        LLMClient("anthropic", tool_protocol="text", base_url="http://127.0.0.1:9")


def test_the_tools_of_a_world_render_for_the_protocol() -> None:
    """Every world tool and submit appear in the system text of a sample task."""
    task = sample_tasks()[0]
    tools = openai_tools(tool_definitions(task.world))
    described = tools_text(tools)
    assert all(f'"name": "{t["function"]["name"]}"' in described for t in tools)


_IMAGINED = '\n<tool_response>\n{"rows": [["made up"]]}\n</tool_response>\nAll done.'


def _solution_with_imagined_results(task) -> list:
    """The task's solution in the text protocol, each call followed by a result the model imagines."""
    return [
        text(
            f"{CALL_OPEN}{json.dumps({'name': c.tool, 'arguments': c.arguments})}{CALL_CLOSE}"
            + _IMAGINED
        )
        for c in task.solution
    ]


def test_text_calls_stop_at_the_closing_tag_on_the_chat_path() -> None:
    """Each request stops at </tool_call> (kept in the text): what the model would write after its call never reaches the conversation."""
    task = sample_tasks()[0]
    with FakeOpenAI(ScriptedPolicy(_solution_with_imagined_results(task))) as server:
        solver = LLMSolver(
            base_url=server.url,
            tool_protocol="text",
            token_prompts=False,
            sampling={"stop": ["\n\n\n"]},
        )
        (episode,) = solver.attempt([task], seed=0)
        sent = server.requests
    assert episode.reward.value == 1, episode.reward.reason
    assert all(body["stop"] == ["\n\n\n", CALL_CLOSE] for body in sent)  # the user's stop kept
    assert all(body["include_stop_str_in_output"] is True for body in sent)
    assert episode.trajectory is not None
    said = [m["content"] for m in episode.trajectory.messages if m["role"] == "assistant"]
    assert said and all(c.endswith(CALL_CLOSE) and RESPONSE_OPEN not in c for c in said)
    assert episode.trajectory.sampling["stop"] == ["\n\n\n", CALL_CLOSE]


def test_text_calls_stop_at_the_closing_tag_token_in_token_out() -> None:
    """Token prompts: each completion ends with the closing tag's tokens, the end-of-turn token after it is the template's (mask 0), and no imagined result is in the trained tokens."""
    task = sample_tasks()[0]
    with FakeOpenAI(
        ScriptedPolicy(_solution_with_imagined_results(task)), renders_templates=True
    ) as server:
        solver = LLMSolver(base_url=server.url, tool_protocol="text", token_prompts=True)
        assert solver.client.token_prompts
        (episode,) = solver.attempt([task], seed=0)
        sent = [body for body in server.requests if "prompt" in body]
    assert episode.reward.value == 1, episode.reward.reason
    assert len(sent) == len(task.solution)
    assert all(b["stop"] == [CALL_CLOSE] and b["include_stop_str_in_output"] for b in sent)
    trajectory = episode.trajectory
    assert trajectory is not None
    laid, why = trajectory.interleaved()
    assert why is None and laid is not None
    closing = encode(CALL_CLOSE)
    for turn, after in zip(trajectory.turns, trajectory.turns[1:], strict=False):
        sampled = turn.completion_ids or []
        assert sampled[-len(closing) :] == closing  # stopped at the tag, which is kept
        end = len(turn.prompt_ids or []) + len(sampled)
        assert (after.prompt_ids or [])[:end] == (turn.prompt_ids or []) + sampled  # it chains
        assert laid.token_ids[end] == SPECIAL[END] and laid.loss_mask[end] == 0  # not sampled
    trained = decode([t for t, m in zip(laid.token_ids, laid.loss_mask, strict=True) if m])
    assert RESPONSE_OPEN not in trained and "made up" not in trained
    assert trained.count(CALL_CLOSE) == len(task.solution)


@pytest.mark.slow  # a process of its own
def test_the_llm_roles_import_no_openai_sdk() -> None:
    """The wire format is coevo's own over httpx2: importing and building the Solver loads no openai SDK."""
    code = (
        "import sys, coevo.agents.llm.solver, coevo.agents.llm.client;"
        "print('openai' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
