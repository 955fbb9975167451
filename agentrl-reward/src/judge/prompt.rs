//! The text a judge reads: a rubric, the conversation, and how to answer.

use agentrl_core::{Role, Trajectory};

use super::parse::ScoreScale;

/// The conversation of `trajectory` as plain lines (`user: ...`, `assistant calls NAME(ARGS)`,
/// `tool: ...`), keeping only its last `max_chars` characters (marked with `…` when cut).
pub fn transcript(trajectory: &Trajectory, max_chars: usize) -> String {
    let mut lines = Vec::with_capacity(trajectory.messages.len());
    for m in &trajectory.messages {
        let role = match m.role {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        };
        if !m.text().is_empty() || m.tool_calls.is_empty() {
            lines.push(format!("{role}: {}", m.text()));
        }
        for call in &m.tool_calls {
            lines.push(format!(
                "{role} calls {}({})",
                call.function.name, call.function.arguments
            ));
        }
    }
    keep_last_chars(&lines.join("\n"), max_chars)
}

/// The last `max_chars` characters of `text`, prefixed with `…` when anything was cut.
fn keep_last_chars(text: &str, max_chars: usize) -> String {
    let count = text.chars().count();
    if count <= max_chars {
        return text.to_string();
    }
    let keep = max_chars.saturating_sub(1);
    let start = text
        .char_indices()
        .nth(count - keep)
        .map_or(text.len(), |(i, _)| i);
    format!("…{}", &text[start..])
}

/// The full judge prompt: the rubric, the transcript, and the requested answer form.
pub fn judge_prompt(rubric: &str, transcript: &str, scale: &ScoreScale) -> String {
    format!(
        "{}\n\nConversation:\n{transcript}\n\nGrade it from {} to {}. Answer \"Score: N\".",
        rubric.trim(),
        scale.min,
        scale.max
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cutting_keeps_the_end_and_respects_char_boundaries() {
        assert_eq!(keep_last_chars("abc", 3), "abc");
        assert_eq!(keep_last_chars("abcdef", 4), "…def");
        assert_eq!(keep_last_chars("ééééé", 3), "…éé");
        assert_eq!(keep_last_chars("abc", 0), "…");
        assert_eq!(keep_last_chars("abc", 1), "…");
    }

    #[test]
    fn prompt_names_the_scale() {
        let p = judge_prompt(" Be strict. ", "user: hi", &ScoreScale::default());
        assert!(
            p.starts_with("Be strict.\n\nConversation:\nuser: hi"),
            "{p}"
        );
        assert!(
            p.ends_with("Grade it from 0 to 10. Answer \"Score: N\"."),
            "{p}"
        );
    }
}
