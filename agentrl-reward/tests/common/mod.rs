//! Hand-built trajectories for reward tests.

#![allow(dead_code)]

use agentrl_core::{FinishReason, Message, Outcome, Split, ToolCall, Trajectory, Turn};

/// A turn that generated `generated` tokens; `invalid` marks a rejected action.
pub fn turn(generated: usize, invalid: bool) -> Turn {
    Turn {
        injected_ids: vec![1, 2, 3],
        generated_ids: vec![7; generated],
        logprobs: vec![-0.5; generated],
        policy_version: 0,
        policy_name: None,
        finish: FinishReason::Stop,
        reward: 0.0,
        stale: false,
        invalid_action: invalid.then(|| "malformed tool call".to_string()),
    }
}

/// A trajectory with the given turns, ending with `answer` as the last assistant message
/// (or with a tool call when `answer` is `None`).
pub fn trajectory(
    turns: Vec<Turn>,
    answer: Option<&str>,
    outcome: Outcome,
    success: bool,
) -> Trajectory {
    let call = ToolCall::new(
        "c1",
        "calculator",
        &serde_json::json!({"expression": "1+1"}),
    );
    let mut messages = vec![
        Message::user("What is 1+1?"),
        Message::assistant_tool_calls(None, vec![call]),
        Message::tool("c1", "2"),
    ];
    if let Some(answer) = answer {
        messages.push(Message::assistant(answer));
    }
    Trajectory::new("arith", "t1", Split::Train, 0)
        .with_messages(messages)
        .with_turns(turns)
        .with_outcome(outcome)
        .with_success(success)
        .with_tool_calls(1, 0)
}

/// A solved, completed two-turn trajectory with a final answer.
pub fn solved() -> Trajectory {
    trajectory(
        vec![turn(10, false), turn(5, false)],
        Some("2"),
        Outcome::Completed,
        true,
    )
}
