"""The OpenAI-compatible server on the embedded SmolLM2-135M, through the official `openai`
client (and plain httpx for the errors); outputs checked with jsonschema and re.fullmatch."""
from __future__ import annotations

import json
import re
import socket
import threading
import time
from types import SimpleNamespace
from typing import Literal

import httpx
import jsonschema
import openai
import pydantic
import pytest
import uvicorn
from compile_hooks import GATE, boot_workers, gated
from oracles import ExclusiveUse, in_threads

from structgen.engine import LLM, BeamSearchParams, SamplingParams
from structgen.engine.async_engine import AsyncEngine
from structgen.engine.openai_protocol import FINISH, TOOL_CALL_BEGIN, TOOL_CALL_END, constraint_of, tool_calls_of
from structgen.engine.server import build_app
from structgen.fsm import ConstraintError, RegexError

MODEL = "smollm2"
MAX_MODEL_LEN = 512
MESSAGES = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]


def start(engine):
    """Serve `engine` on a free loopback port: (url, uvicorn server, its thread)."""
    app = build_app(engine, MODEL, max_body_bytes=1 << 20)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not srv.started:
        assert thread.is_alive() and time.monotonic() < deadline, "server did not start"
        time.sleep(0.05)
    return f"http://127.0.0.1:{port}", srv, thread


def stop(srv, thread, engine):
    srv.should_exit = True
    thread.join(30)
    engine.close()


@pytest.fixture(scope="module")
def server(smol_folder):
    llm = LLM(smol_folder, max_num_seqs=8, block_size=16, num_kv_blocks=256, max_model_len=MAX_MODEL_LEN)
    engine = AsyncEngine(llm, compile_fn=gated)
    url, srv, thread = start(engine)
    yield SimpleNamespace(url=url, llm=llm, engine=engine,
                          client=openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0))
    stop(srv, thread, engine)


def wait_idle(llm, timeout=30.0):
    """Until the engine has no sequence left (the loop runs in its own thread)."""
    deadline = time.monotonic() + timeout
    while llm.scheduler.has_unfinished() and time.monotonic() < deadline:
        time.sleep(0.05)
    bm = llm.block_manager
    return not llm.scheduler.has_unfinished() and bm.num_free_blocks == bm.num_blocks


def test_models_and_health(server):
    assert [m.id for m in server.client.models.list().data] == [MODEL]
    assert httpx.get(f"{server.url}/health").json() == {"status": "ok"}


def test_chat_completion_matches_engine(server):
    r = server.client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=12, temperature=0)
    want = server.llm.chat(MESSAGES, SamplingParams(max_tokens=12))[0]
    assert r.choices[0].message.content == want.text
    assert r.choices[0].finish_reason in ("stop", "length")
    assert r.usage.completion_tokens == len(want.token_ids)
    assert r.usage.prompt_tokens == len(want.prompt_token_ids)


def test_streaming_concatenates_to_greedy_text(server):
    plain = server.client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=16, temperature=0)
    chunks = list(server.client.chat.completions.create(
        model=MODEL, messages=MESSAGES, max_tokens=16, temperature=0, stream=True,
        stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == plain.choices[0].message.content
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] \
        == [plain.choices[0].finish_reason]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == plain.usage.completion_tokens
    assert all(c.usage is None for c in chunks[:-1])


def test_completions_with_logprobs(server):
    r = server.client.completions.create(model=MODEL, prompt="The capital of France is", max_tokens=8,
                                         temperature=0, logprobs=2)
    want = server.llm.generate("The capital of France is", SamplingParams(max_tokens=8))[0]
    assert r.choices[0].text == want.text
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == len(want.token_ids)
    for top, chosen in zip(lp.top_logprobs, lp.token_logprobs):   # greedy: the chosen is the top
        assert len(top) == 2 and max(top.values()) == pytest.approx(chosen)


def test_parse_pydantic(server):
    class Verdict(pydantic.BaseModel):
        answer: Literal["yes", "no"]
        sure: bool

    r = server.client.chat.completions.parse(
        model=MODEL, messages=[{"role": "user", "content": "Is Paris in France? Answer in JSON."}],
        response_format=Verdict, max_tokens=32, temperature=0)
    assert isinstance(r.choices[0].message.parsed, Verdict)


WEATHER = {"type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "London"]},
                                            "unit": {"type": "string", "enum": ["C", "F"]}},
           "required": ["city", "unit"], "additionalProperties": False}
