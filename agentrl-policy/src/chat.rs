//! Chat formats: messages and tool specs to token ids, and generated ids back to messages.

use agentrl_core::{Message, Role, TokenId, ToolCall, ToolSpec};

use crate::tokenizer::ByteTokenizer;

/// An assistant message parsed from generated ids, with the reason when the output was malformed.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedAction {
    /// The message to send to the env. Malformed tool calls are kept (raw arguments, or an
    /// empty name) so the env answers them with an error observation.
    pub message: Message,
    /// Why the output was malformed, if it was.
    pub error: Option<String>,
}

/// Renders conversations to ids and parses generations back, token-exactly across turns.
///
/// Contract: `render_prompt(a) ++ render_assistant(m) ++ render_continuation(true, b)` equals
/// `render_prompt(a ++ [m] ++ b)` for the same tools, so multi-turn prompts are extended, never
/// re-tokenised.
pub trait ChatFormat: Send + Sync {
    /// Size of the vocabulary the ids come from.
    fn vocab_size(&self) -> usize;
    /// The ids of a conversation, ending with the header of the assistant's next message.
    fn render_prompt(&self, messages: &[Message], tools: &[ToolSpec]) -> Vec<TokenId>;
    /// The ids to append after a generated assistant message: env messages, then the next
    /// assistant header. `generation_closed` is false when the generation was cut before its stop id.
    fn render_continuation(&self, generation_closed: bool, messages: &[Message]) -> Vec<TokenId>;
    /// The ids the assistant generates for `message` (after its header, including the stop id).
    fn render_assistant(&self, message: &Message) -> Vec<TokenId>;
    /// Parses generated ids into an assistant message; never fails.
    fn parse_assistant(&self, ids: &[TokenId], call_id_prefix: &str) -> ParsedAction;
    /// Ids that end an assistant message.
    fn stop_ids(&self) -> Vec<TokenId>;
    /// Ids as readable text (for logs).
    fn decode(&self, ids: &[TokenId]) -> String;
}

/// The compact chat format of the tiny byte-level models:
///
/// ```text
/// <|tools|>calculator(expression)<|end|><|user|>Compute 2*3<|end|>
/// <|assistant|><|tool_call|>calculator{"expression":"2*3"}<|/tool_call|><|end|>
/// <|tool|>6<|end|><|assistant|>6<|end|>
/// ```
/// (line breaks added for reading; there are none in the ids).
#[derive(Debug, Clone, Copy, Default)]
pub struct TinyChatFormat {
    tokenizer: ByteTokenizer,
}

impl TinyChatFormat {
    /// The format over the byte tokenizer.
    pub fn new() -> Self {
        TinyChatFormat::default()
    }

    fn render_tools(&self, tools: &[ToolSpec], out: &mut Vec<TokenId>) {
        if tools.is_empty() {
            return;
        }
        out.push(ByteTokenizer::SPECIAL.tools);
        for (i, tool) in tools.iter().enumerate() {
            if i > 0 {
                self.tokenizer.encode_into(",", out);
            }
            self.tokenizer.encode_into(tool.name(), out);
            let params: Vec<&str> = tool
                .function
                .parameters
                .get("properties")
                .and_then(|p| p.as_object())
                .map(|p| p.keys().map(String::as_str).collect())
                .unwrap_or_default();
            self.tokenizer
                .encode_into(&format!("({})", params.join(",")), out);
        }
        out.push(ByteTokenizer::SPECIAL.end);
    }

    fn render_message(&self, message: &Message, out: &mut Vec<TokenId>) {
        let s = ByteTokenizer::SPECIAL;
        let header = match message.role {
            Role::System => s.system,
            Role::User => s.user,
            Role::Assistant => s.assistant,
            Role::Tool => s.tool,
        };
        out.push(header);
        if message.role == Role::Assistant {
            self.render_assistant_into(message, out);
        } else {
            self.tokenizer.encode_into(message.text(), out);
            out.push(s.end);
        }
    }

