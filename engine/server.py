"""An OpenAI-compatible HTTP server over an `AsyncEngine` (FastAPI; run it with uvicorn).

    >>> from structgen.engine import LLM
    >>> from structgen.engine.async_engine import AsyncEngine
    >>> app = build_app(AsyncEngine(LLM()), "smollm2")            # doctest: +SKIP
    >>> uvicorn.run(app, host="127.0.0.1", port=8000)             # doctest: +SKIP

Endpoints: GET /v1/models, POST /v1/chat/completions, POST /v1/completions, GET /health,
GET /metrics (Prometheus text). See docs/serving.md for the parameters and errors.
"""
from __future__ import annotations

import asyncio
import copy
import json
import time

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse

from ..fsm import ConstraintError
from .async_engine import AsyncEngine, RequestError, RequestStream
from .llm import CompletionOutput
from .metrics import render
from .openai_protocol import (
    CHAT_FIELDS,
    COMPLETION_FIELDS,
    FINISH,
    TOOL_CALL_BEGIN,
    APIError,
    Parsed,
    _bool,
    _number,
    beam_search_params,
    chat_logprobs,
    chat_messages,
    check_fields,
    completion_logprobs,
    completion_prompts,
    constraint_of,
    new_id,
    sampling_params,
    tool_calls_of,
    with_tools_prompt,
)
from .sampling_params import BeamSearchParams
from .tool_tags import ToolTags, syntax_of_template

DEFAULT_MAX_BODY_BYTES = 1 << 20
DISCONNECT_POLL_S = 0.5     # how often a non-streamed request checks that its client is still there


