//! Helpers shared by the envs: error observations for malformed actions, final steps, role
//! checks, running a message's tool calls through a [`ToolBox`], and the seeded draw and split
//! rule of task generation.

use agentrl_core::{Error, Message, Result, Role, SeededRng, Split, Step, StepInfo, ToolContext};
use agentrl_tools::ToolBox;

/// A step that answers an unusable action with an `error: ...` user message and lets the
/// episode go on; `hint` tells the agent what to do instead.
pub(crate) fn invalid_step(reason: &str, hint: &str) -> Step {
    Step {
        messages: vec![Message::user(format!("error: {reason}; {hint}"))],
        reward: 0.0,
        terminated: false,
        truncated: false,
        info: StepInfo {
            invalid_action: Some(reason.to_string()),
            ..StepInfo::default()
        },
    }
}

/// A step that goes on with `messages` and no reward.
pub(crate) fn continue_step(messages: Vec<Message>, info: StepInfo) -> Step {
    Step {
        messages,
        reward: 0.0,
        terminated: false,
        truncated: false,
        info,
    }
}

/// The terminal step of an episode: reward 1 on success, 0 otherwise.
pub(crate) fn final_step(messages: Vec<Message>, success: bool, mut info: StepInfo) -> Step {
    info.success = Some(success);
    Step {
        messages,
        reward: if success { 1.0 } else { 0.0 },
        terminated: true,
        truncated: false,
        info,
    }
}

/// Why `action` is not an assistant message, if it is not.
pub(crate) fn wrong_role(action: &Message) -> Option<String> {
    let name = match action.role {
        Role::Assistant => return None,
        Role::System => "system",
        Role::User => "user",
        Role::Tool => "tool",
    };
    Some(format!("message role is {name}, expected assistant"))
}

/// The invalid-action step for an action that must call a tool but is not an assistant message,
/// is empty, or has no tool call; `None` when it calls tools.
pub(crate) fn require_tool_calls(action: &Message, hint: &str) -> Option<Step> {
    if let Some(reason) = wrong_role(action) {
        return Some(invalid_step(&reason, hint));
    }
    if !action.tool_calls.is_empty() {
        return None;
    }
    let reason = if action.text().trim().is_empty() {
        "empty message"
    } else {
        "no tool call"
    };
    Some(invalid_step(reason, hint))
}

/// Dispatches every tool call of `action` in order, stopping early once `stop()` holds, and
/// reports the tool messages with the call and error counts (malformed calls set
/// `invalid_action`).
///
/// A tool that could not run at all ([`ToolOutcome::is_unavailable`], e.g. a sandbox that
/// cannot start) is env `env_id`'s error: the episode ends as an env error, which the trainer
/// counts and leaves out of training, instead of teaching the agent that the tool fails.
///
/// [`ToolOutcome::is_unavailable`]: agentrl_tools::ToolOutcome::is_unavailable
pub(crate) async fn run_tool_calls(
    env_id: &str,
    toolbox: &ToolBox,
    ctx: &ToolContext,
    action: &Message,
    stop: impl Fn() -> bool,
) -> Result<(Vec<Message>, StepInfo)> {
    let mut info = StepInfo::default();
    let mut messages = Vec::with_capacity(action.tool_calls.len());
    let mut invalid = Vec::new();
    for call in &action.tool_calls {
        if stop() {
            break;
        }
        let outcome = toolbox.dispatch(call, ctx).await;
        info.tool_calls += 1;
        if let Some(error) = &outcome.error {
            if outcome.is_unavailable() {
                let tool = &call.function.name;
                return Err(Error::env(
                    env_id,
                    format!("tool `{tool}` could not run: {error}"),
                ));
            }
            info.tool_errors += 1;
            if outcome.is_invalid_action() {
                invalid.push(error.to_string());
            }
        }
        messages.push(outcome.message);
    }
    if !invalid.is_empty() {
        info.invalid_action = Some(invalid.join("; "));
    }
    Ok((messages, info))
}

/// Whether `split` is the test split under the shared rule: test iff the stable hash of the
/// task's defining text is divisible by 5.
pub(crate) fn split_of_text(text: &str) -> Split {
    if agentrl_core::stable_hash(text).is_multiple_of(5) {
        Split::Test
    } else {
        Split::Train
    }
}

/// Candidate `index` of `split` for generator `seed`: the first one `draw` accepts (answers
/// `Some` for), each drawn from a fresh `SeededRng::from_parts(&[seed, split, index, attempt])`
/// for attempt 0, 1, 2, ...
pub(crate) fn draw_in_split<T>(
    seed: u64,
    split: Split,
    index: u64,
    mut draw: impl FnMut(&mut SeededRng) -> Option<T>,
) -> T {
    let mut attempt: u64 = 0;
    loop {
        let mut rng = SeededRng::from_parts(&[seed, split as u64, index, attempt]);
        if let Some(found) = draw(&mut rng) {
            return found;
        }
        attempt = attempt.wrapping_add(1);
    }
}
