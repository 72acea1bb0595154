"""OpenAI-compatible request bodies to engine inputs, and engine outputs to response bodies.

Fails closed: an unknown or unsupported field, a wrong type, two constraints at once
are each an `APIError` (HTTP 400) naming the field; a request is never run with a
constraint silently dropped. The constraint itself compiles later, in the engine.
"""
from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field

from .sampling_params import MAX_BEAM_WIDTH, BeamSearchParams, SamplingParams
from .tool_tags import (
    HERMES,
    TOOL_CALL_BEGIN,
    TOOL_CALL_END,
    ToolSyntax,
    ToolTags,
    openai_call,
    tools_structural_tag,
)

_COMMON = {"model", "temperature", "top_p", "top_k", "min_p", "max_tokens", "n", "stop", "seed",
           "presence_penalty", "frequency_penalty", "repetition_penalty", "stream", "stream_options",
           "user", "min_tokens", "ignore_eos", "stop_token_ids", "structured_outputs", "response_format",
           "use_beam_search", "length_penalty", "early_stopping"}
CHAT_FIELDS = _COMMON | {"messages", "max_completion_tokens", "logprobs", "top_logprobs", "tools",
                         "tool_choice", "parallel_tool_calls"}
COMPLETION_FIELDS = _COMMON | {"prompt", "logprobs"}
# Sampling fields that beam search (which ranks beams by the model's raw logprobs) refuses,
# unless at a value that changes nothing: (allowed values). Beams keep no top alternatives,
# so logprobs are refused (chat's `logprobs: false` asks for none).
NOT_WITH_BEAMS = {"temperature": (0, 1), "top_p": (1,), "top_k": (0, -1), "min_p": (0,), "seed": (),
                  "presence_penalty": (0,), "frequency_penalty": (0,), "repetition_penalty": (1,),
                  "min_tokens": (0,), "stop_token_ids": (), "logprobs": (False,), "top_logprobs": (),
                  "stream_options": ()}
# Known OpenAI fields that this server does not implement: a 400 that says so.
UNSUPPORTED = {"logit_bias", "echo", "suffix", "best_of", "functions", "function_call", "audio",
               "modalities", "prediction", "service_tier", "reasoning_effort", "web_search_options"}


class APIError(Exception):
    """An error answered as OpenAI's `{"error": {...}}` with an HTTP status."""

    def __init__(self, message: str, status: int = 400, param: str | None = None,
                 type_: str = "invalid_request_error"):
        super().__init__(message)
        self.message, self.status, self.param, self.type = message, status, param, type_

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param,
                          "code": None}}


@dataclass
class Parsed:
    """A request ready for the engine: prompts (token ids), one SamplingParams (or
    BeamSearchParams: use_beam_search), and how to present the output."""
    prompts: list[list[int]]
    params: SamplingParams | BeamSearchParams
    stream: bool = False
    include_usage: bool = False
    tool_mode: object = None                # "call": a {"name", "arguments"} call; "auto": text or a call;
    #                                         a ToolTags (strict tools): text and calls in the model's syntax
    top_logprobs: int | None = None         # chat: logprobs wanted (k alternatives)
    extra: dict = field(default_factory=dict)


def check_fields(body, allowed: set[str]) -> None:
    if not isinstance(body, dict):
        raise APIError("the request body must be a JSON object")
    for key in body:
        if key in UNSUPPORTED:
            raise APIError(f"'{key}' is not supported by this server", param=key)
        if key not in allowed:
            raise APIError(f"unknown field '{key}'", param=key)


def _number(body, key, default, lo=None, hi=None, integer=False):
    v = body.get(key)
    if v is None:
        return default
    ok = isinstance(v, int) if integer else isinstance(v, (int, float))
    if isinstance(v, bool) or not ok:
        raise APIError(f"'{key}' must be {'an integer' if integer else 'a number'}; got {v!r:.50}", param=key)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise APIError(f"'{key}' must be in [{lo}, {hi}]; got {v}", param=key)
    return v