CLOCK = {"type": "object", "properties": {"zone": {"type": "string", "enum": ["UTC", "CET"]}},
         "required": ["zone"], "additionalProperties": False}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
                                           "parameters": WEATHER}},
         {"type": "function", "function": {"name": "get_time", "description": "Time in a zone",
                                           "parameters": CLOCK}}]


@pytest.mark.parametrize("tool_choice", ["required", {"type": "function", "function": {"name": "get_time"}}],
                         ids=["required", "named"])
def test_tool_call(server, tool_choice):
    r = server.client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "What is the weather in Paris?"}],
        tools=TOOLS, tool_choice=tool_choice, max_tokens=48, temperature=0)
    c = r.choices[0]
    assert c.finish_reason == "tool_calls" and c.message.content is None
    (call,) = c.message.tool_calls
    assert call.type == "function" and call.id
    schemas = {"get_weather": WEATHER, "get_time": CLOCK}
    if isinstance(tool_choice, dict):
        assert call.function.name == "get_time"
    jsonschema.validate(json.loads(call.function.arguments), schemas[call.function.name])


CALL_PROMPT = [{"role": "user", "content": "Reply with <tool_call> and the JSON call of get_time for zone UTC."}]
TEXT_PROMPT = [{"role": "user", "content": "What is the weather in Paris?"}]
SCHEMAS = {"get_weather": WEATHER, "get_time": CLOCK}


def hermes(name, arguments) -> str:
    """A call in the format of tool_choice "auto" (keys in the schema's order, compact)."""
    return f"{TOOL_CALL_BEGIN}{json.dumps({'name': name, 'arguments': arguments}, separators=(',', ':'))}{TOOL_CALL_END}"


def test_auto_constraint_is_text_or_a_valid_call(server):
    """The "auto" constraint takes text without the marker, or one call whose arguments
    jsonschema accepts; a call with arguments jsonschema refuses, an unknown name, the
    marker inside text or a call without its end marker are refused."""
    spec, mode = constraint_of({"tools": TOOLS, "tool_choice": "auto"})
    assert mode == "auto"
    auto = server.llm.constraints.get(spec)
    tok = server.llm.tokenizer

    def accepts(text):
        m = auto.matcher()
        return m.accept_tokens(tok.encode(text, add_special_tokens=False)) and m.is_accepting()

    for text in ("The weather in Paris is sunny.", "a <tool which is not one", "{\"name\": \"get_time\"}", ""):
        assert accepts(text), text
    arguments = [("get_weather", {"city": "Paris", "unit": "C"}), ("get_weather", {"city": "Rome", "unit": "C"}),
                 ("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Paris", "unit": "C", "x": 1}),
                 ("get_weather", {"city": 3, "unit": "F"}), ("get_time", {"zone": "CET"}), ("get_time", {"zone": "PST"}),
                 ("get_time", {"city": "Paris", "unit": "C"})]
    verdicts = []
    for name, args in arguments:
        valid = jsonschema.Draft202012Validator(SCHEMAS[name]).is_valid(args)
        assert accepts(hermes(name, args)) == valid, (name, args)
        verdicts.append(valid)
    assert True in verdicts and False in verdicts
    for bad in (hermes("get_date", {}), "Sure. " + hermes("get_time", {"zone": "UTC"}),
                hermes("get_time", {"zone": "UTC"})[:-len(TOOL_CALL_END)]):
        assert not accepts(bad), bad


