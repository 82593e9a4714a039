"""The loopback vLLM fake, checked with the real ``openai`` SDK: shapes, errors, faults, tokens, concurrency."""

from __future__ import annotations

import asyncio
import json
import select
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import openai
import pytest
from coevo.arena import World
from coevo.arena.rendering import SYSTEM, openai_tools, tool_definitions
from coevo.arena.spec import SUBMIT, TaskSpec, ToolCall
from coevo.run.testing import sample_tasks

from tests.agents.fake_openai import (
    END,
    ExplorerPolicy,
    FakeOpenAI,
    MalformedPolicy,
    Reply,
    ScriptedPolicy,
    SolutionPolicy,
    StructuredPolicy,
    call,
    calls,
    decode,
    drop,
    raw_call,
    status,
    text,
)

KEY = "sk-fake-test-key"
MODEL = "fake-model"
FIND = {
    "type": "function",
    "function": {
        "name": "find_customer_by_email",
        "description": "Find a customer by email.",
        "parameters": {
            "type": "object",
            "properties": {"email": {"type": "string"}},
            "required": ["email"],
        },
    },
}
HELLO = [{"role": "user", "content": "Ada (ada@ex.io) wants her order cancelled."}]


def client(server: FakeOpenAI, **options: Any) -> openai.OpenAI:
    options = {"api_key": KEY, "max_retries": 0, **options}
    return openai.OpenAI(base_url=server.url, **options)


def ask(sdk: openai.OpenAI, **request: Any) -> Any:
    request.setdefault("model", MODEL)
    request.setdefault("messages", HELLO)
    return sdk.chat.completions.create(**request)


def echo(message: Any) -> dict[str, Any]:
    """The assistant message as an agent sends it back in the next request (arguments that are not JSON as {}, or vLLM refuses the request)."""
    sent: dict[str, Any] = {"role": "assistant", "content": message.content}
    if message.tool_calls:
        sent["tool_calls"] = [c.model_dump(exclude_none=True) for c in message.tool_calls]
        for call in sent["tool_calls"]:
            try:
                json.loads(call["function"]["arguments"] or "{}")
            except ValueError:
                call["function"]["arguments"] = "{}"
    return sent


def play(sdk: openai.OpenAI, task: TaskSpec, max_steps: int = 12) -> Any:
    """One episode of a plain OpenAI tool-use agent in the task's world; a call that cannot be made is answered as an error."""
    with World(task.world) as world:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": task.instruction},
        ]
        tools = openai_tools(tool_definitions(task.world))
        made: list[ToolCall] = []
        world.reset(task, max_steps=max_steps)
        while len(made) < max_steps and not world.done:
            message = ask(sdk, messages=messages, tools=tools).choices[0].message
            messages.append(echo(message))
            if not message.tool_calls:
                break
            for tool_call in message.tool_calls:
                try:
                    arguments = json.loads(tool_call.function.arguments)
                except ValueError:
                    arguments = None
                if not isinstance(arguments, dict):
                    result = "error: the arguments are not a JSON object"
                else:
                    made.append(ToolCall(tool_call.function.name, arguments))
                    obs = world.step(made[-1])
                    result = obs.text() if obs.ok else f"error: {obs.error}"
                messages.append({"role": "tool", "tool_call_id": tool_call.id, "content": result})
                if world.done:
                    break
        return world.run(task, made, max_steps=max_steps)


# --------------------------------------------------------------------------- endpoints and errors


def test_the_served_models_are_listed_as_vllm_lists_them() -> None:
    """GET /v1/models lists every served model in order, owned by vllm, with a context length."""
    with FakeOpenAI(models=("m-a", "m-b")) as server, client(server) as sdk:
        models = list(sdk.models.list())
    assert [m.id for m in models] == ["m-a", "m-b"]
    assert all(m.owned_by == "vllm" and m.object == "model" for m in models)
    assert models[0].model_extra["max_model_len"] == 32768
    assert models[0].model_extra["root"] == "m-a"


