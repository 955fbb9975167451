"""Tool specs and tool calls: building specs, parsing `function.arguments` JSON strings with
clear errors, checking them against a small JSON Schema subset, and answering every call of an
assistant message with a tool message (as the Rust `ToolBox` does)."""

from __future__ import annotations

import json
from typing import Any, Callable, Mapping

from .messages import tool_message

#: How much of malformed arguments an error message quotes.
ARGUMENT_EXCERPT_CHARS = 200


class ToolCallError(Exception):
    """A tool call that cannot be carried out. `invalid` marks a malformed call (unknown tool,
    bad arguments): an invalid action; otherwise the tool ran and failed."""

    def __init__(self, message: str, invalid: bool = True, hint: str = ""):
        super().__init__(message)
        self.invalid = invalid
        self.hint = hint


def tool_spec(name: str, description: str, parameters: Mapping[str, Any]) -> dict:
    """An OpenAI-shaped function tool spec."""
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": dict(parameters)},
    }


def tool_calls(action: Mapping[str, Any]) -> list[dict]:
    """The tool calls of an assistant message (an empty list when it has none)."""
    return list(action.get("tool_calls") or [])


def _excerpt(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def parse_arguments(call: Mapping[str, Any]) -> dict:
    """The arguments of `call` as a dict: `function.arguments` is a JSON string holding an
    object (empty means `{}`); anything else raises `ToolCallError` saying what is wrong."""
    function = call.get("function") or {}
    raw = function.get("arguments", "")
    if not isinstance(raw, str):
        raise ToolCallError(
            "invalid arguments: `function.arguments` must be a JSON string, "
            f"got {type(raw).__name__}"
        )
    raw = raw.strip()
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ToolCallError(
            f"invalid arguments: arguments are not valid JSON ({e}): "
            f"{json.dumps(_excerpt(raw, ARGUMENT_EXCERPT_CHARS))}"
        ) from None
    if not isinstance(value, dict):
        raise ToolCallError(
            f"invalid arguments: arguments must be a JSON object, got {json.dumps(value)[:80]}"
        )
    return value


_TYPES: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool)
    or isinstance(v, float) and v.is_integer(),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "null": lambda v: v is None,
}


def schema_violations(schema: Mapping[str, Any], value: Any, path: str = "") -> list[str]:
    """What in `value` breaks `schema` (a subset of JSON Schema: `type`, `properties`,
    `required`, `additionalProperties: false`, `enum`, `minimum`, `maximum`, `items`)."""
    where = path or "arguments"
    kinds = schema.get("type")
    if kinds is not None:
        names = [kinds] if isinstance(kinds, str) else list(kinds)
        if not any(_TYPES.get(k, lambda _v: True)(value) for k in names):
            return [f"{where}: expected {' or '.join(names)}, got {json.dumps(value)[:80]}"]
    problems: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{where}: must be one of {json.dumps(schema['enum'])}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            problems.append(f"{where}: {value} is less than the minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            problems.append(f"{where}: {value} is more than the maximum {schema['maximum']}")
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for name in schema.get("required") or []:
            if name not in value:
                problems.append(f"{where}: missing required property `{name}`")
        for name, item in value.items():
            sub = f"{path}.{name}" if path else name
            if name in props:
                problems.extend(schema_violations(props[name], item, sub))
            elif schema.get("additionalProperties") is False:
                problems.append(f"{where}: unknown property `{name}`")
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for i, item in enumerate(value):
            problems.extend(schema_violations(schema["items"], item, f"{where}[{i}]"))
    return problems


Handler = Callable[[dict], Any]


def run_tool_calls(
    action: Mapping[str, Any], specs: list[dict], handlers: Mapping[str, Handler]
) -> tuple[list[dict], dict]:
    """Answers every tool call of `action` with a tool message, in order: finds the handler
    for the call's function name, parses and checks its arguments against the spec's
    `parameters`, and calls it with them (its result becomes the message text). A failure is a
    tool message `error: ...`; returns the messages and metrics `{tool_calls, tool_errors,
    invalid_action}` (`invalid_action` set when some call was malformed)."""
    by_name = {s["function"]["name"]: s for s in specs}
    out: list[dict] = []
    errors = 0
    invalid: list[str] = []
    for call in tool_calls(action):
        name = (call.get("function") or {}).get("name", "")
        try:
            if name not in handlers or name not in by_name:
                available = ", ".join(sorted(set(handlers) & set(by_name)))
                raise ToolCallError(f"unknown tool `{name}`",
                                    hint=f" (available tools: {available})")
            args = parse_arguments(call)
            problems = schema_violations(by_name[name]["function"].get("parameters") or {}, args)
            if problems:
                raise ToolCallError("invalid arguments: " + "; ".join(problems))
            result = handlers[name](args)
            text = result if isinstance(result, str) else json.dumps(result)
            out.append(tool_message(call.get("id", ""), text))
        except ToolCallError as e:
            errors += 1
            if e.invalid:
                invalid.append(str(e))
            out.append(tool_message(call.get("id", ""), f"error: {e}{e.hint}"))
        except Exception as e:  # a failing tool is an error answer, as a panic is in Rust
            errors += 1
            out.append(tool_message(call.get("id", ""), f"error: tool `{name}` failed: {e!r}"))
    metrics: dict = {"tool_calls": len(out), "tool_errors": errors}
    if invalid:
        metrics["invalid_action"] = "; ".join(invalid)
    return out, metrics
