"""Strict tools under tool_choice "auto" / "required": a structural tag of triggered tags
in the model's own tool-call syntax, and the parsing of what the model wrote under it.

The syntax comes from the chat template (docs/serving.md, "Strict tools"): Hermes-style
`<tool_call>\\n{"name": ..., "arguments": ...}\\n</tool_call>` (Qwen2 / Qwen2.5, and the
default: SmolLM2's template ignores tools, and the server describes them in that format),
or Llama 3's bare `{"name": ..., "parameters": ...}`.
"""
from __future__ import annotations

import json
import uuid
from dataclasses import dataclass


@dataclass(frozen=True)
class ToolSyntax:
    """How a model writes a call: `begin` (with `{name}`), the arguments' JSON, `end`;
    `trigger` is what every call begins with, which free text never contains."""

    name: str
    trigger: str
    begin: str
    end: str

    def begin_of(self, tool: str) -> str:
        return self.begin.replace("{name}", json.dumps(tool)[1:-1])


# Hermes-style markers around a call (the format of Qwen's and Hermes' chat templates).
TOOL_CALL_BEGIN, TOOL_CALL_END = "<tool_call>\n", "\n</tool_call>"
HERMES = ToolSyntax("hermes", TOOL_CALL_BEGIN.strip(), TOOL_CALL_BEGIN + '{"name": "{name}", "arguments": ',
                    "}" + TOOL_CALL_END)
LLAMA3 = ToolSyntax("llama3", '{"name": ', '{"name": "{name}", "parameters": ', "}")


def openai_call(name: str, arguments: str) -> dict:
    """One entry of an OpenAI message's `tool_calls`; `arguments` is JSON text."""
    return {"id": f"call-{uuid.uuid4().hex[:24]}", "type": "function",
            "function": {"name": name, "arguments": arguments}}


def syntax_of_template(template: str | None) -> ToolSyntax:
    """The tool-call syntax a chat template teaches: Llama 3's where the template is
    Llama 3's (its header tokens, and "parameters"), else Hermes' (Qwen2 / Qwen2.5's
    `<tool_call>`, and the default)."""
    if template and "<|start_header_id|>" in template and '"parameters"' in template:
        return LLAMA3
    return HERMES


def tools_structural_tag(tools: dict, strict: set, syntax: ToolSyntax, at_least_one: bool,
                         stop_after_first: bool) -> dict:
    """The structural-tag document: free text, and at the trigger one call of a tool in
    `tools` ({name: parameters schema}); a strict tool's arguments satisfy its schema,
    another's are any text up to the end."""
    tags = [{"type": "tag", "begin": syntax.begin_of(name),
             "content": ({"type": "json_schema", "json_schema": schema} if name in strict else {"type": "any_text"}),
             "end": syntax.end} for name, schema in tools.items()]
    return {"type": "structural_tag",
            "format": {"type": "triggered_tags", "triggers": [syntax.trigger], "tags": tags,
                       "at_least_one": at_least_one, "stop_after_first": stop_after_first}}


@dataclass(frozen=True)
class ToolTags:
    """A request's tool mode under triggered tags: how to find its calls in the output."""

    syntax: ToolSyntax
    names: tuple

    def split(self, text: str) -> tuple[str, list]:
        """(the text outside the calls, the calls as OpenAI tool_calls). A call that does
        not parse (cut short) stays in the text."""
        out, calls, i = [], [], 0
        trig = self.syntax.trigger
        while (k := text.find(trig, i)) >= 0:
            got = self._call_at(text, k)
            if got is None:
                break
            out.append(text[i:k])
            call, i = got
            calls.append(call)
        out.append(text[i:])
        return "".join(out), calls

    def _call_at(self, text: str, k: int):
        for name in self.names:
            begin = self.syntax.begin_of(name)
            if not text.startswith(begin, k):
                continue
            at = k + len(begin)
            try:
                args, j = json.JSONDecoder().raw_decode(text, at)
                arguments = json.dumps(args)
            except ValueError:
                j = text.find(self.syntax.end, at)
                arguments = text[at:j]
            if j < 0 or not text.startswith(self.syntax.end, j):
                return None
            return openai_call(name, arguments), j + len(self.syntax.end)
        return None

    def streamable(self, text: str) -> int:
        """How much of `text` (all the output so far, no call begun yet) may stream as
        content: up to where a trigger may begin."""
        trig = self.syntax.trigger
        k = text.find(trig)
        if k >= 0:
            return k
        for n in range(min(len(trig) - 1, len(text)), 0, -1):
            if trig.startswith(text[-n:]):
                return len(text) - n
        return len(text)