def test_auto_outputs_are_parsed():
    call = tool_calls_of(hermes("get_time", {"zone": "UTC"}), "auto")
    assert [(c["type"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in call] \
        == [("function", "get_time", {"zone": "UTC"})]
    assert tool_calls_of("It is sunny.", "auto") is None
    assert tool_calls_of(hermes("get_time", {"zone": "UTC"})[:-3], "auto") is None     # cut short


@pytest.mark.parametrize("prompt", ["call", "text"])
def test_tool_choice_auto_end_to_end(server, prompt):
    """One request that calls (tool_calls with schema-valid arguments, no content) and one
    that answers in text (content without the marker); streamed, the same."""
    kw = dict(model=MODEL, messages=CALL_PROMPT if prompt == "call" else TEXT_PROMPT, tools=TOOLS,
              tool_choice="auto", max_tokens=48, temperature=0)
    c = server.client.chat.completions.create(**kw).choices[0]
    chunks = [ch for ch in server.client.chat.completions.create(**kw, stream=True) if ch.choices]
    streamed_text = "".join(ch.choices[0].delta.content or "" for ch in chunks)
    streamed_calls = [t for ch in chunks for t in ch.choices[0].delta.tool_calls or []]
    if prompt == "call":
        assert c.finish_reason == "tool_calls" and c.message.content is None
        (call,) = c.message.tool_calls
        jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])
        (s,) = streamed_calls
        assert (s.function.name, s.function.arguments) == (call.function.name, call.function.arguments)
        assert streamed_text == "" and chunks[-1].choices[0].finish_reason == "tool_calls"
    else:
        assert c.finish_reason in ("stop", "length") and not c.message.tool_calls
        assert "<tool_call>" not in c.message.content
        assert streamed_text == c.message.content and not streamed_calls


def test_structured_outputs_regex_and_n2(server):
    r = server.client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Give a three digit number."}], max_tokens=8,
        n=2, temperature=0.9, seed=3, extra_body={"structured_outputs": {"regex": "[0-9]{3}"}})
    assert [c.index for c in r.choices] == [0, 1]
    for c in r.choices:
        assert re.fullmatch("[0-9]{3}", c.message.content)


def test_stream_disconnect_aborts(server):
    body = {"model": MODEL, "messages": MESSAGES, "max_tokens": 400, "ignore_eos": True, "stream": True}
    with httpx.stream("POST", f"{server.url}/v1/chat/completions", json=body, timeout=60) as r:
        assert r.status_code == 200
        lines = r.iter_lines()
        got = []
        for line in lines:
            if line.startswith("data:"):
                got.append(line)
            if len(got) >= 3:
                break
    assert wait_idle(server.llm)
    assert server.engine.metrics.requests.get("aborted", 0) >= 1


def test_disconnect_aborts_non_streamed(server):
    before = server.engine.metrics.requests.get("aborted", 0)
    body = {"model": MODEL, "messages": MESSAGES, "max_tokens": 400, "ignore_eos": True}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=httpx.Timeout(60, read=1.0))
    assert wait_idle(server.llm)
    assert server.engine.metrics.requests.get("aborted", 0) == before + 1


def post(server, body, path="/v1/chat/completions", **kw):
    return httpx.post(f"{server.url}{path}", json=body, timeout=60, **kw)


def error_message(r):
    return r.json()["error"]["message"]


def test_unknown_field_is_400(server):
    r = post(server, {"model": MODEL, "messages": MESSAGES, "max_tokens": 4, "temperture": 0})
    assert r.status_code == 400 and "temperture" in error_message(r)
    r = post(server, {"model": MODEL, "messages": MESSAGES, "max_tokens": 4,
                      "response_format": {"type": "json_schema", "json_schema": {"schema": {}, "stict": True}}})
    assert r.status_code == 400 and "stict" in error_message(r)


def test_bad_regex_is_400_with_position(server):
    with pytest.raises(RegexError) as oracle:
        server.llm.constraints.get(("regex", "ab[c-"))
    assert oracle.value.pos is not None
    for stream in (False, True):
        r = post(server, {"model": MODEL, "messages": MESSAGES, "max_tokens": 4, "stream": stream,
                          "structured_outputs": {"regex": "ab[c-"}})
        assert r.status_code == 400 and error_message(r) == str(oracle.value)
        assert f"position {oracle.value.pos}" in error_message(r)


