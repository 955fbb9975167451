//! The pieces of an OpenAI-shaped answer that the whole and the streamed answers share: the
//! generated text cut at stop strings, the assistant message with parsed tool calls, finish and
//! stop reasons, token usage and the creation time.

use agentrl_core::{FinishReason, Generation, Message};
use serde_json::{Value, json};

use super::model::Codec;
use crate::ParsedAction;

/// Seconds since the Unix epoch (OpenAI's `created`).
pub(crate) fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// OpenAI's finish reason of a generation: `stop` or `length`.
pub(crate) fn finish_name(g: &Generation) -> &'static str {
    match g.finish {
        FinishReason::Stop => "stop",
        FinishReason::Length => "length",
    }
}

/// The generated text as OpenAI returns it: without the final stop id, and cut before the
/// stop string that ended generation.
pub(crate) fn output_text(codec: &Codec, g: &Generation) -> String {
    match (&g.matched_stop, g.finish, g.ids.split_last()) {
        (Some(stop), _, _) => cut_at(codec.decode(&g.ids), stop),
        (None, FinishReason::Stop, Some((_, rest))) => codec.decode(rest),
        _ => codec.decode(&g.ids),
    }
}

/// `text` up to the first occurrence of `stop` (all of it when `stop` does not occur).
fn cut_at(mut text: String, stop: &str) -> String {
    if let Some(at) = text.find(stop) {
        text.truncate(at);
    }
    text
}

/// The assistant message of a chat answer and its OpenAI finish reason. With `tools` (the
/// request offered some), tool calls are parsed from the ids and the content is cut before a
/// matched stop string; without, nothing is parsed (as vLLM does): the content is the
/// generated text ([`output_text`]), whatever markup the model wrote, so no text is lost and
/// the streamed deltas add up to it.
pub(crate) fn chat_message(
    codec: &Codec,
    g: &Generation,
    call_prefix: &str,
    tools: bool,
) -> (ParsedAction, &'static str) {
    if !tools {
        let message = Message::assistant(output_text(codec, g));
        return (
            ParsedAction {
                message,
                error: None,
            },
            finish_name(g),
        );
    }
    let mut parsed = codec.format().parse_assistant(&g.ids, call_prefix);
    if let (Some(stop), Some(content)) = (&g.matched_stop, &mut parsed.message.content) {
        *content = cut_at(std::mem::take(content), stop);
    }
    let finish = if parsed.message.tool_calls.is_empty() {
        finish_name(g)
    } else {
        "tool_calls"
    };
    (parsed, finish)
}

/// vLLM's `stop_reason`: the matched stop string, else the stop id that ended generation.
pub(crate) fn stop_reason(g: &Generation) -> Value {
    match (&g.matched_stop, g.finish) {
        (Some(stop), _) => json!(stop),
        (None, FinishReason::Stop) => json!(g.ids.last()),
        (None, FinishReason::Length) => Value::Null,
    }
}

/// OpenAI's `usage` object.
pub(crate) fn usage(prompt: usize, completion: usize) -> Value {
    json!({"prompt_tokens": prompt, "completion_tokens": completion,
           "total_tokens": prompt + completion})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ChatFormat, TinyChatFormat};
    use agentrl_core::ToolCall;

    #[test]
    fn tool_calls_are_parsed_only_when_the_request_offered_tools() {
        let format = TinyChatFormat::new();
        let call = ToolCall::new("c0", "calculator", &json!({"expression": "6*7"}));
        let ids = format.render_assistant(&Message::assistant_tool_calls(None, vec![call]));
        let mut g = Generation::empty(0);
        g.ids = ids;
        g.finish = FinishReason::Stop;
        let codec = Codec::Tiny(format);

        let (parsed, finish) = chat_message(&codec, &g, "call_0_0_", true);
        assert_eq!(finish, "tool_calls");
        assert_eq!(parsed.message.tool_calls.len(), 1);
        assert_eq!(parsed.message.tool_calls[0].function.name, "calculator");
        assert_eq!(parsed.message.tool_calls[0].id, "call_0_0_0");

        // Without tools the markup is the answer's text, as the stream sends it.
        let (parsed, finish) = chat_message(&codec, &g, "call_0_0_", false);
        assert_eq!(finish, "stop");
        assert!(parsed.message.tool_calls.is_empty());
        assert_eq!(parsed.error, None);
        let text = parsed.message.content.unwrap_or_default();
        assert_eq!(text, output_text(&codec, &g));
        assert!(
            text.contains("calculator") && text.contains("6*7"),
            "{text}"
        );
    }
}
