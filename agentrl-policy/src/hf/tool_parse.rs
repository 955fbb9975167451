//! Tool-call parsers for the text models generate: Hermes/Qwen `<tool_call>` blocks and Llama 3
//! JSON calls. They never panic: what they cannot read is reported as an error string, and a
//! malformed call is still returned (empty name or raw arguments) so the env can answer it.

use agentrl_core::{FunctionCall, Message, ToolCall};
use serde_json::Value as Json;

use crate::ParsedAction;

/// Opening tag of a Hermes/Qwen tool call.
pub const TOOL_CALL_OPEN: &str = "<tool_call>";
/// Closing tag of a Hermes/Qwen tool call.
pub const TOOL_CALL_CLOSE: &str = "</tool_call>";
/// The token Llama 3 writes before a tool call.
pub const PYTHON_TAG: &str = "<|python_tag|>";

/// The pieces of an assistant message found in generated text.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParsedToolCalls {
    /// Text outside tool calls, trimmed (empty when there is none).
    pub content: String,
    /// The calls, in order; malformed ones keep what could be read.
    pub calls: Vec<FunctionCall>,
    /// What could not be read.
    pub errors: Vec<String>,
}

impl ParsedToolCalls {
    /// The assistant message (call ids `{call_id_prefix}{index}`) and the joined errors.
    pub fn into_action(self, call_id_prefix: &str) -> ParsedAction {
        let calls: Vec<ToolCall> = self
            .calls
            .into_iter()
            .enumerate()
            .map(|(i, function)| ToolCall {
                id: format!("{call_id_prefix}{i}"),
                kind: "function".to_string(),
                function,
            })
            .collect();
        let content = if self.content.is_empty() && !calls.is_empty() {
            None
        } else {
            Some(self.content)
        };
        ParsedAction {
            message: Message::assistant_tool_calls(content, calls),
            error: if self.errors.is_empty() {
                None
            } else {
                Some(self.errors.join("; "))
            },
        }
    }
}

/// Parses Hermes/Qwen tool calls: any number of
/// `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks in the text.
pub fn parse_hermes_tool_calls(text: &str) -> ParsedToolCalls {
    let mut out = ParsedToolCalls::default();
    let mut content = String::new();
    let mut rest = text;
    while let Some(start) = rest.find(TOOL_CALL_OPEN) {
        content.push_str(&rest[..start]);
        let after = &rest[start + TOOL_CALL_OPEN.len()..];
        let close = after.find(TOOL_CALL_CLOSE);
        let next_open = after.find(TOOL_CALL_OPEN);
        let (body, next) = match (close, next_open) {
            (Some(c), Some(o)) if o < c => {
                out.errors
                    .push(format!("{TOOL_CALL_OPEN} without {TOOL_CALL_CLOSE}"));
                (&after[..o], &after[o..])
            }
            (Some(c), _) => (&after[..c], &after[c + TOOL_CALL_CLOSE.len()..]),
            (None, Some(o)) => {
                out.errors
                    .push(format!("{TOOL_CALL_OPEN} without {TOOL_CALL_CLOSE}"));
                (&after[..o], &after[o..])
            }
            (None, None) => {
                out.errors
                    .push(format!("{TOOL_CALL_OPEN} without {TOOL_CALL_CLOSE}"));
                (after, "")
            }
        };
        read_calls(body, &mut out);
        rest = next;
    }
    content.push_str(rest);
    if content.contains(TOOL_CALL_CLOSE) {
        out.errors
            .push(format!("{TOOL_CALL_CLOSE} without {TOOL_CALL_OPEN}"));
    }
    out.content = content.trim().to_string();
    out
}

/// Parses Llama 3 JSON tool calls: the whole message is `{"name": ..., "parameters": {...}}`
/// (or `"arguments"`), optionally after `<|python_tag|>`, in a code fence, several separated by
/// `;` or whitespace. A message that does not start with `{`, `[` or the tag is plain content.
pub fn parse_llama3_tool_calls(text: &str) -> ParsedToolCalls {
    let mut out = ParsedToolCalls::default();
    let trimmed = text.trim();
    let (tagged, body) = match trimmed.strip_prefix(PYTHON_TAG) {
        Some(b) => (true, b.trim()),
        None => (false, trimmed),
    };
    let body = strip_fence(body);
    if !tagged && !body.starts_with('{') && !body.starts_with('[') {
        out.content = trimmed.to_string();
        return out;
    }
    read_calls(body, &mut out);
    out
}

