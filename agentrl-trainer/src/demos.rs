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

/// The demonstrations that do not fit the model's context, per env: behaviour cloning leaves
/// them out, so a kind of task whose solved episodes are all long is only ever seen failing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TooLong {
    /// Env id -> (demonstrations left out, the longest one's tokens), sorted by env id.
    pub per_env: std::collections::BTreeMap<String, (usize, usize)>,
    /// Of those left out, how many were successful episodes.
    pub successful: usize,
}

impl TooLong {
    /// The demonstrations of `demos` longer than `max_seq_len` tokens.
    pub fn of(demos: &[Trajectory], max_seq_len: usize) -> Self {
        let mut out = TooLong::default();
        for demo in demos {
            let tokens = demo.num_tokens();
            if tokens <= max_seq_len {
                continue;
            }
            let entry = out.per_env.entry(demo.env_id.clone()).or_default();
            entry.0 += 1;
            entry.1 = entry.1.max(tokens);
            out.successful += usize::from(demo.success);
        }
        out
    }

    /// Whether every demonstration fits.
    pub fn is_empty(&self) -> bool {
        self.per_env.is_empty()
    }

    /// One line for the log: how many were left out per env, and what to change.
    pub fn message(&self, max_seq_len: usize) -> String {
        let envs: Vec<String> = self
            .per_env
            .iter()
            .map(|(env, (n, longest))| format!("{env}: {n} (longest {longest} tokens)"))
            .collect();
        let longest = self.per_env.values().map(|(_, l)| *l).max().unwrap_or(0);
        format!(
            "SFT leaves out demonstrations longer than [model] max_seq_len = {max_seq_len} \
             tokens, {} of them successful: {}; raise max_seq_len to {longest} to keep them",
            self.successful,
            envs.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentrl_core::Split;

    fn demo(env: &str, tokens: usize, success: bool) -> Trajectory {
        let task = Task {
            env_id: env.into(),
            id: format!("{env}-{tokens}"),
            split: Split::Train,
            data: serde_json::Value::Null,
        };
        let mut t = Trajectory::for_task(&task, 0).with_success(success);
        t.turns.push(Turn {
            injected_ids: vec![1; tokens - 1],
            generated_ids: vec![2],
            logprobs: vec![0.0],
            policy_version: 0,
            policy_name: None,
            finish: FinishReason::Stop,
            reward: 0.0,
            stale: false,
            invalid_action: None,
        });
        t
    }

    #[test]
    fn demonstrations_past_the_context_are_counted_per_env() {
        let demos = vec![
            demo("sql", 700, true),
            demo("sql", 820, true),
            demo("sql", 790, false),
            demo("maze", 768, true),
            demo("shop", 900, true),
        ];
        let none = TooLong::of(&demos, 900);
        assert!(none.is_empty());
        let cut = TooLong::of(&demos, 768);
        assert_eq!(cut.per_env.len(), 2);
        assert_eq!(cut.per_env["sql"], (2, 820));
        assert_eq!(cut.per_env["shop"], (1, 900));
        assert_eq!(cut.successful, 2);
        let line = cut.message(768);
        assert!(
            line.contains("max_seq_len = 768")
                && line.contains("shop: 1 (longest 900 tokens), sql: 2 (longest 820 tokens)")
                && line.contains("2 of them successful")
                && line.contains("raise max_seq_len to 900"),
            "{line}"
        );
    }
}