def build_app(engine: AsyncEngine, model_name: str, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> FastAPI:
    """The FastAPI app serving `engine` under the model name `model_name`.

    `max_body_bytes`: larger request bodies are refused with 413 before they are read.
    """
    app = FastAPI(title="structgen", docs_url=None, redoc_url=None)
    llm = engine.llm
    # The engine's thread decodes with llm.tokenizer while this event loop encodes prompts
    # and decodes logprobs: a fast tokenizer is not safe to use from two threads at once
    # ("Already borrowed"), so the server has its own.
    tok = copy.deepcopy(llm.tokenizer)
    created = int(time.time())
    syntax = syntax_of_template(getattr(tok, "chat_template", None))  # strict tools' calls (tool_tags.py)

    @app.exception_handler(APIError)
    async def _api_error(_request, e: APIError):
        return JSONResponse(e.body(), status_code=e.status)

    @app.get("/health")
    async def health():
        if not engine.alive:
            return JSONResponse({"status": "engine stopped"}, status_code=503)
        return {"status": "ok"}

    @app.get("/metrics")
    async def metrics():
        return PlainTextResponse(render(engine), media_type="text/plain; version=0.0.4")

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [{"id": model_name, "object": "model", "created": created,
                                            "owned_by": "structgen", "max_model_len": llm.max_model_len}]}

    def check_model(body):
        m = body.get("model")
        if m is not None and m != model_name:
            raise APIError(f"the model '{m}' does not exist (this server has '{model_name}')", 404, "model")

    def check_prompt(ids: list[int]) -> list[int]:
        if not ids:
            raise APIError("the prompt is empty", param="prompt")
        if len(ids) >= llm.max_model_len:
            raise APIError(f"the prompt has {len(ids)} tokens; the context (max_model_len) is "
                           f"{llm.max_model_len} tokens, and at least one must be left to generate",
                           param="messages")
        if any(t < 0 or t >= llm.model_config.vocab_size for t in ids):
            raise APIError("a prompt token id is out of the vocabulary's range", param="prompt")
        return ids

    def render_chat(messages, tools) -> str:
        try:
            text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                           **({"tools": tools} if tools else {}))
            if tools and text == tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True):
                # A template that ignores tools: they go into the system message instead.
                text = tok.apply_chat_template(with_tools_prompt(messages, tools), tokenize=False,
                                               add_generation_prompt=True)
        except Exception as e:  # noqa: BLE001 - a template that rejects these messages: the client's
            raise APIError(f"cannot apply the chat template: {type(e).__name__}: {e}", param="messages") from e
        return text

    def stream_options(body):
        stream = _bool(body, "stream")
        opts = body.get("stream_options")
        if opts is None:
            return stream, False
        if not stream:
            raise APIError("'stream_options' needs 'stream': true", param="stream_options")
        if not isinstance(opts, dict) or set(opts) - {"include_usage", "continuous_usage_stats"}:
            raise APIError("'stream_options' takes only include_usage", param="stream_options")
        return stream, _bool(opts, "include_usage")

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        body = await read_json(request, max_body_bytes)
        check_fields(body, CHAT_FIELDS)
        check_model(body)
        constraint, tool_mode = constraint_of(body, syntax)
        messages = chat_messages(body.get("messages"))
        text = render_chat(messages, body.get("tools"))
        ids = check_prompt(list(tok(text, add_special_tokens=False).input_ids))
        beams = beam_search_params(body, len(ids), llm.max_model_len, llm.config.max_num_seqs, constraint)
        if beams is not None:
            return await respond(request, "chat", Parsed([ids], beams, tool_mode=tool_mode))
        k = _number(body, "top_logprobs", 0, 0, 20, integer=True)
        want = _bool(body, "logprobs")
        params = sampling_params(body, len(ids), llm.max_model_len, llm.config.max_num_seqs,
                                 k if want else None, constraint)
        stream, usage = stream_options(body)
        p = Parsed([ids], params, stream, usage, tool_mode, k if want else None)
        return await respond(request, "chat", p)

    @app.post("/v1/completions")
    async def completions(request: Request):
        body = await read_json(request, max_body_bytes)
        check_fields(body, COMPLETION_FIELDS)
        check_model(body)
        if body.get("tools") is not None:
            raise APIError("'tools' is for /v1/chat/completions", param="tools")
        constraint, _ = constraint_of(body)
        prompts = [check_prompt(list(tok(p).input_ids) if isinstance(p, str) else p)
                   for p in completion_prompts(body.get("prompt"))]
        longest = max(len(p) for p in prompts)
        beams = beam_search_params(body, longest, llm.max_model_len, llm.config.max_num_seqs, constraint)
        if beams is not None:
            return await respond(request, "completion", Parsed(prompts, beams))
        k = _number(body, "logprobs", None, 0, 20, integer=True)
        params = sampling_params(body, longest, llm.max_model_len, llm.config.max_num_seqs, k, constraint)
        stream, usage = stream_options(body)
        return await respond(request, "completion", Parsed(prompts, params, stream, usage, False, k))

    async def respond(request: Request, kind: str, p: Parsed):
        beams = isinstance(p.params, BeamSearchParams)        # use_beam_search
        add = engine.add_beam_search if beams else engine.add_request
        streams = [add(ids, p.params) for ids in p.prompts]
        rid = new_id("chatcmpl" if kind == "chat" else "cmpl")
        if p.stream:
            agen = merged(streams)
            try:
                first = await agen.__anext__()   # a compile error is still a plain 400 here
            except (ConstraintError, RequestError) as e:
                raise APIError(str(e), param=_param(p)) from e
            return StreamingResponse(sse(kind, rid, p, first, agen), media_type="text/event-stream")
        results = asyncio.ensure_future(asyncio.gather(*(s.result_async() for s in streams)))
        try:
            # Uvicorn does not cancel a handler whose client went away: look for it meanwhile.
            while not (await asyncio.wait({results}, timeout=DISCONNECT_POLL_S))[0]:
                if await request.is_disconnected():
                    raise APIError("the client disconnected", 499)
            outs = results.result()
        except (ConstraintError, RequestError) as e:
            raise APIError(str(e), param=_param(p)) from e
        finally:
            results.cancel()
            for s in streams:
                if not s.finished:
                    s.abort()
        choices = []
        n = p.params.beam_width if beams else p.params.n
        results = [beam_outputs(out) if beams else out.outputs for out in outs]
        for k, outputs in enumerate(results):
            for o in outputs:
                if o.finish_reason == "error":
                    raise APIError(f"generation failed: {o.error}", 500, type_="server_error")
                choices.append(choice(kind, p, k * n + o.index, o.text, o.token_ids, o.logprobs,
                                      o.finish_reason))
        completion_tokens = sum(len(o.token_ids) for outputs in results for o in outputs)
        prompt_tokens = sum(len(ids) for ids in p.prompts)
        return {"id": rid, "object": "chat.completion" if kind == "chat" else "text_completion",
                "created": int(time.time()), "model": model_name, "choices": choices,
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                          "total_tokens": prompt_tokens + completion_tokens}}

    def choice(kind, p: Parsed, index, text, token_ids, logprobs, reason) -> dict:
        finish = FINISH.get(reason, reason)
        if kind == "completion":
            lp = (completion_logprobs(tok, token_ids, logprobs, p.top_logprobs or 0)
                  if p.top_logprobs is not None else None)
            return {"index": index, "text": text, "logprobs": lp, "finish_reason": finish}
        message = {"role": "assistant", "content": text}
        if isinstance(p.tool_mode, ToolTags):
            content, calls = p.tool_mode.split(text) if reason in ("stop", "constraint") else (text, [])
            if calls:
                message = {"role": "assistant", "content": content or None, "tool_calls": calls}
                finish = "tool_calls"
        elif p.tool_mode:
            calls = tool_calls_of(text, p.tool_mode) if reason in ("stop", "constraint") else None
            if calls is not None:
                message = {"role": "assistant", "content": None, "tool_calls": calls}
                finish = "tool_calls"
        lp = chat_logprobs(tok, token_ids, logprobs, p.top_logprobs) if p.top_logprobs is not None else None
        return {"index": index, "message": message, "logprobs": lp, "finish_reason": finish}

    async def sse(kind, rid, p: Parsed, first, agen):
        obj = "chat.completion.chunk" if kind == "chat" else "text_completion"
        now = int(time.time())
        started: set[int] = set()
        held: dict[int, str] = {}     # tool modes: text held back while it may be (or is) a call
        free: set[int] = set()        # "auto": samples known to answer in text; ToolTags: a call begun
        shown: dict[int, int] = {}    # ToolTags: how much of the held output has streamed as content
        completion_tokens = 0

        def chunk(index, delta_or_text, logprobs=None, finish=None):
            c = {"index": index, "logprobs": logprobs, "finish_reason": finish}
            c["delta" if kind == "chat" else "text"] = delta_or_text
            msg = {"id": rid, "object": obj, "created": now, "model": model_name, "choices": [c]}
            if p.include_usage:
                msg["usage"] = None
            return f"data: {json.dumps(msg)}\n\n"

        async def items():
            yield first
            async for item in agen:
                yield item

        try:
            async for k, d in items():
                index = k * p.params.n + d.index
                completion_tokens += len(d.token_ids)
                lp = None
                if p.top_logprobs is not None and d.token_ids:
                    lp = (chat_logprobs(tok, d.token_ids, d.logprobs, p.top_logprobs) if kind == "chat"
                          else completion_logprobs(tok, d.token_ids, d.logprobs, p.top_logprobs))
                if kind == "chat" and index not in started:
                    started.add(index)
                    yield chunk(index, {"role": "assistant", "content": ""})
                text = d.text
                if isinstance(p.tool_mode, ToolTags):  # content streams up to a call's trigger
                    so_far = held.get(index, "") + text
                    sent = shown.get(index, 0)
                    upto = max(sent, p.tool_mode.streamable(so_far)) if index not in free else sent
                    if so_far.find(p.tool_mode.syntax.trigger) >= 0:
                        free.add(index)  # (a call has begun: the rest waits for the end)
                    text, held[index], shown[index] = so_far[sent:upto], so_far, upto
                elif p.tool_mode == "call" or (p.tool_mode == "auto" and index not in free):
                    held[index] = held.get(index, "") + text
                    text = ""
                    if p.tool_mode == "auto" and not _may_call(held[index]):    # text after all
                        text = held.pop(index)
                        free.add(index)
                if text or lp is not None:
                    yield chunk(index, {"content": text} if kind == "chat" else text, lp)
                if d.finish_reason is None:
                    continue
                if d.finish_reason == "error":
                    err = APIError(f"generation failed: {d.error}", 500, type_="server_error")
                    yield f"data: {json.dumps(err.body())}\n\n"
                    continue
                finish = FINISH.get(d.finish_reason, d.finish_reason)
                if isinstance(p.tool_mode, ToolTags):
                    rest = held.pop(index, "")[shown.pop(index, 0):]
                    ok = d.finish_reason in ("stop", "constraint")
                    content, calls = p.tool_mode.split(rest) if ok else (rest, [])
                    if content:
                        yield chunk(index, {"content": content})
                    for i, call in enumerate(calls):
                        yield chunk(index, {"tool_calls": [{"index": i, **call}]})
                    finish = "tool_calls" if calls else finish
                elif index in held:
                    text = held.pop(index)
                    calls = tool_calls_of(text, p.tool_mode) if d.finish_reason in ("stop", "constraint") else None
                    if calls is not None:
                        yield chunk(index, {"tool_calls": [{"index": 0, **calls[0]}]})
                        finish = "tool_calls"
                    elif text:
                        yield chunk(index, {"content": text})
                yield chunk(index, {} if kind == "chat" else "", None, finish)
            if p.include_usage:
                prompt_tokens = sum(len(ids) for ids in p.prompts)
                msg = {"id": rid, "object": obj, "created": now, "model": model_name, "choices": [],
                       "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                                 "total_tokens": prompt_tokens + completion_tokens}}
                yield f"data: {json.dumps(msg)}\n\n"
            yield "data: [DONE]\n\n"
        finally:
            await agen.aclose()      # aborts what is unfinished (a client that went away)

    return app


def beam_outputs(out) -> list[CompletionOutput]:
    """A BeamSearchOutput's hypotheses as completion outputs (index = rank); one "error"
    output where it failed."""
    if out.error is not None:
        return [CompletionOutput(0, "", [], "error", error=out.error)]
    return [CompletionOutput(i, s.text, s.token_ids, s.finish_reason, s.stop_reason,
                             cumulative_logprob=s.cum_logprob) for i, s in enumerate(out.sequences)]


def _may_call(text: str) -> bool:
    """Whether an output under tool_choice "auto" that begins so is (or may become) a call."""
    return text.startswith(TOOL_CALL_BEGIN) or TOOL_CALL_BEGIN.startswith(text)


def _param(p: Parsed) -> str | None:
    return "tool_choice" if p.tool_mode else None


async def read_json(request: Request, limit: int):
    """The body as JSON; 413 past `limit` bytes (by Content-Length, or while reading)."""
    size = request.headers.get("content-length")
    if size is not None and size.isdigit() and int(size) > limit:
        raise APIError(f"the request body of {size} bytes exceeds the limit of {limit} bytes", 413)
    chunks, total = [], 0
    async for part in request.stream():
        total += len(part)
        if total > limit:
            raise APIError(f"the request body exceeds the limit of {limit} bytes", 413)
        chunks.append(part)
    try:
        return json.loads(b"".join(chunks))
    except ValueError as e:
        raise APIError(f"the request body is not valid JSON: {e}") from e


async def merged(streams: list[RequestStream]):
    """(k, delta) from several request streams as they come; aborts the unfinished ones
    when closed early (the client disconnected) or when one fails."""
    queue: asyncio.Queue = asyncio.Queue()

    async def pump(k, s):
        try:
            async for d in s:
                await queue.put((k, d, None))
            await queue.put((k, None, None))
        except Exception as e:  # noqa: BLE001 - handed to the consumer
            await queue.put((k, None, e))

    tasks = [asyncio.create_task(pump(k, s)) for k, s in enumerate(streams)]
    left = len(streams)
    try:
        while left:
            k, d, e = await queue.get()
            if e is not None:
                raise e
            if d is None:
                left -= 1
                continue
            yield k, d
    finally:
        for t in tasks:
            t.cancel()
        for s in streams:
            if not s.finished:
                s.abort()


def serve(engine: AsyncEngine, model_name: str, host: str = "127.0.0.1", port: int = 8000,
          max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, log_level: str = "info") -> None:
    """Serve until interrupted, then close the engine."""
    import uvicorn
    app = build_app(engine, model_name, max_body_bytes)
    try:
        uvicorn.run(app, host=host, port=port, log_level=log_level)
    finally:
        engine.close()
