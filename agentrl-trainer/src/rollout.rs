//! Rollouts: one policy playing env sessions, many at a time, token in / token out.
//!
//! With a watch of the published weights version ([`run_group_on_current_weights`]), an episode
//! still running when new weights are published is cancelled between turns and its group is
//! played again under the new weights (AgentRL's force-cancel, `[rl] in_flight = "cancel"`), so
//! every trajectory comes from one version of each policy.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use agentrl_core::{
    FinishReason, GenerationRequest, Message, Outcome, Policy, Result, SamplingParams, SeededRng,
    Task, Trajectory, Turn,
};
use agentrl_env::EnvFactory;
use agentrl_policy::ChatFormat;
use tokio::sync::watch;
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

/// How an episode played with a version watch ended.
#[derive(Debug, Clone, PartialEq)]
pub enum EpisodeEnd {
    /// Played to its end.
    Finished(Trajectory),
    /// Cancelled between turns because new weights were published after it started (or a
    /// policy answered with a version other than its earlier turns'); nothing of it is kept.
    Cancelled,
}

impl EpisodeEnd {
    /// The trajectory of a finished episode; `None` for a cancelled one.
    pub fn finished(self) -> Option<Trajectory> {
        match self {
            EpisodeEnd::Finished(t) => Some(t),
            EpisodeEnd::Cancelled => None,
        }
    }
}

/// How often a group was played again under new weights ([`run_group_on_current_weights`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Restarts {
    /// Episodes cancelled mid-way because the weights moved.
    pub cancelled: usize,
    /// Episodes played again from scratch (the whole group of every cancelled attempt).
    pub restarted: usize,
}

/// Ends the policy session when dropped: on every way out of an episode (finished, cancelled,
/// a policy error, or the episode's task aborted).
struct SessionGuard {
    policy: Arc<dyn Policy>,
    session: String,
}

impl Drop for SessionGuard {
    fn drop(&mut self) {
        self.policy.end_session(&self.session);
    }
}

/// Plays one episode of `task`. Env failures end the episode with [`Outcome::EnvError`] and keep
/// everything recorded so far; only a failing policy is an `Err`.
pub async fn run_episode(
    ctx: &RolloutContext,
    task: &Task,
    params: &SamplingParams,
    group_id: u64,
) -> Result<Trajectory> {
    match run_episode_watched(ctx, task, params, group_id, None).await? {
        EpisodeEnd::Finished(t) => Ok(t),
        EpisodeEnd::Cancelled => Err(agentrl_core::Error::Trainer(
            "an episode without a version watch was cancelled".into(),
        )),
    }
}

