"""Wire types of the env protocol: chat messages, tasks and statuses, checked exactly as the
Rust server's serde types accept them (a `WireError` says which field is wrong and why)."""

from __future__ import annotations

from typing import Any

#: Message roles, in the order the Rust `Role` enum lists them.
ROLES = ("system", "user", "assistant", "tool")

#: Task splits.
SPLITS = ("train", "test")

#: Sample statuses (the Rust `SampleStatus`, snake_case on the wire).
STATUSES = (
    "running",
    "completed",
    "agent_context_limit",
    "agent_validation_failed",
    "agent_invalid_action",
    "task_limit_reached",
    "task_error",
    "cancelled",
)

#: Statuses in which a sample goes on; every other status finishes it.
UNFINISHED = ("running", "agent_invalid_action")

#: Largest value of an unsigned 64-bit index.
U64_MAX = 2**64 - 1


class WireError(ValueError):
    """A JSON value that does not have the shape a protocol type needs."""


def _at(what: str, problem: str) -> WireError:
    """The error `problem` at `what` (no prefix for the top-level value, named "")."""
    return WireError(f"{what}: {problem}" if what else problem)


def _kind(value: Any) -> str:
    """How serde names the JSON type of `value` in its error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean `{'true' if value else 'false'}`"
    if isinstance(value, int):
        return f"integer `{value}`"
    if isinstance(value, float):
        return f"floating point `{value}`"
    if isinstance(value, str):
        return f'string "{value}"'
    if isinstance(value, list):
        return "sequence"
    return "map"


def expect_object(value: Any, what: str) -> dict:
    """`value` as a JSON object, or a `WireError` naming `what`."""
    if not isinstance(value, dict):
        raise _at(what, f"invalid type: {_kind(value)}, expected a map")
    return value


def field(obj: dict, name: str, what: str, optional: bool = False) -> Any:
    """The value of `obj[name]`; a `WireError` when it is missing and not `optional`."""
    if name not in obj:
        if optional:
            return None
        raise _at(what, f"missing field `{name}`")
    return obj[name]


def string(value: Any, what: str, optional: bool = False) -> str | None:
    """`value` as a string (or None when `optional` and null)."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise _at(what, f"invalid type: {_kind(value)}, expected a string")
    return value


def u64(value: Any, what: str, optional: bool = False) -> int | None:
    """`value` as an unsigned 64-bit integer (or None when `optional` and null)."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _at(what, f"invalid type: {_kind(value)}, expected u64")
    if not 0 <= value <= U64_MAX:
        raise _at(what, f"invalid value: {_kind(value)}, expected u64")
    return value


def split(value: Any, what: str, optional: bool = False) -> str | None:
    """`value` as a split name (`train` or `test`)."""
    text = string(value, what, optional)
    if text is not None and text not in SPLITS:
        raise _at(what, f"unknown variant `{text}`, expected `train` or `test`")
    return text


def tool_call(value: Any, what: str) -> dict:
    """A checked tool call `{id, type, function: {name, arguments}}` (`type` defaults to
    `function`)."""
    call = expect_object(value, what)
    function = expect_object(field(call, "function", what), f"{what}.function")
    return {
        "id": string(field(call, "id", what), f"{what}.id"),
        "type": string(call.get("type", "function"), f"{what}.type"),
        "function": {
            "name": string(field(function, "name", f"{what}.function"), f"{what}.function.name"),
            "arguments": string(
                field(function, "arguments", f"{what}.function"), f"{what}.function.arguments"
            ),
        },
    }


def message(value: Any, what: str = "message") -> dict:
    """A checked chat message in the shape the Rust `Message` serialises to: `content` always
    present (maybe null), `tool_calls`/`tool_call_id`/`name` only when set."""
    msg = expect_object(value, what)
    role = string(field(msg, "role", what), f"{what}.role")
    if role not in ROLES:
        expected = ", ".join(f"`{r}`" for r in ROLES)
        raise _at(f"{what}.role", f"unknown variant `{role}`, expected one of {expected}")
    out: dict = {"role": role, "content": string(msg.get("content"), f"{what}.content", True)}
    calls = msg.get("tool_calls")
    if calls is not None:
        if not isinstance(calls, list):
            raise _at(f"{what}.tool_calls", f"invalid type: {_kind(calls)}, expected a sequence")
        checked = [tool_call(c, f"{what}.tool_calls[{i}]") for i, c in enumerate(calls)]
        if checked:
            out["tool_calls"] = checked
    for key in ("tool_call_id", "name"):
        text = string(msg.get(key), f"{what}.{key}", True)
        if text is not None:
            out[key] = text
    return out


def messages(value: Any, what: str = "messages") -> list[dict]:
    """A checked list of chat messages."""
    if not isinstance(value, list):
        raise _at(what, f"invalid type: {_kind(value)}, expected a sequence")
    return [message(m, f"{what}[{i}]") for i, m in enumerate(value)]


def task(value: Any, what: str = "custom_task") -> dict:
    """A checked task `{env_id, id, split, data}`."""
    obj = expect_object(value, what)
    return {
        "env_id": string(field(obj, "env_id", what), f"{what}.env_id"),
        "id": string(field(obj, "id", what), f"{what}.id"),
        "split": split(field(obj, "split", what), f"{what}.split"),
        "data": field(obj, "data", what),
    }


def tool_spec(value: Any, what: str = "tool") -> dict:
    """A checked tool spec `{type, function: {name, description, parameters}}`."""
    spec = expect_object(value, what)
    function = expect_object(field(spec, "function", what), f"{what}.function")
    return {
        "type": string(spec.get("type", "function"), f"{what}.type"),
        "function": {
            "name": string(field(function, "name", f"{what}.function"), f"{what}.function.name"),
            "description": string(
                function.get("description", ""), f"{what}.function.description"
            ),
            "parameters": function.get("parameters"),
        },
    }