    fn render_assistant_into(&self, message: &Message, out: &mut Vec<TokenId>) {
        let s = ByteTokenizer::SPECIAL;
        self.tokenizer.encode_into(message.text(), out);
        for call in &message.tool_calls {
            out.push(s.tool_call);
            self.tokenizer.encode_into(&call.function.name, out);
            self.tokenizer.encode_into(&call.function.arguments, out);
            out.push(s.tool_call_end);
        }
        out.push(s.end);
    }
}

impl ChatFormat for TinyChatFormat {
    fn vocab_size(&self) -> usize {
        ByteTokenizer::VOCAB_SIZE
    }

    fn render_prompt(&self, messages: &[Message], tools: &[ToolSpec]) -> Vec<TokenId> {
        let mut out = Vec::with_capacity(64);
        self.render_tools(tools, &mut out);
        for m in messages {
            self.render_message(m, &mut out);
        }
        out.push(ByteTokenizer::SPECIAL.assistant);
        out
    }

    fn render_continuation(&self, generation_closed: bool, messages: &[Message]) -> Vec<TokenId> {
        let mut out = Vec::with_capacity(32);
        if !generation_closed {
            out.push(ByteTokenizer::SPECIAL.end);
        }
        for m in messages {
            self.render_message(m, &mut out);
        }
        out.push(ByteTokenizer::SPECIAL.assistant);
        out
    }

    fn render_assistant(&self, message: &Message) -> Vec<TokenId> {
        let mut out = Vec::with_capacity(32);
        self.render_assistant_into(message, &mut out);
        out
    }

    fn parse_assistant(&self, ids: &[TokenId], call_id_prefix: &str) -> ParsedAction {
        let s = ByteTokenizer::SPECIAL;
        let mut errors: Vec<String> = Vec::new();
        let body = match ids.split_last() {
            Some((&last, rest)) if last == s.end => rest,
            _ => {
                errors.push("generation ended before <|end|>".to_string());
                ids
            }
        };
        let mut content_ids: Vec<TokenId> = Vec::new();
        let mut calls: Vec<ToolCall> = Vec::new();
        let mut i = 0;
        while i < body.len() {
            let id = body[i];
            if id == s.tool_call {
                let start = i + 1;
                let close = body[start..].iter().position(|&t| t == s.tool_call_end);
                let end = close.map_or(body.len(), |c| start + c);
                if close.is_none() {
                    errors.push("tool call without <|/tool_call|>".to_string());
                }
                let raw = self.tokenizer.decode_text(&body[start..end]);
                if body[start..end]
                    .iter()
                    .any(|&t| self.tokenizer.is_special(t))
                {
                    errors.push("special token inside a tool call".to_string());
                }
                let (name, arguments) = match raw.find('{') {
                    Some(p) => (raw[..p].trim().to_string(), raw[p..].trim().to_string()),
                    None => {
                        errors.push(format!("tool call {raw:?} has no JSON arguments"));
                        (raw.trim().to_string(), String::new())
                    }
                };
                let id = format!("{call_id_prefix}{}", calls.len());
                calls.push(ToolCall {
                    id,
                    kind: "function".to_string(),
                    function: agentrl_core::FunctionCall { name, arguments },
                });
                i = end + 1;
            } else {
                if self.tokenizer.is_special(id) {
                    errors.push(format!(
                        "unexpected special token {}",
                        self.tokenizer.decode(&[id])
                    ));
                } else if calls.is_empty() {
                    content_ids.push(id);
                }
                i += 1;
            }
        }
        let text = self.tokenizer.decode_text(&content_ids);
        let content = if text.is_empty() && !calls.is_empty() {
            None
        } else {
            Some(text)
        };
        ParsedAction {
            message: Message::assistant_tool_calls(content, calls),
            error: if errors.is_empty() {
                None
            } else {
                Some(errors.join("; "))
            },
        }
    }

    fn stop_ids(&self) -> Vec<TokenId> {
        vec![ByteTokenizer::SPECIAL.end]
    }

    fn decode(&self, ids: &[TokenId]) -> String {
        self.tokenizer.decode(ids)
    }
}