def _bool(body, key, default=False) -> bool:
    v = body.get(key, default)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise APIError(f"'{key}' must be a boolean", param=key)
    return v


def _max_tokens(body: dict, prompt_len: int, max_model_len: int) -> int:
    max_tokens = _number(body, "max_completion_tokens", None, 1, integer=True)
    if max_tokens is None:
        max_tokens = _number(body, "max_tokens", None, 1, integer=True)
    if max_tokens is None:
        max_tokens = max(1, max_model_len - prompt_len)
    return max_tokens


def _stop(body: dict):
    stop = body.get("stop")
    if stop is not None and not (isinstance(stop, str) or (
            isinstance(stop, list) and all(isinstance(s, str) and s for s in stop))):
        raise APIError("'stop' must be a string or a list of non-empty strings", param="stop")
    return stop


def sampling_params(body: dict, prompt_len: int, max_model_len: int, max_n: int,
                    logprobs: int | None, constraint) -> SamplingParams:
    max_tokens = _max_tokens(body, prompt_len, max_model_len)
    stop = _stop(body)
    stop_ids = body.get("stop_token_ids")
    if stop_ids is not None and not (isinstance(stop_ids, list) and all(
            isinstance(t, int) and not isinstance(t, bool) for t in stop_ids)):
        raise APIError("'stop_token_ids' must be a list of integers", param="stop_token_ids")
    try:
        return SamplingParams(
            n=_number(body, "n", 1, 1, max_n, integer=True),
            temperature=_number(body, "temperature", 1.0, 0, 2),
            top_p=_number(body, "top_p", 1.0, 0, 1),
            top_k=_number(body, "top_k", 0, -1, integer=True),
            min_p=_number(body, "min_p", 0.0, 0, 1),
            presence_penalty=_number(body, "presence_penalty", 0.0, -2, 2),
            frequency_penalty=_number(body, "frequency_penalty", 0.0, -2, 2),
            repetition_penalty=_number(body, "repetition_penalty", 1.0, 0),
            seed=_number(body, "seed", None, integer=True),
            max_tokens=max_tokens,
            min_tokens=_number(body, "min_tokens", 0, 0, integer=True),
            stop=stop, stop_token_ids=stop_ids, ignore_eos=_bool(body, "ignore_eos"),
            logprobs=logprobs, constraint=constraint)
    except ValueError as e:
        raise APIError(str(e)) from e


def beam_search_params(body: dict, prompt_len: int, max_model_len: int, max_n: int,
                       constraint) -> BeamSearchParams | None:
    """vLLM's `use_beam_search: true`: `n` beams (all returned, best first), `max_tokens`,
    `length_penalty`, `early_stopping` (true, false or "never"), `ignore_eos`, `stop`, a
    constraint; None without it. Streaming and sampling fields are refused (NOT_WITH_BEAMS)."""
    if not _bool(body, "use_beam_search"):
        for key in ("length_penalty", "early_stopping"):
            if body.get(key) is not None:
                raise APIError(f"'{key}' needs 'use_beam_search': true", param=key)
        return None
    if _bool(body, "stream"):
        raise APIError("'stream' is not supported with use_beam_search: beams are ranked only at the end",
                       param="stream")
    for key, neutral in NOT_WITH_BEAMS.items():
        v = body.get(key)
        # (a bool is neutral only where listed as one: `true` is not temperature 1)
        if v is not None and not any(v == x and isinstance(v, bool) == isinstance(x, bool) for x in neutral):
            allowed = f" (only {' or '.join(map(json.dumps, neutral))})" if neutral else ""
            raise APIError(f"'{key}' is not supported with use_beam_search{allowed}: beams are ranked by the "
                           "model's raw logprobs", param=key)
    early = body.get("early_stopping", False)
    if not (isinstance(early, bool) or early == "never"):
        raise APIError(f"'early_stopping' must be true, false or \"never\"; got {early!r:.50}",
                       param="early_stopping")
    try:
        return BeamSearchParams(
            beam_width=_number(body, "n", 1, 1, min(max_n, MAX_BEAM_WIDTH), integer=True),
            max_tokens=_max_tokens(body, prompt_len, max_model_len),
            ignore_eos=_bool(body, "ignore_eos"),
            length_penalty=_number(body, "length_penalty", 1.0, -10, 10),
            early_stopping=early, constraint=constraint, stop=_stop(body))
    except ValueError as e:
        raise APIError(str(e)) from e


