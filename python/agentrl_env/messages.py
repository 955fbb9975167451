"""Chat message constructors in the OpenAI shape the Rust `Message` type uses."""

from __future__ import annotations

import json
from typing import Any


def system(text: str) -> dict:
    """A system message."""
    return {"role": "system", "content": text}


def user(text: str) -> dict:
    """A user message (task statements, error observations)."""
    return {"role": "user", "content": text}


def assistant(text: str | None, tool_calls: list[dict] | None = None) -> dict:
    """An assistant message, with tool calls when given."""
    msg: dict[str, Any] = {"role": "assistant", "content": text}
    if tool_calls:
        msg["tool_calls"] = list(tool_calls)
    return msg


def tool_message(call_id: str, text: str) -> dict:
    """A tool message answering the call `call_id`."""
    return {"role": "tool", "content": text, "tool_call_id": call_id}


def tool_call(call_id: str, name: str, arguments: Any) -> dict:
    """A tool call; `arguments` is a JSON string, or a value that is encoded as one."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def text_of(msg: dict) -> str:
    """The text content of a message (`""` when there is none)."""
    content = msg.get("content")
    return content if isinstance(content, str) else ""