def test_a_request_without_the_key_is_refused_with_401() -> None:
    """With an api_key set, models and chat without (or with another) bearer key get 401 and the error JSON."""
    with FakeOpenAI() as server:
        with client(server, api_key="sk-wrong") as sdk:
            with pytest.raises(openai.AuthenticationError) as refused:
                ask(sdk)
            with pytest.raises(openai.AuthenticationError):
                sdk.models.list()
        assert refused.value.status_code == 401
        assert set(refused.value.body) == {"message", "type", "param", "code"}
        assert refused.value.body["code"] == 401
        with client(server) as sdk:
            assert ask(sdk).choices[0].message is not None
    with FakeOpenAI(api_key=None) as server, client(server, api_key="anything") as sdk:
        assert ask(sdk).choices, "with no api_key any key is accepted"


def test_an_unknown_model_is_a_404_naming_it() -> None:
    """A model not served is answered 404 NotFoundError with vLLM's message naming it."""
    with (
        FakeOpenAI() as server,
        client(server) as sdk,
        pytest.raises(openai.NotFoundError) as missing,
    ):
        ask(sdk, model="gpt-nope")
    assert missing.value.body["message"] == "The model `gpt-nope` does not exist."
    assert missing.value.body["type"] == "NotFoundError"
    assert missing.value.body["code"] == 404


