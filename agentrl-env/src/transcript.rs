//! Reading a conversation back for scripted solvers: each tool call paired with the tool
//! message that answered it.

use agentrl_core::{Message, Role};
use serde_json::Value;

/// One call of a tool and the text of its answer (if one came).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Exchange<'a> {
    /// The parsed arguments (`Value::Null` when they were not JSON).
    pub args: Value,
    /// The answering tool message's text.
    pub answer: Option<&'a str>,
}

/// The calls of tool `name` in `history`, in order, with their answers.
pub(crate) fn exchanges<'a>(history: &'a [Message], name: &str) -> Vec<Exchange<'a>> {
    let mut out = Vec::new();
    for (i, message) in history.iter().enumerate() {
        if message.role != Role::Assistant {
            continue;
        }
        for call in message
            .tool_calls
            .iter()
            .filter(|c| c.function.name == name)
        {
            let answer = history[i + 1..]
                .iter()
                .find(|m| m.role == Role::Tool && m.tool_call_id.as_deref() == Some(&call.id))
                .map(Message::text);
            out.push(Exchange {
                args: call.function.parse_arguments().unwrap_or(Value::Null),
                answer,
            });
        }
    }
    out
}
