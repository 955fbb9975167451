//! Demonstrations for behaviour cloning: solver episodes turned into token-exact trajectories.

use agentrl_core::{FinishReason, Message, Result, Role, Split, Task, ToolSpec, Trajectory, Turn};
use agentrl_env::{EnvFactory, Solver, run_solver_episode};
use agentrl_policy::ChatFormat;

/// Tokenises a finished conversation: every assistant message becomes a policy turn (trained
/// on), everything else becomes injected ids (not trained on).
pub fn conversation_to_trajectory(
    format: &dyn ChatFormat,
    task: &Task,
    messages: &[Message],
    tools: &[ToolSpec],
    success: bool,
) -> Trajectory {
    let mut turns = Vec::new();
    let first_assistant = messages
        .iter()
        .position(|m| m.role == Role::Assistant)
        .unwrap_or(messages.len());
    let mut injected = format.render_prompt(&messages[..first_assistant], tools);
    let mut i = first_assistant;
    while i < messages.len() {
        let generated = format.render_assistant(&messages[i]);
        let next_assistant = messages[i + 1..]
            .iter()
            .position(|m| m.role == Role::Assistant)
            .map_or(messages.len(), |p| i + 1 + p);
        turns.push(Turn {
            injected_ids: std::mem::take(&mut injected),
            logprobs: vec![0.0; generated.len()],
            generated_ids: generated,
            policy_version: 0,
            policy_name: Some("demonstrator".into()),
            finish: FinishReason::Stop,
            reward: 0.0,
            stale: false,
            invalid_action: None,
        });
        if next_assistant < messages.len() {
            injected = format.render_continuation(true, &messages[i + 1..next_assistant]);
        }
        i = next_assistant;
    }
    Trajectory::for_task(task, 0)
        .with_messages(messages.to_vec())
        .with_turns(turns)
        .with_success(success)
        .with_reward(if success { 1.0 } else { 0.0 })
}

/// Plays `n` train-split tasks (indices `first..first+n`) with `solver` and returns the
/// tokenised demonstrations.
pub async fn collect_demonstrations(
    factory: &dyn EnvFactory,
    solver: &mut dyn Solver,
    format: &dyn ChatFormat,
    first: u64,
    n: usize,
) -> Result<Vec<Trajectory>> {
    let mut out = Vec::with_capacity(n);
    let progress = crate::progress::phase("demos", n as u64);
    for index in first..first + n as u64 {
        let task = factory.task(Split::Train, index);
        let episode = run_solver_episode(factory, solver, &task).await?;
        out.push(conversation_to_trajectory(
            format,
            &task,
            &episode.messages,
            &episode.tools,
            episode.success,
        ));
        progress.inc(1);
    }
    progress.finish();
    Ok(out)
}