def test_bad_schema_is_400_with_pointer(server):
    schema = {"type": "object", "properties": {"a": {"type": "strnig"}}}
    with pytest.raises(ConstraintError) as oracle:
        server.llm.constraints.get(("json", schema))
    r = post(server, {"model": MODEL, "messages": MESSAGES, "max_tokens": 4,
                      "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}})
    assert r.status_code == 400 and error_message(r) == str(oracle.value)
    assert "#/properties/a" in error_message(r)


def test_bad_grammar_is_400(server):
    r = post(server, {"model": MODEL, "prompt": "x", "max_tokens": 4,
                      "structured_outputs": {"grammar": "start: foo\n"}}, path="/v1/completions")
    assert r.status_code == 400 and "foo" in error_message(r)


def test_compile_over_budget_is_400_naming_it(server, monkeypatch, tmp_path):
    boot_workers(server.engine)
    monkeypatch.setattr(server.engine, "compile_timeout_s", 0.2)
    gate = tmp_path / "gate"
    try:
        r = post(server, {"model": MODEL, "messages": MESSAGES, "max_tokens": 4,
                          "structured_outputs": {"json": {"enum": ["red", "green"], "description": f"{GATE}{gate}"}}})
        assert r.status_code == 400 and "budget of 0.2 s" in error_message(r)
    finally:
        gate.touch()


def test_oversize_body_is_413(server):
    body = {"model": MODEL, "messages": [{"role": "user", "content": "a" * (1 << 20)}], "max_tokens": 4}
    r = post(server, body)
    assert r.status_code == 413 and "limit" in error_message(r)


def test_too_long_prompt_is_400(server):
    r = post(server, {"model": MODEL, "messages": [{"role": "user", "content": "hello " * MAX_MODEL_LEN}],
                      "max_tokens": 4})
    assert r.status_code == 400 and "max_model_len" in error_message(r)


def test_two_constraints_and_wrong_model(server):
    r = post(server, {"model": MODEL, "messages": MESSAGES, "structured_outputs": {"regex": "a"},
                      "response_format": {"type": "json_object"}})
    assert r.status_code == 400 and "only one constraint" in error_message(r)
    r = post(server, {"model": "gpt-4", "messages": MESSAGES})
    assert r.status_code == 404


def test_tools_with_response_format_need_tool_choice_none(server):
    body = {"model": MODEL, "messages": MESSAGES, "max_tokens": 32, "tools": TOOLS,
            "response_format": {"type": "json_schema", "json_schema": {"name": "c", "schema": CLOCK}}}
    r = post(server, body)
    assert r.status_code == 400 and "tool_choice" in error_message(r) and '"none"' in error_message(r)
    r = post(server, {**body, "tool_choice": "none"})
    assert r.status_code == 200 and r.json()["choices"][0]["finish_reason"] == "stop"
    jsonschema.validate(json.loads(r.json()["choices"][0]["message"]["content"]), CLOCK)


def test_engine_tokenizer_is_never_shared_with_the_event_loop(server):
    """Many requests from several threads (chat templates and prompts encoded, logprobs
    decoded on the event loop) while the engine decodes: no two threads are ever inside
    the engine's tokenizer at once."""
    llm = server.llm.with_config()              # (same weights; its own engine and server)
    llm.tokenizer = spy = ExclusiveUse(llm.tokenizer)
    engine = AsyncEngine(llm)
    url, srv, thread = start(engine)

    def worker(k):
        for i in range(3):
            body = {"model": MODEL, "max_tokens": 12, "temperature": 0}
            if (k + i) % 2:
                r = httpx.post(f"{url}/v1/completions", json={**body, "prompt": f"Count to {k}:", "logprobs": 2},
                               timeout=120)
            else:
                r = httpx.post(f"{url}/v1/chat/completions", timeout=120, json={
                    **body, "logprobs": True, "top_logprobs": 2, "stream": bool(i % 2),
                    "messages": [{"role": "user", "content": f"Say {k} in words, please. " * (k + 1)}]})
            assert r.status_code == 200, r.text

    try:
        errors = in_threads(worker, 6)
    finally:
        stop(srv, thread, engine)
    assert not errors
    assert spy.calls > 50 and not spy.overlaps, spy.overlaps[:3]


def test_metrics(server):
    text = httpx.get(f"{server.url}/metrics").text
    completed = re.search(r'^structgen_requests_total\{outcome="completed"\} (\d+)$', text, re.M)
    assert completed and int(completed.group(1)) > 0
    for name in ("structgen_prompt_tokens_total", "structgen_generation_tokens_total",
                 "structgen_num_requests_running", "structgen_num_requests_waiting",
                 "structgen_kv_cache_usage_ratio", "structgen_time_to_first_token_seconds_count"):
        assert re.search(rf"^{name} \S+$", text, re.M), name


def test_cli_arguments():
    import subprocess
    import sys

    from structgen.serve import build_parser, cli, model_name
    args = build_parser().parse_args(["/models/qwen", "--port", "9001", "--compile-timeout", "2.5"])
    assert (args.model, args.host, args.port, args.compile_timeout) == ("/models/qwen", "127.0.0.1", 9001, 2.5)
    assert model_name(None) == "smollm2" and model_name("/models/qwen/") == "qwen"
    assert model_name("x/tiny.gguf") == "tiny"
    with pytest.raises(SystemExit):
        cli(["run"])
    help_text = subprocess.run([sys.executable, "-m", "structgen.serve", "--help"], capture_output=True,
                               text=True, check=True).stdout
    assert "--compile-timeout" in help_text and "--max-body-bytes" in help_text


@pytest.mark.slow
def test_cli_serves(smol_folder):
    """`python -m structgen.serve` in a subprocess answers a chat completion, then stops."""
    import subprocess
    import sys
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "structgen.serve", "--port", str(port),
                             "--max-model-len", "512", "--max-num-seqs", "4", "--log-level", "warning"])
    try:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0)
        deadline = time.monotonic() + 120
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/health").raise_for_status()
                break
            except httpx.HTTPError:
                assert proc.poll() is None and time.monotonic() < deadline, "server did not start"
                time.sleep(0.5)
        r = client.chat.completions.create(model="smollm2", messages=MESSAGES, max_tokens=8)
        assert r.choices[0].message.content
    finally:
        proc.terminate()
        proc.wait(30)