# -- constraints ---------------------------------------------------------------------------
def _response_format(rf):
    if not isinstance(rf, dict) or rf.get("type") not in ("text", "json_object", "json_schema", "structural_tag"):
        raise APIError("'response_format.type' must be one of text, json_object, json_schema, structural_tag",
                       param="response_format")
    if rf["type"] == "structural_tag":  # (XGrammar's document, checked where it compiles: a 400 naming the node)
        return ("structural_tag", rf)
    extra = set(rf) - {"type", "json_schema"}
    if extra:
        raise APIError(f"unknown field 'response_format.{sorted(extra)[0]}'", param="response_format")
    if rf["type"] == "text":
        return None
    if rf["type"] == "json_object":
        return ("json", {"type": "object"})
    js = rf.get("json_schema")
    if not isinstance(js, dict) or "schema" not in js:
        raise APIError("'response_format.json_schema.schema' is required", param="response_format")
    extra = set(js) - {"name", "schema", "strict", "description"}
    if extra:
        raise APIError(f"unknown field 'response_format.json_schema.{sorted(extra)[0]}'",
                       param="response_format")
    return ("json", js["schema"])


def _structured_outputs(so):
    kinds = ("regex", "choice", "json", "grammar", "structural_tag")
    if not isinstance(so, dict):
        raise APIError("'structured_outputs' must be an object", param="structured_outputs")
    extra = set(so) - set(kinds)
    if extra:
        raise APIError(f"unknown field 'structured_outputs.{sorted(extra)[0]}'", param="structured_outputs")
    given = [k for k in kinds if so.get(k) is not None]
    if len(given) != 1:
        raise APIError("'structured_outputs' needs exactly one of regex, choice, json, grammar, structural_tag",
                       param="structured_outputs")
    kind = given[0]
    value = so[kind]
    if kind in ("regex", "grammar") and not isinstance(value, str):
        raise APIError(f"'structured_outputs.{kind}' must be a string", param="structured_outputs")
    if kind == "choice" and not (isinstance(value, list) and value and all(isinstance(c, str) for c in value)):
        raise APIError("'structured_outputs.choice' must be a non-empty list of strings",
                       param="structured_outputs")
    if kind == "structural_tag" and not isinstance(value, (dict, str)):
        raise APIError("'structured_outputs.structural_tag' must be a structural-tag document (an object or JSON "
                       "text)", param="structured_outputs")
    if kind in ("json", "structural_tag") and isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as e:
            raise APIError(f"'structured_outputs.{kind}' is not valid JSON: {e}", param="structured_outputs") from e
    return (kind, value)


