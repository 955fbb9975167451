//! Rollouts: one policy playing env sessions, many at a time, token in / token out.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use agentrl_core::{
    FinishReason, GenerationRequest, Message, Outcome, Policy, Result, SamplingParams, Task,
    Trajectory, Turn,
};
use agentrl_env::EnvFactory;
use agentrl_policy::ChatFormat;
use tokio::task::JoinSet;

/// What a rollout needs: where tasks and sessions come from, the policy, and its chat format.
#[derive(Clone)]
pub struct RolloutContext {
    /// Env factory.
    pub factory: Arc<dyn EnvFactory>,
    /// The policy that acts.
    pub policy: Arc<dyn Policy>,
    /// How conversations become ids and back.
    pub format: Arc<dyn ChatFormat>,
    /// The policy's context length; episodes that reach it end as truncated.
    pub max_seq_len: usize,
    /// Stop strings that end every generated turn, besides the format's stop ids (e.g.
    /// `</tool_call>` for a model that should act after each call).
    pub stop: Vec<String>,
}

/// Episodes started by this process; makes every episode's session id unique.
static EPISODES: AtomicU64 = AtomicU64::new(0);

fn empty_trajectory(task: &Task, group_id: u64, messages: Vec<Message>) -> Trajectory {
    Trajectory::for_task(task, group_id).with_messages(messages)
}

/// Plays one episode of `task`. Env failures end the episode with [`Outcome::EnvError`] and keep
/// everything recorded so far; only a failing policy is an `Err`.
pub async fn run_episode(
    ctx: &RolloutContext,
    task: &Task,
    params: &SamplingParams,
    group_id: u64,
) -> Result<Trajectory> {
    let mut env = ctx.factory.make();
    let obs = match env.reset(task).await {
        Ok(obs) => obs,
        Err(e) => {
            tracing::warn!(task = %task.id, "env reset failed: {e}");
            let mut t = empty_trajectory(task, group_id, Vec::new());
            t.outcome = Outcome::EnvError;
            return Ok(t);
        }
    };
    let mut params = params.clone();
    for id in ctx.format.stop_ids() {
        if !params.stop_ids.contains(&id) {
            params.stop_ids.push(id);
        }
    }
    for stop in &ctx.stop {
        if !params.stop.contains(stop) {
            params.stop.push(stop.clone());
        }
    }
    let session = format!(
        "{}/{}/{}/{}",
        task.env_id,
        task.id,
        group_id,
        EPISODES.fetch_add(1, Ordering::Relaxed)
    );
    let mut traj = empty_trajectory(task, group_id, obs.messages.clone());
    let mut prompt = ctx.format.render_prompt(&obs.messages, &obs.tools);
    let mut injected = prompt.clone();
    for turn_index in 0.. {
        if prompt.len() >= ctx.max_seq_len {
            traj.outcome = Outcome::Truncated;
            break;
        }
        let request =
            GenerationRequest::new(prompt.clone(), params.clone()).with_session(session.clone());
        let generation = ctx
            .policy
            .generate(vec![request])
            .await?
            .pop()
            .ok_or_else(|| agentrl_core::Error::Policy("policy returned no generation".into()))?;
        let parsed = ctx
            .format
            .parse_assistant(&generation.ids, &format!("call_{turn_index}_"));
        prompt.extend_from_slice(&generation.ids);
        let step = env.step(&parsed.message).await;
        let (reward, invalid, step) = match step {
            Ok(s) => (
                s.reward,
                s.info.invalid_action.clone().or(parsed.error),
                Some(s),
            ),
            Err(e) => (0.0, Some(format!("env error: {e}")), None),
        };
        let closed = generation.finish == FinishReason::Stop;
        let no_room = generation.ids.is_empty();
        traj.turns.push(Turn {
            injected_ids: std::mem::take(&mut injected),
            generated_ids: generation.ids,
            logprobs: generation.logprobs,
            policy_version: generation.policy_version,
            policy_name: generation.policy_name,
            finish: generation.finish,
            reward,
            invalid_action: invalid,
        });
        traj.messages.push(parsed.message);
        let Some(step) = step else {
            traj.outcome = Outcome::EnvError;
            break;
        };
        traj.tool_calls += step.info.tool_calls;
        traj.tool_errors += step.info.tool_errors;
        traj.messages.extend(step.messages.iter().cloned());
        if step.done() {
            traj.outcome = if step.terminated {
                Outcome::Completed
            } else {
                Outcome::Truncated
            };
            traj.success = step.info.success.unwrap_or(false);
            traj.score = step.info.score;
            break;
        }
        if no_room {
            traj.outcome = Outcome::Truncated;
            break;
        }
        injected = ctx.format.render_continuation(closed, &step.messages);
        prompt.extend_from_slice(&injected);
    }
    ctx.policy.end_session(&session);
    Ok(traj)
}

/// Plays `n` episodes of the same task concurrently (one GRPO group).
pub async fn run_group(
    ctx: &RolloutContext,
    task: &Task,
    n: usize,
    params: &SamplingParams,
    group_id: u64,
) -> Result<Vec<Trajectory>> {
    let tasks: Vec<(Task, u64)> = (0..n).map(|_| (task.clone(), group_id)).collect();
    run_many(ctx, tasks, params).await
}

/// Plays one episode per `(task, group_id)` concurrently; the policy batches their turns.
/// The output keeps the input order.
pub async fn run_many(
    ctx: &RolloutContext,
    tasks: Vec<(Task, u64)>,
    params: &SamplingParams,
) -> Result<Vec<Trajectory>> {
    let mut set = JoinSet::new();
    for (i, (task, group)) in tasks.into_iter().enumerate() {
        let ctx = ctx.clone();
        let params = params.clone();
        set.spawn(async move { (i, run_episode(&ctx, &task, &params, group).await) });
    }
    let mut out: Vec<Option<Trajectory>> = Vec::new();
    while let Some(joined) = set.join_next().await {
        let (i, result) = joined
            .map_err(|e| agentrl_core::Error::Trainer(format!("rollout task failed: {e}")))?;
        if out.len() <= i {
            out.resize(i + 1, None);
        }
        out[i] = Some(result?);
    }
    Ok(out.into_iter().flatten().collect())
}