/// Parses the tool calls of either family: Hermes blocks when the text has `<tool_call>` or
/// `</tool_call>`, Llama 3 JSON otherwise.
pub fn parse_tool_calls(text: &str) -> ParsedToolCalls {
    if text.contains(TOOL_CALL_OPEN) || text.contains(TOOL_CALL_CLOSE) {
        parse_hermes_tool_calls(text)
    } else {
        parse_llama3_tool_calls(text)
    }
}

/// Removes a surrounding Markdown code fence (```` ```json ... ``` ````), if any.
fn strip_fence(text: &str) -> &str {
    let t = text.trim();
    let Some(inner) = t.strip_prefix("```") else {
        return t;
    };
    // Drop the info string (`json`) up to the end of the first line.
    let inner = match inner.find('\n') {
        Some(nl)
            if inner[..nl]
                .trim()
                .chars()
                .all(|c| c.is_ascii_alphanumeric()) =>
        {
            &inner[nl + 1..]
        }
        _ => inner,
    };
    let inner = match inner.rfind("```") {
        Some(end) => &inner[..end],
        None => inner,
    };
    inner.trim()
}

/// Reads one or more JSON call objects (or arrays of them) from a call body.
///
/// A loop, not a recursion per call: generated text may hold any number of calls, and each
/// level of recursion would cost stack.
fn read_calls(body: &str, out: &mut ParsedToolCalls) {
    let mut body = strip_fence(body);
    if body.is_empty() {
        out.errors.push("empty tool call".to_string());
        out.calls.push(FunctionCall {
            name: String::new(),
            arguments: String::new(),
        });
        return;
    }
    loop {
        let mut stream = serde_json::Deserializer::from_str(body).into_iter::<Json>();
        match stream.next() {
            Some(Ok(value)) => {
                push_value(value, out);
                // Allow `;` or whitespace between calls; anything else is trailing text, ignored.
                let rest = body[stream.byte_offset()..].trim_start();
                let rest = rest.strip_prefix(';').unwrap_or(rest).trim_start();
                if !(rest.starts_with('{') || rest.starts_with('[')) {
                    return;
                }
                body = strip_fence(rest);
            }
            Some(Err(e)) => {
                out.errors
                    .push(format!("tool call is not valid JSON ({e}): {body:?}"));
                out.calls.push(FunctionCall {
                    name: guess_name(body),
                    arguments: body.to_string(),
                });
                return;
            }
            None => return,
        }
    }
}

/// Turns one JSON value into calls: an object, or an array of objects.
fn push_value(value: Json, out: &mut ParsedToolCalls) {
    match value {
        Json::Array(items) => {
            if items.is_empty() {
                out.errors.push("empty list of tool calls".to_string());
            }
            for item in items {
                push_object(item, out);
            }
        }
        other => push_object(other, out),
    }
}

fn push_object(value: Json, out: &mut ParsedToolCalls) {
    let Json::Object(mut obj) = value else {
        out.errors
            .push(format!("tool call is not a JSON object: {value}"));
        out.calls.push(FunctionCall {
            name: String::new(),
            arguments: value.to_string(),
        });
        return;
    };
    // Some models nest the call as in the OpenAI shape: {"function": {"name", "arguments"}}.
    if !obj.contains_key("name")
        && let Some(Json::Object(inner)) = obj.remove("function")
    {
        obj = inner;
    }
    let name = match obj.get("name") {
        Some(Json::String(s)) if !s.trim().is_empty() => s.trim().to_string(),
        Some(other) => {
            out.errors
                .push(format!("tool call has an invalid name: {other}"));
            String::new()
        }
        None => {
            out.errors.push("tool call has no \"name\"".to_string());
            String::new()
        }
    };
    let arguments = match obj.get("arguments").or_else(|| obj.get("parameters")) {
        None | Some(Json::Null) => "{}".to_string(),
        Some(Json::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    };
    out.calls.push(FunctionCall { name, arguments });
}

/// The value of `"name": "..."` in text that is not valid JSON, or `""`.
fn guess_name(body: &str) -> String {
    let Some(p) = body.find("\"name\"") else {
        return String::new();
    };
    let rest = body[p + 6..].trim_start();
    let Some(rest) = rest.strip_prefix(':') else {
        return String::new();
    };
    let Some(rest) = rest.trim_start().strip_prefix('"') else {
        return String::new();
    };
    rest.find('"')
        .map(|end| rest[..end].to_string())
        .unwrap_or_default()
}