/// Plays one episode of `task` like [`run_episode`]; with `versions` (the version of the
/// weights last published), the episode is cancelled between turns once that version differs
/// from the one when its first turn was requested, or once a policy answers a turn with a
/// version other than its earlier turns' (a trajectory never mixes versions of one policy).
/// A cancelled episode ends its policy session and drops its env session.
pub async fn run_episode_watched(
    ctx: &RolloutContext,
    task: &Task,
    params: &SamplingParams,
    group_id: u64,
    versions: Option<&watch::Receiver<u64>>,
) -> Result<EpisodeEnd> {
    let mut env = ctx.factory.make();
    let obs = match env.reset(task).await {
        Ok(obs) => obs,
        Err(e) => {
            tracing::warn!(task = %task.id, "env reset failed: {e}");
            let mut t = empty_trajectory(task, group_id, Vec::new());
            t.outcome = Outcome::EnvError;
            return Ok(EpisodeEnd::Finished(t));
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
    // A seeded episode is named by its seed, so the name (which a cross-policy draw reads)
    // is the same in every run; others by a process-wide counter.
    let session = match params.seed {
        Some(seed) => format!("{}/{}/{}/{seed:016x}", task.env_id, task.id, group_id),
        None => format!(
            "{}/{}/{}/{}",
            task.env_id,
            task.id,
            group_id,
            EPISODES.fetch_add(1, Ordering::Relaxed)
        ),
    };
    let episode_seed = params.seed;
    let _guard = SessionGuard {
        policy: ctx.policy.clone(),
        session: session.clone(),
    };
    let mut traj = empty_trajectory(task, group_id, obs.messages.clone());
    let mut prompt = ctx.format.render_prompt(&obs.messages, &obs.tools);
    let mut injected = prompt.clone();
    // The published version when the first turn was requested (force-cancel only).
    let mut started_under = None;
    for turn_index in 0u64.. {
        if prompt.len() >= ctx.max_seq_len {
            traj.outcome = Outcome::Truncated;
            break;
        }
        if let Some(versions) = versions {
            let now = *versions.borrow();
            if *started_under.get_or_insert(now) != now {
                return Ok(EpisodeEnd::Cancelled);
            }
        }
        if let Some(seed) = episode_seed {
            params.seed = Some(SeededRng::from_parts(&[seed, turn_index]).next_u64());
        }
        let request =
            GenerationRequest::new(prompt.clone(), params.clone()).with_session(session.clone());
        let generation = ctx
            .policy
            .generate(vec![request])
            .await?
            .pop()
            .ok_or_else(|| agentrl_core::Error::Policy("policy returned no generation".into()))?;
        if versions.is_some()
            && traj.turns.iter().any(|t| {
                t.policy_name == generation.policy_name
                    && t.policy_version != generation.policy_version
            })
        {
            return Ok(EpisodeEnd::Cancelled);
        }
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
            stale: false,
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
    Ok(EpisodeEnd::Finished(traj))
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

/// Plays `n` episodes of the same task concurrently (one GRPO group) under one version of the
/// weights: when any episode is cancelled because `versions` moved (see
/// [`run_episode_watched`]), the whole group is played again from scratch under the new
/// weights, until an attempt finishes uncancelled. Returns the group and how often it
/// restarted.
pub async fn run_group_on_current_weights(
    ctx: &RolloutContext,
    task: &Task,
    n: usize,
    params: &SamplingParams,
    group_id: u64,
    versions: &watch::Receiver<u64>,
) -> Result<(Vec<Trajectory>, Restarts)> {
    let mut restarts = Restarts::default();
    loop {
        let tasks: Vec<(Task, u64)> = (0..n).map(|_| (task.clone(), group_id)).collect();
        let ends = run_many_watched(ctx, tasks, params, Some(versions), None).await?;
        let cancelled = ends
            .iter()
            .filter(|e| matches!(e, EpisodeEnd::Cancelled))
            .count();
        if cancelled == 0 {
            let group = ends.into_iter().filter_map(EpisodeEnd::finished).collect();
            return Ok((group, restarts));
        }
        restarts.cancelled += cancelled;
        restarts.restarted += n;
        tracing::debug!(
            task = %task.id,
            "new weights were published: {cancelled} episode(s) cancelled, group {group_id} restarts"
        );
    }
}

/// Plays one episode per `(task, group_id)` concurrently; the policy batches their turns.
/// The output keeps the input order.
pub async fn run_many(
    ctx: &RolloutContext,
    tasks: Vec<(Task, u64)>,
    params: &SamplingParams,
) -> Result<Vec<Trajectory>> {
    let ends = run_many_watched(ctx, tasks, params, None, None).await?;
    Ok(ends.into_iter().filter_map(EpisodeEnd::finished).collect())
}

/// [`run_many`] that advances `progress` by one as each episode ends.
pub async fn run_many_with_progress(
    ctx: &RolloutContext,
    tasks: Vec<(Task, u64)>,
    params: &SamplingParams,
    progress: &crate::progress::Phase,
) -> Result<Vec<Trajectory>> {
    let ends = run_many_watched(ctx, tasks, params, None, Some(progress)).await?;
    Ok(ends.into_iter().filter_map(EpisodeEnd::finished).collect())
}

/// [`run_many`] with an optional version watch ([`run_episode_watched`]) and an optional
/// progress phase advanced per finished episode; the output keeps the input order.
async fn run_many_watched(
    ctx: &RolloutContext,
    tasks: Vec<(Task, u64)>,
    params: &SamplingParams,
    versions: Option<&watch::Receiver<u64>>,
    progress: Option<&crate::progress::Phase>,
) -> Result<Vec<EpisodeEnd>> {
    let mut set = JoinSet::new();
    for (i, (task, group)) in tasks.into_iter().enumerate() {
        let ctx = ctx.clone();
        let mut params = params.clone();
        // Seeded sampling: every episode draws from its own seed.
        if let Some(seed) = params.seed {
            params.seed = Some(SeededRng::from_parts(&[seed, i as u64]).next_u64());
        }
        let versions = versions.cloned();
        set.spawn(async move {
            let end = run_episode_watched(&ctx, &task, &params, group, versions.as_ref()).await;
            (i, end)
        });
    }
    let mut out: Vec<Option<EpisodeEnd>> = Vec::new();
    while let Some(joined) = set.join_next().await {
        let (i, result) = joined
            .map_err(|e| agentrl_core::Error::Trainer(format!("rollout task failed: {e}")))?;
        if out.len() <= i {
            out.resize(i + 1, None);
        }
        out[i] = Some(result?);
        if let Some(progress) = progress {
            progress.inc(1);
        }
    }
    Ok(out.into_iter().flatten().collect())
}