# -- strict tools and structural tags (engine/tool_tags.py, fsm.compile_structural_tag) --------------------
STRICT_TOOLS = [{"type": "function", "function": {**t["function"], "strict": True}} for t in TOOLS]


def test_strict_tools_auto_are_triggered_tags_in_the_template_syntax(server):
    """With strict tools, "auto" is free text with any number of calls in the model's syntax
    (SmolLM2's template ignores tools: Hermes'); "required" begins with a call;
    parallel_tool_calls false allows one call. Calls with arguments jsonschema refuses are
    refused; text around calls is free."""
    from structgen.engine.tool_tags import HERMES, LLAMA3, ToolTags, syntax_of_template
    assert syntax_of_template(server.llm.tokenizer.chat_template) is HERMES
    tok = server.llm.tokenizer

    def call(name, args, syntax=HERMES):
        key = "arguments" if syntax is HERMES else "parameters"
        return json.dumps({"name": name, key: args})[:-1] + syntax.end  # (the end closes the call object)

    def accepts(spec, text):
        m = server.llm.constraints.get(spec).matcher()
        return m.accept_tokens(tok.encode(text, add_special_tokens=False)) and m.is_accepting()
    spec, mode = constraint_of({"tools": STRICT_TOOLS, "tool_choice": "auto"})
    assert spec[0] == "structural_tag" and isinstance(mode, ToolTags)
    good = "\n" + call("get_time", {"zone": "UTC"})
    hermes_call = "<tool_call>" + good
    assert accepts(spec, "Let me check. " + hermes_call + " and " + hermes_call + " done.")
    assert accepts(spec, "plain text, no call")
    for name, args in [("get_weather", {"city": "Paris", "unit": "C"}), ("get_weather", {"city": "Rome", "unit": "C"}),
                       ("get_time", {"zone": "PST"}), ("get_weather", {"city": "Paris"})]:
        valid = jsonschema.Draft202012Validator(SCHEMAS[name]).is_valid(args)
        assert accepts(spec, "x <tool_call>\n" + call(name, args)) == valid, (name, args)
    assert not accepts(spec, "a <tool_call> that is not one")
    required, _ = constraint_of({"tools": STRICT_TOOLS, "tool_choice": "required"})
    assert accepts(required, hermes_call + " then text") and not accepts(required, "text " + hermes_call)
    one, _ = constraint_of({"tools": STRICT_TOOLS, "tool_choice": "auto", "parallel_tool_calls": False})
    assert accepts(one, "t " + hermes_call) and not accepts(one, hermes_call + hermes_call)
    llama, _ = constraint_of({"tools": STRICT_TOOLS}, LLAMA3)
    assert accepts(llama, "Sure: " + call("get_time", {"zone": "CET"}, LLAMA3))
    assert not accepts(llama, "Sure: " + call("get_time", {"zone": "PST"}, LLAMA3))
    content, calls = mode.split("Let me check. " + hermes_call + " done.")
    assert content == "Let me check.  done." and [c["function"]["name"] for c in calls] == ["get_time"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"zone": "UTC"}