def tool_constraint(tools, tool_choice, parallel_tool_calls=None, syntax: ToolSyntax = HERMES):
    """(constraint spec, tool mode) for `tools` and `tool_choice`: "required" or a named
    function, one JSON call `{"name", "arguments"}` (mode "call"); "auto", text or a call
    between markers (mode "auto"); "none", no constraint (mode None). Where some tool is
    `strict`, "auto" and "required" are triggered tags in `syntax` (mode ToolTags):
    text and calls, at least one under "required", at most one where
    `parallel_tool_calls` is false (engine/tool_tags.py)."""
    if parallel_tool_calls is not None and not isinstance(parallel_tool_calls, bool):
        raise APIError("'parallel_tool_calls' must be true or false", param="parallel_tool_calls")
    if not isinstance(tools, list) or not tools:
        raise APIError("'tools' must be a non-empty list", param="tools")
    by_name, strict = {}, set()
    for t in tools:
        fn = t.get("function") if isinstance(t, dict) else None
        if not (isinstance(t, dict) and t.get("type") == "function" and isinstance(fn, dict)
                and isinstance(fn.get("name"), str)):
            raise APIError("each tool must be {\"type\": \"function\", \"function\": {\"name\": ...}}",
                           param="tools")
        params = fn.get("parameters") or {"type": "object"}
        if not isinstance(params, dict):
            raise APIError(f"tool '{fn['name']}': 'parameters' must be a JSON Schema object", param="tools")
        by_name[fn["name"]] = params
        if fn.get("strict") is True:
            strict.add(fn["name"])
    if tool_choice in (None, "auto"):    # (OpenAI's default with tools is "auto")
        names = list(by_name)
    elif tool_choice == "none":
        return None, None
    elif tool_choice == "required":
        names = list(by_name)
    elif (isinstance(tool_choice, dict) and tool_choice.get("type") == "function"
          and isinstance(tool_choice.get("function"), dict)):
        name = tool_choice["function"].get("name")
        if name not in by_name:
            raise APIError(f"tool_choice names '{name}', which is not among the tools", param="tool_choice")
        names = [name]
    else:
        raise APIError("'tool_choice' must be none, auto, required or "
                       "{\"type\": \"function\", \"function\": {\"name\": ...}}", param="tool_choice")
    if strict and tool_choice in (None, "auto", "required"):
        tools_of = {n: by_name[n] for n in names}
        doc = tools_structural_tag(tools_of, strict, syntax, at_least_one=tool_choice == "required",
                                   stop_after_first=parallel_tool_calls is False)
        return ("structural_tag", doc), ToolTags(syntax, tuple(tools_of))
    calls = [{"type": "object", "properties": {"name": {"const": n}, "arguments": by_name[n]},
              "required": ["name", "arguments"], "additionalProperties": False} for n in names]
    schema = calls[0] if len(calls) == 1 else {"anyOf": calls}
    if tool_choice in (None, "auto"):
        return ("tool_calls", {"schema": schema, "begin": TOOL_CALL_BEGIN, "end": TOOL_CALL_END}), "auto"
    return ("json", schema), "call"


def constraint_of(body: dict, syntax: ToolSyntax = HERMES):
    """(constraint spec or None, tool mode: None, "call", "auto" or a ToolTags) from
    response_format / structured_outputs / tools; `syntax`: the model's tool calls."""
    found = []
    if body.get("response_format") is not None:
        c = _response_format(body["response_format"])
        if c is not None:
            found.append(("response_format", c))
    if body.get("structured_outputs") is not None:
        found.append(("structured_outputs", _structured_outputs(body["structured_outputs"])))
    tool_mode = None
    if body.get("tools") is not None:
        spec, tool_mode = tool_constraint(body["tools"], body.get("tool_choice"), body.get("parallel_tool_calls"),
                                          syntax)
        if spec is not None:
            found.append(("tool_choice", spec))
    elif body.get("tool_choice") not in (None, "none"):
        raise APIError("'tool_choice' needs 'tools'", param="tool_choice")
    if len(found) > 1:
        hint = ("; with tools, tool_choice defaults to \"auto\", a constraint of its own: pass \"none\" to "
                f"constrain the text with {found[0][0]}" if body.get("tool_choice") is None and tool_mode else "")
        raise APIError(f"only one constraint at a time; got {' and '.join(f for f, _ in found)}{hint}",
                       param=found[1][0])
    return (found[0][1] if found else None), tool_mode


# -- prompts -------------------------------------------------------------------------------
def chat_messages(messages) -> list[dict]:
    """Messages for the chat template: text content only (parts joined)."""
    if not isinstance(messages, list) or not messages:
        raise APIError("'messages' must be a non-empty list", param="messages")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ("system", "developer", "user", "assistant", "tool"):
            raise APIError(f"messages[{i}] needs a role: system, developer, user, assistant or tool",
                           param="messages")
        content = m.get("content")
        if isinstance(content, list):
            texts = []
            for part in content:
                if not (isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)):
                    raise APIError(f"messages[{i}]: only text content parts are supported", param="messages")
                texts.append(part["text"])
            content = "".join(texts)
        elif content is None:
            content = ""
        elif not isinstance(content, str):
            raise APIError(f"messages[{i}].content must be a string or a list of parts", param="messages")
        msg = {**m, "role": "system" if m["role"] == "developer" else m["role"], "content": content}
        out.append(msg)
    return out