def test_a_malformed_body_is_a_400_and_unknown_fields_are_kept() -> None:
    """A body that is not JSON gets 400; a body with fields vLLM does not know is served and recorded as sent."""
    with FakeOpenAI(api_key=None) as server:
        request = urllib.request.Request(
            f"{server.url}/chat/completions",
            data=b'{"model": "fake-model", "messages": [',
            headers={"content-type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError) as bad:
            urllib.request.urlopen(request, timeout=5)
        assert bad.value.code == 400
        assert json.loads(bad.value.read())["error"]["code"] == 400
        with client(server) as sdk:
            ask(sdk, extra_body={"chat_template_kwargs": {"enable_thinking": False}})
        assert server.requests[-1]["chat_template_kwargs"] == {"enable_thinking": False}


# --------------------------------------------------------------------------- replies


def test_a_tool_call_round_trips_through_the_sdk() -> None:
    """A call reply arrives as message.tool_calls with vLLM's ids and finish_reason; the request and its headers are recorded."""
    policy = ScriptedPolicy([call("find_customer_by_email", email="ada@ex.io")])
    with FakeOpenAI(policy) as server, client(server) as sdk:
        completion = ask(sdk, tools=[FIND], tool_choice="auto")
    choice = completion.choices[0]
    assert completion.id.startswith("chatcmpl-") and completion.object == "chat.completion"
    assert completion.model == MODEL
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    (tool_call,) = choice.message.tool_calls
    assert tool_call.id.startswith("chatcmpl-tool-") and tool_call.type == "function"
    assert tool_call.function.name == "find_customer_by_email"
    assert json.loads(tool_call.function.arguments) == {"email": "ada@ex.io"}
    assert server.requests[0]["tools"] == [FIND]
    assert server.headers[0]["authorization"] == f"Bearer {KEY}"
    assert completion.usage.total_tokens == (
        completion.usage.prompt_tokens + completion.usage.completion_tokens
    )


def test_a_text_answer_has_an_empty_tool_call_list_as_vllm_sends() -> None:
    """A text reply has content, finish_reason stop, and tool_calls == [] (vLLM's default, not null)."""
    with FakeOpenAI(ScriptedPolicy([text("All done.")])) as server, client(server) as sdk:
        choice = ask(sdk).choices[0]
    assert choice.message.content == "All done."
    assert choice.message.tool_calls == []
    assert choice.finish_reason == "stop"


def test_parallel_tool_calls_come_in_one_turn() -> None:
    """calls(...) makes several tool calls in one message, each with its own id, in order."""
    reply = calls(
        ("find_customer_by_email", {"email": "a@x.io"}), ("list_orders", {"customer_id": 1})
    )
    with FakeOpenAI(ScriptedPolicy([reply])) as server, client(server) as sdk:
        message = ask(sdk, tools=[FIND]).choices[0].message
    assert [c.function.name for c in message.tool_calls] == [
        "find_customer_by_email",
        "list_orders",
    ]
    assert [json.loads(c.function.arguments) for c in message.tool_calls] == [
        {"email": "a@x.io"},
        {"customer_id": 1},
    ]
    assert len({c.id for c in message.tool_calls}) == 2


def test_invalid_json_arguments_arrive_as_the_exact_text() -> None:
    """raw_call's arguments are passed through byte for byte, even when they are not JSON."""
    broken = '{"email": "a@b.c"'
    policy = ScriptedPolicy([raw_call("find_customer_by_email", broken)])
    with FakeOpenAI(policy) as server, client(server) as sdk:
        message = ask(sdk, tools=[FIND]).choices[0].message
    assert message.tool_calls[0].function.arguments == broken


def test_a_reply_without_usage_has_no_usage() -> None:
    """Reply(usage=False): the response has no usage key, and the SDK gives usage None."""
    policy = ScriptedPolicy([Reply(content="hi", usage=False)])
    with FakeOpenAI(policy) as server, client(server) as sdk:
        completion = ask(sdk)
    assert completion.usage is None
    assert completion.choices[0].message.content == "hi"


def test_max_tokens_cuts_the_completion_with_finish_reason_length() -> None:
    """A completion longer than max_tokens is cut there: finish_reason length, the cut text as content, no tool calls."""
    replies = [call("find_customer_by_email", email="ada@ex.io")] * 2
    with FakeOpenAI(ScriptedPolicy(replies)) as server, client(server) as sdk:
        cut = ask(sdk, tools=[FIND], max_tokens=12)
        cut_too = ask(sdk, tools=[FIND], max_completion_tokens=5)
    assert cut.choices[0].finish_reason == "length"
    assert cut.choices[0].message.content == "<tool_call>\n"
    assert cut.choices[0].message.tool_calls == []
    assert cut.usage.completion_tokens == 12
    assert cut_too.choices[0].message.content == "<tool"


# --------------------------------------------------------------------------- faults and restarts


def test_faults_answer_in_order_before_the_policy() -> None:
    """Queued faults answer the next requests in order (429 with and without retry-after, 500, 503, a drop), then the policy does."""
    with FakeOpenAI(ScriptedPolicy([text("finally")])) as server, client(server) as sdk:
        server.faults.extend(
            [status(429, retry_after=1.5), status(429), status(500), status(503), drop()]
        )
        with pytest.raises(openai.RateLimitError) as limited:
            ask(sdk)
        assert limited.value.response.headers["retry-after"] == "1.5"
        assert limited.value.body["type"] == "RateLimitError"
        with pytest.raises(openai.RateLimitError) as again:
            ask(sdk)
        assert "retry-after" not in again.value.response.headers
        with pytest.raises(openai.InternalServerError) as crashed:
            ask(sdk)
        assert crashed.value.status_code == 500
        with pytest.raises(openai.InternalServerError) as busy:
            ask(sdk)
        assert busy.value.status_code == 503
        with pytest.raises(openai.APIConnectionError):
            ask(sdk)
        assert ask(sdk).choices[0].message.content == "finally"
        assert not server.faults
        assert len(server.requests) == 6


def test_the_sdk_retries_honour_retry_after() -> None:
    """With retries on, the SDK waits the given retry-after and gets through; both attempts reach the fake."""
    with FakeOpenAI(ScriptedPolicy([text("ok")])) as server:
        server.faults.append(status(503, retry_after=0.05))
        with client(server, max_retries=2) as sdk:
            assert ask(sdk).choices[0].message.content == "ok"
        assert len(server.requests) == 2


def test_stop_refuses_connections_and_start_serves_the_same_url_again() -> None:
    """After stop() a call fails with APIConnectionError (even over a kept-alive connection); start() serves on the same URL."""
    with FakeOpenAI() as server, client(server) as sdk:
        url = server.url
        assert ask(sdk, tools=[FIND]).choices
        server.stop()
        with pytest.raises(openai.APIConnectionError):
            ask(sdk, tools=[FIND])
        server.start()
        assert server.url == url
        assert ask(sdk, tools=[FIND]).choices


# --------------------------------------------------------------------------- token ids and log-probabilities


def turn_two(template: str) -> tuple[list[int], list[int], list[int]]:
    """Turn 1's prompt ids and completion ids, and turn 2's prompt ids, of a two-turn tool-use conversation."""
    policy = ScriptedPolicy([call("find_customer_by_email", email="ada@ex.io"), text("Done.")])
    extra = {"return_token_ids": True}
    with FakeOpenAI(policy, template=template) as server, client(server) as sdk:
        first = ask(sdk, tools=[FIND], extra_body=extra)
        message = first.choices[0].message
        messages = [
            *HELLO,
            echo(message),
            {"role": "tool", "tool_call_id": message.tool_calls[0].id, "content": "id 1"},
        ]
        second = ask(sdk, messages=messages, tools=[FIND], extra_body=extra)
    first_data = first.to_dict()
    return (
        first_data["prompt_token_ids"],
        first_data["choices"][0]["token_ids"],
        second.to_dict()["prompt_token_ids"],
    )


def test_token_ids_and_logprobs_come_only_when_asked() -> None:
    """Without return_token_ids and logprobs there are none; with them, one id and one log-probability per token."""
    with FakeOpenAI(ScriptedPolicy([text("Hello there.")] * 3)) as server, client(server) as sdk:
        plain = ask(sdk)
        rich = ask(sdk, logprobs=True, top_logprobs=2, extra_body={"return_token_ids": True})
        as_ids = ask(sdk, logprobs=True, extra_body={"return_tokens_as_token_ids": True})
    assert plain.model_extra["prompt_token_ids"] is None
    assert plain.choices[0].model_extra["token_ids"] is None
    assert plain.choices[0].logprobs is None
    prompt_ids = rich.model_extra["prompt_token_ids"]
    ids = rich.choices[0].model_extra["token_ids"]
    assert len(prompt_ids) == rich.usage.prompt_tokens and len(ids) == rich.usage.completion_tokens
    assert decode(prompt_ids).endswith("<|im_start|>assistant\n")
    assert decode(ids) == "Hello there." + END
    entries = rich.choices[0].logprobs.content
    assert len(entries) == len(ids)
    assert all(-5 < e.logprob < 0 and len(e.top_logprobs) == 2 for e in entries)
    assert "".join(e.token for e in entries) == "Hello there." + END
    assert [e.logprob for e in entries] == [
        e.logprob for e in as_ids.choices[0].logprobs.content
    ], "log-probabilities are deterministic"
    assert as_ids.choices[0].logprobs.content[0].token == f"token_id:{ids[0]}"


def test_a_stable_template_keeps_the_prefix_property_and_reformat_breaks_it() -> None:
    """Under "stable" turn 2's prompt ids start with turn 1's prompt + completion ids; under "reformat" they do not."""
    prompt, completion, later = turn_two("stable")
    assert later[: len(prompt) + len(completion)] == prompt + completion
    prompt, completion, later = turn_two("reformat")
    assert later[: len(prompt)] == prompt, "only the re-serialised arguments differ"
    assert later[: len(prompt) + len(completion)] != prompt + completion


# --------------------------------------------------------------------------- concurrency and the command line


def test_concurrent_requests_are_served_at_once() -> None:
    """32 requests sleeping 0.2 s each are in flight together (the server does not serialise them)."""

    async def burst(server: FakeOpenAI) -> list[Any]:
        async with openai.AsyncOpenAI(base_url=server.url, api_key=KEY, max_retries=0) as sdk:
            return await asyncio.gather(
                *(
                    sdk.chat.completions.create(model=MODEL, messages=HELLO, tools=[FIND])
                    for _ in range(32)
                )
            )

    with FakeOpenAI(latency=0.2) as server:
        completions = asyncio.run(burst(server))
    assert len(completions) == 32 and len(server.requests) == 32
    assert server.max_in_flight >= 16, server.max_in_flight


@pytest.mark.slow  # a process of its own
def test_the_command_line_prints_one_line_and_serves() -> None:
    """Run as a script, it prints `listening on URL` once it accepts connections, and answers there."""
    script = Path(__file__).with_name("fake_openai.py")
    process = subprocess.Popen(
        [sys.executable, str(script), "--port", "0", "--latency", "0.01", "--model", MODEL],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        ready, _, _ = select.select([process.stdout], [], [], 20)
        assert ready, "no line within 20 s"
        line = process.stdout.readline()
        prefix = "listening on http://127.0.0.1:"
        assert line.startswith(prefix) and line.endswith("/v1\n"), line
        url = line.removeprefix("listening on ").strip()
        with openai.OpenAI(base_url=url, api_key="any", max_retries=0) as sdk:
            message = ask(sdk, tools=[FIND]).choices[0].message
        assert message.tool_calls[0].function.name == "find_customer_by_email"
    finally:
        process.terminate()
        out, err = process.communicate(timeout=10)
    assert out == "", "exactly one line is printed"
    assert process.returncode == 0, err


# --------------------------------------------------------------------------- policies


@pytest.mark.parametrize("parallel", [1, 2])
def test_the_solution_policy_earns_reward_1_in_real_episodes(parallel: int) -> None:
    """An OpenAI agent loop against SolutionPolicy plays every sample task to reward 1, one or two calls a turn."""
    tasks = sample_tasks()
    with FakeOpenAI(SolutionPolicy(tasks, parallel=parallel)) as server, client(server) as sdk:
        episodes = [play(sdk, task) for task in tasks]
        unknown = ask(sdk).choices[0].message.content
    assert [e.reward.value for e in episodes] == [1] * len(tasks)
    assert [len(e.calls) for e in episodes] == [len(t.solution) for t in tasks]
    assert unknown == "I cannot help with that."


def test_the_malformed_policy_never_earns_reward() -> None:
    """MalformedPolicy's episodes end with reward 0; its turns cycle through the five unusable kinds."""
    tasks = sample_tasks()
    with FakeOpenAI(MalformedPolicy()) as server, client(server) as sdk:
        episodes = [play(sdk, task) for task in tasks]
        tools = openai_tools(tool_definitions(tasks[0].world))
        names = {t["function"]["name"] for t in tools}
        messages: list[dict[str, Any]] = [{"role": "user", "content": tasks[0].instruction}]
        turns = []
        for _ in range(6):
            choice = ask(sdk, messages=messages, tools=tools).choices[0]
            turns.append(choice)
            messages.append(echo(choice.message))
    assert [e.reward.value for e in episodes] == [0] * len(tasks)
    invalid, missing, unknown, silent, cut, again = turns
    with pytest.raises(ValueError):
        json.loads(invalid.message.tool_calls[0].function.arguments)
    first = next(
        t for t in tools if t["function"]["name"] == missing.message.tool_calls[0].function.name
    )
    required = set(first["function"]["parameters"].get("required", []))
    assert required - set(json.loads(missing.message.tool_calls[0].function.arguments))
    assert unknown.message.tool_calls[0].function.name not in names
    assert silent.message.tool_calls == [] and silent.message.content
    assert cut.finish_reason == "length" and cut.message.tool_calls == []
    assert (
        again.message.tool_calls[0].function.arguments
        == invalid.message.tool_calls[0].function.arguments
    )
    assert all(c.function.name != SUBMIT for t in turns for c in t.message.tool_calls)


def test_the_explorer_calls_a_tool_then_submits() -> None:
    """ExplorerPolicy calls the first non-submit tool with schema-made arguments for steps-1 turns, then submit {}."""
    tools = [FIND, *openai_tools(tool_definitions(sample_tasks()[0].world))[-1:]]
    with FakeOpenAI(ExplorerPolicy(steps=3)) as server, client(server) as sdk:
        messages: list[dict[str, Any]] = list(HELLO)
        made = []
        for _ in range(3):
            message = ask(sdk, messages=messages, tools=tools).choices[0].message
            messages.append(echo(message))
            messages += [
                {"role": "tool", "tool_call_id": c.id, "content": "[]"} for c in message.tool_calls
            ]
            made += [
                (c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls
            ]
    assert made == [
        ("find_customer_by_email", {"email": "x"}),
        ("find_customer_by_email", {"email": "x"}),
        (SUBMIT, {}),
    ]


def test_the_structured_policy_answers_the_named_function() -> None:
    """StructuredPolicy calls the function tool_choice names with its answer; an unknown name gets text."""
    review = {
        "type": "function",
        "function": {"name": "review", "parameters": {"type": "object", "properties": {}}},
    }
    policy = StructuredPolicy(
        {"review": {"ambiguous": False}, "grade": lambda body: {"n": len(body["messages"])}}
    )
    named = {"type": "function", "function": {"name": "review"}}
    with FakeOpenAI(policy) as server, client(server) as sdk:
        answered_choice = ask(sdk, tools=[review], tool_choice=named).choices[0]
        answered = answered_choice.message
        computed = (
            ask(
                sdk, tools=[review], tool_choice={"type": "function", "function": {"name": "grade"}}
            )
            .choices[0]
            .message
        )
        unknown = (
            ask(
                sdk, tools=[review], tool_choice={"type": "function", "function": {"name": "other"}}
            )
            .choices[0]
            .message
        )
    assert answered.tool_calls[0].function.name == "review"
    assert answered_choice.finish_reason == "stop", "vLLM ends a named-function call with stop"
    assert json.loads(answered.tool_calls[0].function.arguments) == {"ambiguous": False}
    assert json.loads(computed.tool_calls[0].function.arguments) == {"n": 1}
    assert unknown.content == "no answer" and unknown.tool_calls == []


def test_the_scripted_policy_hands_each_reply_out_once_across_threads() -> None:
    """Under concurrent requests every scripted reply is given exactly once, then "done"."""
    policy = ScriptedPolicy([text(str(i)) for i in range(20)])
    answers: list[str] = []
    lock = threading.Lock()
    with FakeOpenAI(policy) as server:

        def worker() -> None:
            with client(server) as sdk:
                for _ in range(3):
                    content = ask(sdk).choices[0].message.content
                    with lock:
                        answers.append(content)

        threads = [threading.Thread(target=worker) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert sorted(a for a in answers if a != "done") == sorted(str(i) for i in range(20))
    assert answers.count("done") == 4


def test_a_request_whose_history_holds_arguments_that_are_not_json_is_refused() -> None:
    """As vLLM does: it parses the calls of earlier turns, and answers 400 when one is not JSON."""
    with FakeOpenAI(ScriptedPolicy([])) as server, client(server) as sdk:
        history = [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "f", "arguments": '{"a": '},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "error: not JSON"},
        ]
        with pytest.raises(openai.BadRequestError):
            ask(sdk, messages=history)


def test_token_prompts_and_stop_strings_are_answered_as_vllm_does() -> None:
    """/v1/completions takes token ids and ends with the end-of-turn id (not in the text); a stop string ends the text before it, or after it when asked, and the ids run through the token that completed it."""
    from tests.agents.fake_openai import SPECIAL, encode

    said = 'Calling.<tool_call>{"name": "f"}</tool_call> and then more'
    with FakeOpenAI(ScriptedPolicy([text(said)] * 3), renders_templates=True) as server:
        sdk = openai.OpenAI(base_url=server.url, api_key="sk-fake-test-key", max_retries=0)
        asked = {"return_token_ids": True}
        whole = sdk.completions.create(model="fake-model", prompt=encode("hi"), extra_body=asked)
        stop = {**asked, "stop": ["</tool_call>"]}
        cut = sdk.completions.create(model="fake-model", prompt=encode("hi"), extra_body=stop)
        kept = sdk.completions.create(
            model="fake-model",
            prompt=encode("hi"),
            extra_body={**stop, "include_stop_str_in_output": True},
        )
        rendered = urllib.request.urlopen(  # vLLM's /tokenize, at the server's root
            urllib.request.Request(
                server.url.removesuffix("/v1") + "/tokenize",
                data=json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode(),
                headers={"Authorization": "Bearer sk-fake-test-key"},
            )
        )
        tokens = json.loads(rendered.read())["tokens"]
    first = whole.choices[0]
    assert first.text == said and first.model_extra["token_ids"] == [*encode(said), SPECIAL[END]]
    through = encode(said[: said.index("</tool_call>") + len("</tool_call>")])
    assert cut.choices[0].text == said[: said.index("</tool_call>")]
    assert cut.choices[0].model_extra["token_ids"] == through
    assert kept.choices[0].text.endswith("</tool_call>")
    assert kept.choices[0].model_extra["token_ids"] == through
    assert kept.choices[0].model_extra["stop_reason"] == "</tool_call>"
    assert decode(tokens) == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert tokens.count(SPECIAL[END]) == 1  # a special token is one id