@pytest.mark.parametrize("prompt", ["call", "text"])
def test_strict_tools_every_call_validates_end_to_end(server, prompt):
    """Whatever the model writes under strict tools, every call it makes parses and its
    arguments validate; the text around is the model's; streamed, the same."""
    kw = dict(model=MODEL, messages=CALL_PROMPT if prompt == "call" else TEXT_PROMPT, tools=STRICT_TOOLS,
              max_tokens=64, temperature=0)
    c = server.client.chat.completions.create(**kw).choices[0]
    for call in c.message.tool_calls or []:
        jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])
    assert (c.finish_reason == "tool_calls") == bool(c.message.tool_calls)
    assert "<tool_call>" not in (c.message.content or "")
    chunks = [ch for ch in server.client.chat.completions.create(**kw, stream=True) if ch.choices]
    streamed = [t for ch in chunks for t in ch.choices[0].delta.tool_calls or []]
    assert [(s.function.name, json.loads(s.function.arguments)) for s in streamed] == \
        [(t.function.name, json.loads(t.function.arguments)) for t in c.message.tool_calls or []]
    assert "".join(ch.choices[0].delta.content or "" for ch in chunks) == (c.message.content or "")
    if prompt == "call":
        assert c.message.tool_calls, c.message.content
    r = server.client.chat.completions.create(**{**kw, "temperature": 1.0, "seed": 7, "n": 3})
    for ch in r.choices:
        for call in ch.message.tool_calls or []:
            jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])


def test_response_format_structural_tag(server):
    """A reasoning block, then a constrained answer; a malformed document is a 400 naming
    its node."""
    answer = {"type": "object", "properties": {"capital": {"type": "string", "enum": ["Paris", "Lyon"]}},
              "required": ["capital"], "additionalProperties": False}
    rf = {"type": "structural_tag", "format": {"type": "sequence", "elements": [
        {"type": "tag", "begin": "<think>", "content": {"type": "any_text"}, "end": "</think>"},
        {"type": "json_schema", "json_schema": answer}]}}
    r = post(server, {"model": MODEL, "messages": MESSAGES, "max_tokens": 48, "temperature": 0,
                      "response_format": rf})
    assert r.status_code == 200, r.text
    text = r.json()["choices"][0]["message"]["content"]
    if r.json()["choices"][0]["finish_reason"] == "stop":
        m = re.fullmatch(r"<think>(.*?)</think>(.*)", text, re.DOTALL)
        assert m and "</think>" not in m.group(1)
        jsonschema.validate(json.loads(m.group(2)), answer)
    else:
        assert text.startswith("<think>")
    assert constraint_of({"structured_outputs": {"structural_tag": json.dumps(rf)}}) == \
        (("structural_tag", rf), None)
    bad = {"type": "structural_tag", "format": {"type": "sequence", "elements": [{"type": "tokne"}]}}
    r = post(server, {"model": MODEL, "messages": MESSAGES, "max_tokens": 4, "response_format": bad})
    assert r.status_code == 400 and "format.elements[0]: unknown format type 'tokne'" in error_message(r)


def test_tool_tags_split_and_streamable():
    """What comes back from an output under strict tools: the text outside the calls and
    the calls (arguments re-serialised, a call cut short left as text); how much may
    stream before a call (never a partial trigger)."""
    from structgen.engine.tool_tags import HERMES, LLAMA3, ToolTags
    tags = ToolTags(HERMES, ("get_time", 'say "hi"'))
    one = '<tool_call>\n{"name": "get_time", "arguments": {"zone": "UTC"}}\n</tool_call>'
    two = '<tool_call>\n{"name": "say \\"hi\\"", "arguments": {}}\n</tool_call>'
    content, calls = tags.split("A" + one + "B" + two)
    assert content == "AB" and [c["function"]["name"] for c in calls] == ["get_time", 'say "hi"']
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [{"zone": "UTC"}, {}]
    assert tags.split("x " + one[:-3]) == ("x " + one[:-3], [])
    assert [tags.streamable(t) for t in ("Hello", "Hello <tool", "Hello <", "a " + one, "a <b")] == [5, 6, 6, 2, 4]
    from structgen.engine.tool_tags import syntax_of_template
    llama = ('{{- "<|start_header_id|>user<|end_header_id|>\\n\\n" -}} Respond in the format {"name": function name, '
             '"parameters": dictionary of argument name and its value}.')
    qwen = '{{- "<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call>" }}'
    assert [syntax_of_template(t) for t in (llama, qwen, None)] == [LLAMA3, HERMES, HERMES]
    content, calls = ToolTags(LLAMA3, ("f",)).split('ok {"name": "f", "parameters": {"a": [1, 2]}}')
    assert content == "ok " and json.loads(calls[0]["function"]["arguments"]) == {"a": [1, 2]}