def completion_prompts(prompt) -> list:
    """A string, a list of strings, a list of token ids, or a list of those lists."""
    def ids(x):
        return isinstance(x, list) and x and all(isinstance(t, int) and not isinstance(t, bool) for t in x)
    if isinstance(prompt, str) or ids(prompt):
        return [prompt]
    if isinstance(prompt, list) and prompt and all(isinstance(p, str) or ids(p) for p in prompt):
        return list(prompt)
    raise APIError("'prompt' must be a string, a list of strings, or token ids", param="prompt")


# -- responses -----------------------------------------------------------------------------
FINISH = {"stop": "stop", "constraint": "stop", "length": "length", "abort": "abort", "error": "error"}


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


def tool_calls_of(text: str, mode: str | None) -> list[dict] | None:
    """OpenAI tool_calls from a constrained output: the whole of it (mode "call"), or what
    lies between the markers where it begins with one (mode "auto"); None for text, or a
    call cut short."""
    if mode == "auto":
        if not (text.startswith(TOOL_CALL_BEGIN) and text.endswith(TOOL_CALL_END)):
            return None
        text = text[len(TOOL_CALL_BEGIN):-len(TOOL_CALL_END)]
    try:
        call = json.loads(text)
    except json.JSONDecodeError:
        return None
    return [openai_call(call["name"], json.dumps(call["arguments"]))]


def with_tools_prompt(messages: list[dict], tools: list) -> list[dict]:
    """The messages with the tools described in the system message, in the format of
    Hermes-style templates: for a chat template that ignores `tools` (SmolLM2's)."""
    listed = "\n".join(json.dumps(t) for t in tools)
    text = ("# Tools\n\nYou may call one of these functions to answer the user.\n\n<tools>\n" + listed
            + "\n</tools>\n\nTo call one, answer with only a JSON object with the function's name and its "
            f"arguments between the tags:\n{TOOL_CALL_BEGIN}"
            '{"name": <function-name>, "arguments": <arguments-json-object>}'
            f"{TOOL_CALL_END}\nOtherwise, answer in plain text.")
    if messages and messages[0]["role"] == "system":
        return [{**messages[0], "content": messages[0]["content"] + "\n\n" + text}, *messages[1:]]
    return [{"role": "system", "content": text}, *messages]


def chat_logprobs(tokenizer, token_ids, entries, k: int) -> dict:
    """Chat `logprobs.content` entries; a forced token's logprob is null when no forward
    computed it (a constraint's jump-forward token that ended the output)."""
    content = []
    for t, e in zip(token_ids, entries or []):
        tok = tokenizer.decode([t])
        top = []
        if e:
            for tid, lp in sorted(e.items(), key=lambda kv: -kv[1])[:k]:
                s = tokenizer.decode([tid])
                top.append({"token": s, "logprob": lp, "bytes": list(s.encode())})
        content.append({"token": tok, "logprob": e.get(t) if e else None, "bytes": list(tok.encode()),
                        "top_logprobs": top})
    return {"content": content}


def completion_logprobs(tokenizer, token_ids, entries, k: int, offset: int = 0) -> dict:
    tokens, lps, tops, offsets = [], [], [], []
    for t, e in zip(token_ids, entries or []):
        s = tokenizer.decode([t])
        tokens.append(s)
        lps.append(e.get(t) if e else None)
        tops.append({tokenizer.decode([tid]): lp for tid, lp in sorted(e.items(), key=lambda kv: -kv[1])[:k]}
                    if e and k else None)
        offsets.append(offset)
        offset += len(s)
    return {"tokens": tokens, "token_logprobs": lps, "top_logprobs": tops, "text_offset": offsets}