def test_beam_search_completions_equal_engine_beams_beside_a_plain_request(server):
    """`use_beam_search` on /v1/completions through the openai client: the n beams, best
    first, as choices, equal to LLM.beam_search's (through the engine) for the same prompt
    and params; guided by structured_outputs too (every beam matches, as `re` checks); a
    plain request sent at the same time gives the text it gives alone."""
    prompt, plain_prompt = "1, 2, 3, 4,", "The capital of France is"
    cases = [({"n": 3, "max_tokens": 8, "stop": ["6,"], "length_penalty": 0.5, "early_stopping": "never"},
              BeamSearchParams(3, max_tokens=8, stop=["6,"], length_penalty=0.5, early_stopping="never")),
             ({"n": 2, "max_tokens": 8, "structured_outputs": {"regex": " [0-9], [0-9]"}},
              BeamSearchParams(2, max_tokens=8, constraint=("regex", " [0-9], [0-9]")))]
    plain_alone = server.client.completions.create(model=MODEL, prompt=plain_prompt, max_tokens=12,
                                                   temperature=0).choices[0].text
    got = {}

    def work(i):
        if i == len(cases):
            got[i] = server.client.completions.create(model=MODEL, prompt=plain_prompt, max_tokens=12,
                                                      temperature=0).choices[0].text
        else:
            body, _ = cases[i]
            got[i] = server.client.completions.create(model=MODEL, prompt=prompt,
                                                      extra_body={"use_beam_search": True, **body})

    assert in_threads(work, len(cases) + 1) == []
    assert got[len(cases)] == plain_alone
    for i, (body, params) in enumerate(cases):
        want = server.llm.beam_search(prompt, params)[0]
        r = got[i]
        assert [c.index for c in r.choices] == list(range(params.beam_width)) == list(range(len(want.sequences)))
        assert [c.text for c in r.choices] == [s.text for s in want.sequences]
        assert [c.finish_reason for c in r.choices] == [FINISH[s.finish_reason] for s in want.sequences]
        assert r.usage.completion_tokens == sum(len(s.token_ids) for s in want.sequences)
        if "structured_outputs" in body:
            assert all(re.fullmatch(" [0-9], [0-9]", c.text) for c in r.choices)
    assert wait_idle(server.llm)


@pytest.mark.parametrize("extra, param", [
    ({"use_beam_search": True, "n": 0}, "n"),
    ({"use_beam_search": True, "n": 2, "stream": True}, "stream"),
    ({"use_beam_search": True, "temperature": 0.7}, "temperature"),
    ({"use_beam_search": True, "logprobs": 1}, "logprobs"),
    ({"use_beam_search": True, "early_stopping": "sometimes"}, "early_stopping"),
    ({"use_beam_search": True, "length_penalty": "x"}, "length_penalty"),
    ({"length_penalty": 2.0}, "length_penalty"),
    ({"use_beam_search": "yes"}, "use_beam_search"),
])
def test_bad_beam_search_params_are_400_naming_the_field(server, extra, param):
    r = post(server, {"model": MODEL, "prompt": "Hi", "max_tokens": 4, **extra}, path="/v1/completions")
    assert r.status_code == 400 and r.json()["error"]["param"] == param, r.text
    assert f"'{param}'" in error_message(r)


ANSWER = {"type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "Lyon", "Nice"]}},
          "required": ["city"], "additionalProperties": False}


def templated(server, messages) -> list[int]:
    """The chat prompt's ids, rendered with the tokenizer's own template."""
    tok = server.llm.tokenizer
    return tok(tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True),
               add_special_tokens=False).input_ids


def test_beam_search_chat_equals_engine_beams_on_the_templated_prompt(server):
    """`use_beam_search` on /v1/chat/completions through the openai client: the n beams of
    the chat-templated prompt (rendered here with the tokenizer's own template), best first,
    token-identical to LLM.beam_search's; `logprobs: false` changes nothing; usage counts
    the templated prompt once and every beam's tokens."""
    tok = server.llm.tokenizer
    ids = templated(server, MESSAGES)
    params = BeamSearchParams(3, max_tokens=10, length_penalty=0.5, early_stopping="never")
    want = server.llm.beam_search(ids, params)[0]
    r = server.client.chat.completions.create(
        model=MODEL, messages=MESSAGES, n=3, max_completion_tokens=10, logprobs=False,
        extra_body={"use_beam_search": True, "length_penalty": 0.5, "early_stopping": "never"})
    assert len(want.sequences) == 3
    assert [c.index for c in r.choices] == [0, 1, 2]
    assert [c.message.content for c in r.choices] == [s.text for s in want.sequences]
    assert [tok(c.message.content, add_special_tokens=False).input_ids for c in r.choices] \
        == [tok(s.text, add_special_tokens=False).input_ids for s in want.sequences]
    assert [c.finish_reason for c in r.choices] == [FINISH[s.finish_reason] for s in want.sequences]
    assert [s.score for s in want.sequences] == sorted((s.score for s in want.sequences), reverse=True)
    assert all(c.logprobs is None and c.message.role == "assistant" for c in r.choices)
    assert r.usage.prompt_tokens == len(ids)
    assert r.usage.completion_tokens == sum(len(s.token_ids) for s in want.sequences)
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    assert wait_idle(server.llm)


def test_beam_search_chat_every_beam_obeys_the_schema_or_the_tools(server):
    """With response_format json_schema every returned beam parses and validates
    (jsonschema), and equals the engine's own constrained beams; with tool_choice
    "required" every choice is a parsed tool call whose arguments validate."""
    rf = {"type": "json_schema", "json_schema": {"name": "answer", "schema": ANSWER}}
    r = server.client.chat.completions.create(
        model=MODEL, messages=MESSAGES, n=3, max_tokens=24, response_format=rf,
        extra_body={"use_beam_search": True})
    assert len(r.choices) == 3 and [c.index for c in r.choices] == [0, 1, 2]
    for c in r.choices:
        jsonschema.validate(json.loads(c.message.content), ANSWER)
        assert c.finish_reason == "stop"
    want = server.llm.beam_search(templated(server, MESSAGES), BeamSearchParams(3, max_tokens=24,
                                                                                constraint=("json", ANSWER)))[0]
    assert [c.message.content for c in r.choices] == [s.text for s in want.sequences]
    r = server.client.chat.completions.create(
        model=MODEL, messages=TEXT_PROMPT, n=2, max_tokens=48, tools=TOOLS, tool_choice="required",
        extra_body={"use_beam_search": True})
    assert len(r.choices) == 2
    for c in r.choices:
        assert c.finish_reason == "tool_calls" and c.message.content is None
        (call,) = c.message.tool_calls
        jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])
    assert wait_idle(server.llm)


@pytest.mark.parametrize("extra, param", [
    ({"use_beam_search": True, "n": 2, "stream": True}, "stream"),
    ({"use_beam_search": True, "temperature": 0.7}, "temperature"),
    ({"use_beam_search": True, "temperature": True}, "temperature"),
    ({"use_beam_search": True, "logprobs": True}, "logprobs"),
    ({"use_beam_search": True, "top_logprobs": 2}, "top_logprobs"),
    ({"use_beam_search": True, "early_stopping": "sometimes"}, "early_stopping"),
    ({"use_beam_search": True, "n": 65}, "n"),
    ({"early_stopping": True}, "early_stopping"),
])
def test_bad_chat_beam_search_params_are_400_naming_the_field(server, extra, param):
    with pytest.raises(openai.BadRequestError) as e:
        server.client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=4, extra_body=extra)
    assert e.value.status_code == 400 and e.value.body["param"] == param, e.value.body
    assert f"'{param}'" in e.value.body["message"]
