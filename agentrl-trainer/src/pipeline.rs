//! The fully asynchronous rollout → train pipeline.
//!
//! A producer task keeps rolling out GRPO groups with the rollout policy and sends them over a
//! bounded queue; the learner (on a blocking thread) takes `tasks_per_step` groups, updates the
//! weights, and pushes them to the rollout policy, bumping the policy version. The producer only
//! starts a group for step `k` once the weights are at least at version `k - max_staleness`, and
//! the learner drops (and counts) any sample older than that, so no sample lags more than
//! `max_staleness` versions. `max_staleness = 0` is the synchronous mode.
//!
//! Three `[rl]` options act here:
//! - `dynamic_sampling` (DAPO): the learner drops a group whose rewards are all equal (it has no
//!   advantage signal) and asks the producer for another, until `tasks_per_step` groups with a
//!   signal are in or `dynamic_sampling_max_groups` groups were drawn in the step (metrics
//!   `groups_drawn`, `dynamic_dropped_groups`, and `drawn_reward_mean`/`drawn_success_rate`
//!   over every group drawn, since the batch lacks the dropped ones). Every group the
//!   learner drops (stale or without signal) is one it asks the producer to replace, on top of
//!   the producer's per-step quota, and a step cut short by the bound gives back the quota it
//!   did not use: the producer never stops short of what the learner waits for, nor drifts
//!   further ahead.
//! - `overlong`: episodes cut short ([`Outcome::Truncated`]) are trained on as usual
//!   (`"none"`), get zero advantage (`"mask"`), or every episode near the context limit loses
//!   reward ([`overlong_penalty`], `"penalty"`) before advantages are computed.
//! - `in_flight = "cancel"`: groups are played with a watch of the published version
//!   ([`run_group_on_current_weights`]), so an episode running when new weights arrive is
//!   cancelled and its group played again under them.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use agentrl_core::{
    Error, Outcome, Result, RewardFn, SamplingParams, SeededRng, Split, Trajectory,
};
use ndarray::Array1;
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use crate::advantage::{AdvantageEstimator, advantages, gae, normalize_per_task, whiten};
use crate::config::RunConfig;
use crate::critic::{Critic, CriticStats};
use crate::learner::{Advantages, GrpoParams, Learner, UpdateStats};
use crate::loss::KlMode;
use crate::metrics::MetricsWriter;
use crate::rollout::{Restarts, RolloutContext, run_group, run_group_on_current_weights};
use crate::task_stats::{EpisodeStats, by_task, mean_std};
use crate::weight_sync::WeightSync;
use agentrl_policy::checkpoint::{LatestCheckpoint, checkpoint_dir, write_latest};

/// What happens to episodes still running when the learner publishes new weights
/// (`[rl] in_flight`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InFlight {
    /// They go on with the new weights; their turns record the versions that generated them.
    #[default]
    Continue,
    /// AgentRL's force-cancel: they are cancelled and their group is played again from scratch
    /// under the new weights.
    Cancel,
}

/// How episodes cut short (by the turn limit or the context) are treated (`[rl] overlong`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OverlongMode {
    /// Like any other episode.
    #[default]
    None,
    /// Truncated episodes get zero advantage: they are not trained on.
    Mask,
    /// DAPO's soft overlong punishment ([`overlong_penalty`]) on every episode's reward.
    Penalty,
}

/// DAPO's soft overlong punishment: the reward term (0 or negative) of an episode of `tokens`
/// tokens when episodes may have `max_tokens`. It is 0 up to `max_tokens - buffer`, then falls
/// linearly to `-penalty` at `max_tokens`, and stays there beyond.
pub fn overlong_penalty(tokens: usize, max_tokens: usize, buffer: usize, penalty: f64) -> f64 {
    let threshold = max_tokens.saturating_sub(buffer);
    if tokens <= threshold {
        return 0.0;
    }
    if buffer == 0 {
        return -penalty;
    }
    let over = (tokens - threshold) as f64 / buffer as f64;
    -penalty * over.min(1.0)
}

/// Name of the overlong penalty among a trajectory's reward parts (`reward/overlong_penalty`
/// in the metrics).
pub const OVERLONG_PENALTY_PART: &str = "overlong_penalty";

/// Adds [`overlong_penalty`] of each trajectory's whole token sequence (prompt, env replies and
/// generated tokens, which `max_seq_len` bounds) to its reward, and records it as the reward
/// part [`OVERLONG_PENALTY_PART`].
fn apply_overlong_penalty(
    trajectories: &mut [Trajectory],
    max_seq_len: usize,
    buffer: usize,
    penalty: f64,
) {
    for t in trajectories {
        let p = overlong_penalty(t.num_tokens(), max_seq_len, buffer, penalty);
        t.reward += p;
        t.reward_parts.insert(OVERLONG_PENALTY_PART.to_string(), p);
    }
}

/// Whether a group's rewards give any of its trajectories a non-zero advantage under
/// `estimator` (for the group estimators: whether they are not all equal).
fn is_informative(estimator: AdvantageEstimator, group: &[Trajectory]) -> bool {
    let rewards: Array1<f64> = group.iter().map(|t| t.reward).collect();
    let ids = vec![0u64; group.len()];
    advantages(estimator, &rewards, &ids)
        .iter()
        .any(|&a| a != 0.0)
}

/// `overlong = "mask"`: zeroes the advantage of every truncated trajectory of `batch`; returns
/// how many there are.
fn mask_truncated(adv: &mut Array1<f64>, batch: &[Trajectory]) -> usize {
    let mut masked = 0;
    for (a, t) in adv.iter_mut().zip(batch) {
        if t.outcome == Outcome::Truncated {
            *a = 0.0;
            masked += 1;
        }
    }
    masked
}

/// One rolled-out group, scored.
struct Group {
    trajectories: Vec<Trajectory>,
    /// How often it was played again because new weights arrived (`in_flight = "cancel"`).
    restarts: Restarts,
}

impl Group {
    /// The oldest policy version that generated any of the group's tokens, among the turns the
    /// staleness bound applies to (not those of the members named in `exempt`: a cross-policy
    /// run's stale snapshot and extra policies); `None` when there are none (e.g. every prompt
    /// was already longer than the context), which cannot be stale.
    fn oldest_version(&self, exempt: &[String]) -> Option<u64> {
        self.trajectories
            .iter()
            .filter_map(|t| crate::cross_policy::staleness_version(t, exempt))
            .min()
    }
}

/// Totals of an RL run.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct RlSummary {
    /// Steps completed in this call.
    pub steps: usize,
    /// Trajectories trained on.
    pub trajectories: usize,
    /// Trajectories dropped for staleness.
    pub dropped_stale: usize,
    /// Groups dropped by dynamic sampling (all rewards equal).
    pub dynamic_dropped_groups: usize,
    /// Episodes cancelled because new weights arrived (`in_flight = "cancel"`).
    pub episodes_cancelled: usize,
    /// Seconds the learner waited for samples.
    pub trainer_idle_seconds: f64,
    /// Wall seconds of the RL phase.
    pub wall_seconds: f64,
}

/// Everything the RL phase needs besides the learner.
pub struct RlRun {
    /// The run's configuration.
    pub config: RunConfig,
    /// Rollout context (its policy is the one `weights` updates).
    pub ctx: RolloutContext,
    /// How the rollout policy receives weight updates.
    pub weights: WeightSync,
    /// Scores trajectories.
    pub reward: Arc<dyn RewardFn>,
    /// Run directory (checkpoints go under it).
    pub run_dir: PathBuf,
    /// First step (non-zero when resuming).
    pub start_step: usize,
}

/// Runs RL from `run.start_step` to `config.rl.steps`, writing one metrics record per step.
pub async fn train_rl(
    run: RlRun,
    learner: Learner,
    metrics: MetricsWriter,
) -> Result<(Learner, MetricsWriter, RlSummary)> {
    let cfg = run.config.clone();
    let rl = cfg.rl.clone();
    let start = run.start_step;
    let handle = tokio::runtime::Handle::current();
    let weights = Arc::new(run.weights);
    // Publishing writes files for rollout servers: on a blocking thread.
    let (learner, published) = {
        let (weights, handle) = (weights.clone(), handle.clone());
        tokio::task::spawn_blocking(move || {
            let published = handle.block_on(weights.publish(&learner, start as u64));
            (learner, published)
        })
        .await
        .map_err(|e| Error::Trainer(format!("weight publishing task failed: {e}")))?
    };
    published?;
    let (version_tx, version_rx) = watch::channel(start as u64);
    let capacity = (cfg.pipeline.max_staleness as usize + 1) * rl.tasks_per_step;
    let (tx, rx) = mpsc::channel::<Result<Group>>(capacity.max(1));
    let (refill_tx, refill_rx) = mpsc::unbounded_channel::<i64>();
    let params = rl.sampling.clone();
    let producer = tokio::spawn(produce(
        run.ctx.clone(),
        run.reward.clone(),
        params,
        tx,
        version_rx,
        refill_rx,
        ProducerPlan {
            start_step: start,
            tasks_per_step: rl.tasks_per_step,
            group_size: rl.group_size,
            max_staleness: cfg.pipeline.max_staleness,
            seed: cfg.seed,
            in_flight: rl.in_flight,
        },
    ));
    let run_dir = run.run_dir.clone();
    let channels = LearnerChannels {
        groups: rx,
        refills: refill_tx,
        versions: version_tx,
    };
    let trained = tokio::task::spawn_blocking(move || {
        learner_loop(
            learner, metrics, channels, weights, handle, cfg, run_dir, start,
        )
    })
    .await
    .map_err(|e| Error::Trainer(format!("learner thread failed: {e}")))?;
    producer.abort();
    trained
}

struct ProducerPlan {
    start_step: usize,
    tasks_per_step: usize,
    group_size: usize,
    max_staleness: u64,
    seed: u64,
    in_flight: InFlight,
}

/// The learner's ends of the pipeline's channels.
struct LearnerChannels {
    /// Scored groups from the producer.
    groups: mpsc::Receiver<Result<Group>>,
    /// Changes to how many groups the producer may start beyond its per-step quota: +1 for
    /// every dropped group to replace, negative to give back quota a step did not use.
    refills: mpsc::UnboundedSender<i64>,
    /// The version of the weights last published.
    versions: watch::Sender<u64>,
}

/// How many groups the producer may have started in all: `tasks_per_step` for every step up
/// to `version + max_staleness` (a group for step `k` starts only with weights at version
/// `k - max_staleness` or newer), plus the learner's refills.
fn groups_allowed(plan: &ProducerPlan, version: u64, refills: i64) -> i64 {
    let steps = (version + plan.max_staleness + 1).saturating_sub(plan.start_step as u64);
    let quota = i64::try_from(steps.saturating_mul(plan.tasks_per_step as u64)).unwrap_or(i64::MAX);
    quota.saturating_add(refills)
}

async fn produce(
    ctx: RolloutContext,
    reward: Arc<dyn RewardFn>,
    params: SamplingParams,
    tx: mpsc::Sender<Result<Group>>,
    mut version_rx: watch::Receiver<u64>,
    mut refill_rx: mpsc::UnboundedReceiver<i64>,
    plan: ProducerPlan,
) {
    let mut rng = SeededRng::from_parts(&[plan.seed, 0xA11CE, plan.start_step as u64]);
    let mut in_flight = JoinSet::new();
    let max_in_flight = (plan.max_staleness as usize + 1) * plan.tasks_per_step;
    let mut refills: i64 = 0;
    for g in 0u64.. {
        // Gate: the quota of the steps the weights allow, plus the learner's refills.
        loop {
            while let Ok(delta) = refill_rx.try_recv() {
                refills += delta;
            }
            let version = *version_rx.borrow_and_update();
            if (g as i64) < groups_allowed(&plan, version, refills) {
                break;
            }
            tokio::select! {
                changed = version_rx.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
                delta = refill_rx.recv() => match delta {
                    Some(delta) => refills += delta,
                    None => return,
                },
            }
        }
        while in_flight.len() >= max_in_flight {
            in_flight.join_next().await;
        }
        if tx.is_closed() {
            return;
        }
        let task = ctx
            .factory
            .task(Split::Train, rng.next_u64() % 1_000_000_000);
        let (ctx, reward, params, tx) = (ctx.clone(), reward.clone(), params.clone(), tx.clone());
        let versions = (plan.in_flight == InFlight::Cancel).then(|| version_rx.clone());
        let n = plan.group_size;
        in_flight.spawn(async move {
            // A failure (the policy or a reward function broke) stops the run with its reason:
            // a group that silently went missing would leave the learner waiting forever.
            let group = async {
                let rolled = match &versions {
                    Some(versions) => {
                        run_group_on_current_weights(&ctx, &task, n, &params, g, versions).await
                    }
                    None => run_group(&ctx, &task, n, &params, g)
                        .await
                        .map(|t| (t, Restarts::default())),
                };
                let (mut trajectories, restarts) = rolled.map_err(|e| {
                    Error::Trainer(format!("rollout of task {} failed: {e}", task.id))
                })?;
                for t in trajectories.iter_mut() {
                    agentrl_reward::apply(reward.as_ref(), t)
                        .await
                        .map_err(|e| {
                            Error::Trainer(format!("reward of task {} failed: {e}", task.id))
                        })?;
                }
                Ok(Group {
                    trajectories,
                    restarts,
                })
            };
            let _ = tx.send(group.await).await;
        });
    }
}

/// One GRPO-family update: group advantages (truncated episodes' zeroed under
/// `overlong = "mask"`, then task-normalised when configured) for every trajectory, the policy
/// step on those whose advantage is not zero. Returns the step's statistics, how many
/// trajectories it trained on, the advantages and how many truncated trajectories were masked.
fn group_update(
    learner: &mut Learner,
    batch: &[Trajectory],
    rewards: &Array1<f64>,
    cfg: &RunConfig,
    grpo: GrpoParams,
) -> (UpdateStats, usize, GroupAdvantages, usize) {
    let rl = &cfg.rl;
    let group_ids: Vec<u64> = batch.iter().map(|t| t.group_id).collect();
    let mut adv = advantages(rl.advantage.estimator(), rewards, &group_ids);
    let masked = match rl.overlong {
        OverlongMode::Mask => mask_truncated(&mut adv, batch),
        OverlongMode::None | OverlongMode::Penalty => 0,
    };
    let before = adv.to_vec();
    if rl.advantage.task_normalization() {
        let envs: Vec<&str> = batch.iter().map(|t| t.env_id.as_str()).collect();
        normalize_per_task(&mut adv, &envs);
    }
    let advantages = GroupAdvantages {
        before,
        after: adv.to_vec(),
    };
    let live: Vec<usize> = (0..batch.len()).filter(|&i| adv[i] != 0.0).collect();
    if live.is_empty() {
        return (Default::default(), 0, advantages, masked);
    }
    let trajs: Vec<&Trajectory> = live.iter().map(|&i| &batch[i]).collect();
    let a: Vec<f64> = live.iter().map(|&i| adv[i]).collect();
    (
        learner.grpo_step(&trajs, &a, grpo),
        live.len(),
        advantages,
        masked,
    )
}

/// The per-trajectory advantages of a group update, before and after task normalisation.
#[derive(Debug, Default)]
struct GroupAdvantages {
    /// From the group baseline alone.
    before: Vec<f64>,
    /// As trained on (equal to `before` without task normalisation).
    after: Vec<f64>,
}

/// `metrics.jsonl`'s `per_task` object of a step: each env's [`EpisodeStats`] and, for the
/// group estimators, the mean and standard deviation of its advantages before and after task
/// normalisation.
fn per_task_record(
    batch: &[Trajectory],
    advantages: Option<&GroupAdvantages>,
) -> serde_json::Value {
    let mut out = serde_json::Map::new();
    for (env, stats) in by_task(batch) {
        let mut record = serde_json::to_value(&stats).unwrap_or_default();
        if let Some(adv) = advantages {
            let rows: Vec<usize> = (0..batch.len())
                .filter(|&i| batch[i].env_id == env)
                .collect();
            let (mean, std) = mean_std(&adv.before, &rows);
            record["advantage_mean_before_norm"] = serde_json::json!(mean);
            record["advantage_std_before_norm"] = serde_json::json!(std);
            let (mean, std) = mean_std(&adv.after, &rows);
            record["advantage_mean"] = serde_json::json!(mean);
            record["advantage_std"] = serde_json::json!(std);
        }
        out.insert(env, record);
    }
    serde_json::Value::Object(out)
}

/// One PPO update: the critic's values, per-token GAE advantages (whitened over the batch),
/// the policy step on them (without the truncated trajectories under `overlong = "mask"`),
/// then the critic step towards the GAE returns. Returns both steps' statistics, how many
/// trajectories the policy step trained on and how many truncated ones were masked.
fn ppo_update(
    learner: &mut Learner,
    critic: &mut Critic,
    batch: &[Trajectory],
    cfg: &RunConfig,
    grpo: GrpoParams,
) -> Result<(UpdateStats, CriticStats, usize, usize)> {
    let rl = &cfg.rl;
    let gae_params = rl.advantage.gae().cloned().unwrap_or_default();
    let trajs: Vec<&Trajectory> = batch.iter().filter(|t| t.num_generated() > 0).collect();
    if trajs.is_empty() {
        return Ok(Default::default());
    }
    let values = critic.values(&trajs)?;
    // `policy[j]` is 1 where token `j + 1` was generated by the policy.
    let policy: Vec<Vec<f32>> = trajs
        .iter()
        .map(|t| t.loss_mask().into_iter().skip(1).collect())
        .collect();
    let (mut adv, returns): (Vec<Vec<f32>>, Vec<Vec<f32>>) = trajs
        .iter()
        .zip(&values)
        .zip(&policy)
        .map(|((t, v), m)| gae(v, m, t.reward, gae_params.gamma, gae_params.lambda))
        .unzip();
    whiten(&mut adv, &policy);
    let keep: Vec<usize> = (0..trajs.len())
        .filter(|&i| rl.overlong != OverlongMode::Mask || trajs[i].outcome != Outcome::Truncated)
        .collect();
    let masked = match rl.overlong {
        OverlongMode::Mask => batch
            .iter()
            .filter(|t| t.outcome == Outcome::Truncated)
            .count(),
        OverlongMode::None | OverlongMode::Penalty => 0,
    };
    let stats = if keep.is_empty() {
        UpdateStats::default()
    } else if keep.len() == trajs.len() {
        learner.policy_step(&trajs, Advantages::PerToken(&adv), grpo)
    } else {
        let kept: Vec<&Trajectory> = keep.iter().map(|&i| trajs[i]).collect();
        let kept_adv: Vec<Vec<f32>> = keep.iter().map(|&i| adv[i].clone()).collect();
        learner.policy_step(&kept, Advantages::PerToken(&kept_adv), grpo)
    };
    let critic_stats = critic.step(
        &trajs,
        &returns,
        &values,
        gae_params.value_clip,
        rl.grad_clip,
    );
    Ok((stats, critic_stats, keep.len(), masked))
}

#[allow(clippy::too_many_arguments)]
fn learner_loop(
    mut learner: Learner,
    mut metrics: MetricsWriter,
    channels: LearnerChannels,
    weights: Arc<WeightSync>,
    handle: tokio::runtime::Handle,
    cfg: RunConfig,
    run_dir: PathBuf,
    start: usize,
) -> Result<(Learner, MetricsWriter, RlSummary)> {
    let rl = &cfg.rl;
    // Turns of a cross-policy run's snapshot and extra policies are old by design.
    let exempt = crate::cross_policy::stale_member_names(rl);
    let LearnerChannels {
        groups: mut rx,
        refills: refill_tx,
        versions: version_tx,
    } = channels;
    let t_run = Instant::now();
    let mut summary = RlSummary::default();
    let progress = crate::progress::bar(rl.steps.saturating_sub(start) as u64, "GRPO");
    let grpo = GrpoParams {
        clip_eps: rl.clip_eps,
        clip_low: rl.clip_low,
        clip_high: rl.clip_high,
        dual_clip: rl.dual_clip,
        loss_agg: rl.loss_agg,
        loss_agg_norm: rl.loss_agg_norm,
        entropy_coef: rl.entropy_coef,
        kl_coef: rl.kl_coef,
        kl_estimator: rl.kl_estimator,
        kl_mode: rl.kl_mode,
        temperature: rl.sampling.temperature as f64,
        grad_clip: rl.grad_clip,
    };
    learner.set_lr(rl.lr);
    // PPO's critic starts as a copy of the policy (after SFT) with a zero value head, or, when
    // the run resumes, as it was saved with the checkpoint it resumes from.
    let mut critic = if let Some(gae) = rl.advantage.gae() {
        let mut critic = Critic::from_learner(
            &learner,
            gae.critic_lr.unwrap_or(rl.lr),
            cfg.model.micro_batch,
        )?;
        let saved = checkpoint_dir(&run_dir).join(critic_file(start));
        if start > 0 && saved.is_file() {
            critic.load(&saved)?;
            tracing::info!("resumed the critic from {}", saved.display());
        }
        Some(critic)
    } else {
        None
    };
    let mut last_step_end = Instant::now();
    let mut last_engine = weights.engine_stats().unwrap_or_default();
    // Groups received but not yet used (they arrive out of order).
    let mut waiting: Vec<Group> = Vec::new();
    // Under dynamic sampling, the most groups a step draws.
    let max_drawn = rl.dynamic_sampling.then(|| rl.dynamic_sampling_limit());
    for step in start..rl.steps {
        let version = step as u64;
        let mut batch: Vec<Trajectory> = Vec::new();
        let mut idle = 0.0;
        let mut dropped = 0;
        let mut groups = 0;
        // Fresh groups taken (kept or dropped for want of signal), stale groups dropped,
        // groups without signal dropped, and replacements asked of the producer.
        let (mut drawn, mut stale_groups, mut uninformative, mut refills) = (0, 0, 0, 0i64);
        let mut restarts = Restarts::default();
        // Every fresh trajectory drawn (kept or not): episodes, reward sum, successes.
        let mut all_drawn = (0usize, 0.0f64, 0usize);
        while groups < rl.tasks_per_step {
            if let Some(max) = max_drawn
                && drawn >= max
            {
                tracing::warn!(
                    "rl step {}: {drawn} groups drawn (rl.dynamic_sampling_max_groups) but only                      {groups} of {} have rewards that differ; training on those",
                    step + 1,
                    rl.tasks_per_step
                );
                break;
            }
            if waiting.is_empty() {
                let t0 = Instant::now();
                let group = rx.blocking_recv().ok_or_else(|| {
                    Error::Trainer("the rollout producer stopped before training finished".into())
                })??;
                idle += t0.elapsed().as_secs_f64();
                waiting.push(group);
            }
            while let Ok(group) = rx.try_recv() {
                waiting.push(group?);
            }
            // Oldest first: a group that waits would only grow staler.
            let pick = (0..waiting.len())
                .min_by_key(|&i| waiting[i].oldest_version(&exempt).unwrap_or(u64::MAX))
                .unwrap_or(0);
            let group = waiting.swap_remove(pick);
            restarts.cancelled += group.restarts.cancelled;
            restarts.restarted += group.restarts.restarted;
            let age = group
                .oldest_version(&exempt)
                .map(|v| version.saturating_sub(v));
            if age.is_some_and(|age| age > cfg.pipeline.max_staleness) {
                dropped += group.trajectories.len();
                stale_groups += 1;
                refills += 1;
                let _ = refill_tx.send(1);
                continue;
            }
            drawn += 1;
            let mut trajectories = group.trajectories;
            if rl.overlong == OverlongMode::Penalty {
                apply_overlong_penalty(
                    &mut trajectories,
                    cfg.model.max_seq_len,
                    rl.overlong_buffer,
                    rl.overlong_penalty,
                );
            }
            all_drawn.0 += trajectories.len();
            all_drawn.1 += trajectories.iter().map(|t| t.reward).sum::<f64>();
            all_drawn.2 += trajectories.iter().filter(|t| t.success).count();
            if max_drawn.is_some() && !is_informative(rl.advantage.estimator(), &trajectories) {
                uninformative += 1;
                if max_drawn.is_some_and(|max| drawn < max) {
                    refills += 1;
                    let _ = refill_tx.send(1);
                }
                continue;
            }
            batch.extend(trajectories);
            groups += 1;
        }
        // The producer's quota counted `tasks_per_step` groups for this step: give back what a
        // step cut short by `dynamic_sampling_max_groups` did not take.
        let unused = rl.tasks_per_step as i64 + refills - (drawn + stale_groups) as i64;
        if unused != 0 {
            let _ = refill_tx.send(-unused);
        }
        // `kl_mode = "reward"`: the KL to the reference is a penalty on each trajectory's
        // reward for the update only; metrics and samples keep the reward the run gave.
        let raw_rewards: Vec<f64> = batch.iter().map(|t| t.reward).collect();
        let mut kl_penalty_mean = None;
        if rl.kl_mode == KlMode::Reward && rl.kl_coef > 0.0 && !batch.is_empty() {
            let all: Vec<&Trajectory> = batch.iter().collect();
            let kl = learner.kl_penalties(&all, rl.kl_estimator, grpo.temperature);
            kl_penalty_mean = Some(kl.iter().sum::<f64>() / kl.len().max(1) as f64);
            for (t, k) in batch.iter_mut().zip(kl) {
                t.reward -= rl.kl_coef * k;
            }
        }
        let rewards: Array1<f64> = batch.iter().map(|t| t.reward).collect();
        let (stats, critic_stats, trained, group_advantages, masked) = match critic.as_mut() {
            Some(critic) => {
                let (stats, critic_stats, trained, masked) =
                    ppo_update(&mut learner, critic, &batch, &cfg, grpo)?;
                (stats, Some(critic_stats), trained, None, masked)
            }
            None => {
                let (stats, trained, adv, masked) =
                    group_update(&mut learner, &batch, &rewards, &cfg, grpo);
                (stats, None, trained, Some(adv), masked)
            }
        };
        for (t, raw) in batch.iter_mut().zip(raw_rewards) {
            t.reward = raw;
        }
        let new_version = version + 1;
        handle.block_on(weights.publish(&learner, new_version))?;
        let _ = version_tx.send(new_version);
        let staleness: Vec<f64> = batch
            .iter()
            .filter_map(|t| crate::cross_policy::staleness_version(t, &exempt))
            .map(|v| version.saturating_sub(v) as f64)
            .collect();
        let n = batch.len().max(1) as f64;
        let elapsed = last_step_end.elapsed().as_secs_f64();
        last_step_end = Instant::now();
        let generated: usize = batch.iter().map(|t| t.num_generated()).sum();
        let mut record = serde_json::json!({
            "kind": "rl_step",
            "step": step + 1,
            "policy_version": new_version,
            "reward_mean": batch.iter().map(|t| t.reward).sum::<f64>() / n,
            "success_rate": batch.iter().filter(|t| t.success).count() as f64 / n,
            "loss": stats.loss,
            "kl": stats.kl,
            "clip_fraction": stats.clip_fraction,
            "entropy": stats.entropy,
            "grad_norm": stats.grad_norm,
            "trained_trajectories": trained,
            "trained_tokens": stats.tokens,
            "tokens_per_second": generated as f64 / elapsed.max(1e-9),
            "staleness_mean": staleness.iter().sum::<f64>() / staleness.len().max(1) as f64,
            "staleness_max": staleness.iter().copied().fold(0.0, f64::max),
            "dropped_stale": dropped,
            "groups_drawn": drawn,
            "dynamic_dropped_groups": uninformative,
            "overlong_masked": masked,
            "episodes_cancelled": restarts.cancelled,
            "episodes_restarted": restarts.restarted,
            "trainer_idle_seconds": idle,
            "step_seconds": elapsed,
            "tool_calls_per_episode": batch.iter().map(|t| t.tool_calls as f64).sum::<f64>() / n,
            "invalid_actions_per_episode": batch.iter().map(|t| t.invalid_actions() as f64).sum::<f64>() / n,
        });
        if rl.dynamic_sampling {
            // The batch lacks the groups without signal (e.g. all solved): these are the
            // learning curve over every group the step drew.
            let n = all_drawn.0.max(1) as f64;
            record["drawn_reward_mean"] = serde_json::json!(all_drawn.1 / n);
            record["drawn_success_rate"] = serde_json::json!(all_drawn.2 as f64 / n);
        }
        if let Some(engine) = weights.engine_stats() {
            let before = std::mem::replace(&mut last_engine, engine.clone());
            record["prefill_tokens"] =
                serde_json::json!(engine.prefill_tokens - before.prefill_tokens);
            record["reused_tokens"] =
                serde_json::json!(engine.reused_tokens - before.reused_tokens);
            record["kv_evictions"] = serde_json::json!(engine.evictions - before.evictions);
            record["prefill_seconds"] =
                serde_json::json!(engine.prefill_seconds - before.prefill_seconds);
            record["decode_seconds"] =
                serde_json::json!(engine.decode_seconds - before.decode_seconds);
            record["session_cache_mib"] =
                serde_json::json!(engine.session_cache_bytes as f64 / 1048576.0);
        }
        if let Some(c) = &critic_stats {
            record["value_loss"] = serde_json::json!(c.value_loss);
            record["value_mean"] = serde_json::json!(c.value_mean);
            record["critic_grad_norm"] = serde_json::json!(c.grad_norm);
        }
        add_reward_parts(&mut record, &batch);
        crate::cross_policy::add_turn_shares(&mut record, &batch, rl);
        let overall = EpisodeStats::of(&batch);
        record["turns_mean"] = serde_json::json!(overall.turns_mean);
        record["generated_tokens_mean"] = serde_json::json!(overall.generated_tokens_mean);
        record["truncated_rate"] = serde_json::json!(overall.truncated_rate);
        if let Some(adv) = &group_advantages {
            let all: Vec<usize> = (0..batch.len()).collect();
            let (mean, std) = mean_std(&adv.after, &all);
            record["advantage_mean"] = serde_json::json!(mean);
            record["advantage_std"] = serde_json::json!(std);
        }
        if let Some(kl) = kl_penalty_mean {
            record["kl"] = serde_json::json!(kl);
        }
        record["per_task"] = per_task_record(&batch, group_advantages.as_ref());
        metrics.write(&record)?;
        summary.steps += 1;
        summary.trajectories += trained;
        summary.dropped_stale += dropped;
        summary.dynamic_dropped_groups += uninformative;
        summary.episodes_cancelled += restarts.cancelled;
        summary.trainer_idle_seconds += idle;
        progress.inc(1);
        progress.set_message(format!(
            "reward {:.2} success {:.2}",
            record["reward_mean"].as_f64().unwrap_or(0.0),
            record["success_rate"].as_f64().unwrap_or(0.0)
        ));
        if (step + 1) % 5 == 0 || step + 1 == rl.steps {
            tracing::info!(
                "rl step {}/{}: reward {:.3}, success {:.3}, loss {:.4}, entropy {:.3}, idle {:.2}s",
                step + 1,
                rl.steps,
                record["reward_mean"].as_f64().unwrap_or(0.0),
                record["success_rate"].as_f64().unwrap_or(0.0),
                stats.loss,
                stats.entropy,
                idle
            );
        }
        let is_last = step + 1 == rl.steps;
        if is_last || (rl.checkpoint_every > 0 && (step + 1) % rl.checkpoint_every == 0) {
            let samples = run_dir.join("samples");
            std::fs::create_dir_all(&samples).map_err(|e| Error::io("creating", &samples, e))?;
            let sample_file = samples.join(format!("rl_step_{:06}.jsonl", step + 1));
            agentrl_core::write_jsonl(&sample_file, &batch, false)?;
            let file = format!("step-{:06}.safetensors", step + 1);
            learner.save(&checkpoint_dir(&run_dir).join(&file))?;
            if let Some(critic) = &critic {
                critic.save(&checkpoint_dir(&run_dir).join(critic_file(step + 1)))?;
            }
            write_latest(
                &run_dir,
                &LatestCheckpoint {
                    step: step + 1,
                    version: new_version,
                    file,
                },
            )?;
        }
    }
    progress.finish();
    drop(rx);
    summary.wall_seconds = t_run.elapsed().as_secs_f64();
    Ok((learner, metrics, summary))
}

/// The critic's checkpoint file name after `step` RL steps.
fn critic_file(step: usize) -> String {
    format!("critic-step-{step:06}.safetensors")
}

/// Adds the mean of each named reward part as `reward/NAME`.
fn add_reward_parts(record: &mut serde_json::Value, batch: &[Trajectory]) {
    let mut sums: std::collections::BTreeMap<&str, f64> = Default::default();
    for t in batch {
        for (k, v) in &t.reward_parts {
            *sums.entry(k.as_str()).or_default() += v;
        }
    }
    let n = batch.len().max(1) as f64;
    for (k, v) in sums {
        record[format!("reward/{k}")] = serde_json::json!(v / n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn traj(reward: f64, outcome: Outcome) -> Trajectory {
        Trajectory::new("toy", "t", Split::Train, 0)
            .with_reward(reward)
            .with_outcome(outcome)
    }

    #[test]
    fn overlong_penalty_by_hand() {
        // max 100 tokens, buffer 20: free up to 80, then -1/20 per token, -1 from 100 on.
        let p = |tokens| overlong_penalty(tokens, 100, 20, 1.0);
        assert_eq!(p(0), 0.0);
        assert_eq!(p(80), 0.0);
        assert_eq!(p(81), -0.05);
        assert_eq!(p(90), -0.5);
        assert_eq!(p(95), -0.75);
        assert_eq!(p(100), -1.0);
        assert_eq!(p(130), -1.0);
        // The penalty scales the whole ramp.
        assert_eq!(overlong_penalty(90, 100, 20, 0.5), -0.25);
        assert_eq!(overlong_penalty(90, 100, 20, 0.0), 0.0);
        // A buffer as long as the limit ramps from the first token.
        assert_eq!(overlong_penalty(25, 100, 100, 2.0), -0.5);
        // No buffer: a step at the limit.
        assert_eq!(overlong_penalty(100, 100, 0, 1.0), 0.0);
        assert_eq!(overlong_penalty(101, 100, 0, 1.0), -1.0);
    }

    #[test]
    fn the_overlong_penalty_is_a_reward_part_on_the_whole_sequence() {
        let mut t = Trajectory::new("toy", "t", Split::Train, 0)
            .with_turns(vec![agentrl_core::Turn {
                injected_ids: vec![1; 70],
                generated_ids: vec![2; 20],
                logprobs: vec![-0.5; 20],
                policy_version: 0,
                policy_name: None,
                finish: agentrl_core::FinishReason::Length,
                reward: 0.0,
                invalid_action: None,
            }])
            .with_reward(1.0);
        assert_eq!(t.num_tokens(), 90);
        apply_overlong_penalty(std::slice::from_mut(&mut t), 100, 20, 1.0);
        assert_eq!(t.reward, 0.5);
        assert_eq!(t.reward_parts[OVERLONG_PENALTY_PART], -0.5);
    }

    #[test]
    fn mask_zeroes_truncated_episodes_only() {
        let batch = vec![
            traj(1.0, Outcome::Completed),
            traj(0.0, Outcome::Truncated),
            traj(0.0, Outcome::EnvError),
            traj(0.0, Outcome::Truncated),
        ];
        let rewards: Array1<f64> = batch.iter().map(|t| t.reward).collect();
        let mut adv = advantages(AdvantageEstimator::Grpo, &rewards, &[0, 0, 0, 0]);
        assert!(adv.iter().all(|&a| a != 0.0));
        let masked = mask_truncated(&mut adv, &batch);
        assert_eq!(masked, 2);
        assert!(adv[0] > 0.0 && adv[2] < 0.0);
        assert_eq!((adv[1], adv[3]), (0.0, 0.0));
    }

    #[test]
    fn a_group_has_a_signal_when_its_rewards_differ() {
        for estimator in [
            AdvantageEstimator::Grpo,
            AdvantageEstimator::DrGrpo,
            AdvantageEstimator::Rloo,
        ] {
            let same = vec![traj(0.5, Outcome::Completed); 3];
            assert!(!is_informative(estimator, &same), "{estimator:?}");
            let mut differ = same.clone();
            differ[1].reward = 1.0;
            assert!(is_informative(estimator, &differ), "{estimator:?}");
        }
    }

    #[test]
    fn the_producer_quota_follows_the_version_and_the_refills() {
        let plan = ProducerPlan {
            start_step: 2,
            tasks_per_step: 3,
            group_size: 4,
            max_staleness: 1,
            seed: 0,
            in_flight: InFlight::Continue,
        };
        // Weights at the first step's version: that step and the next one (staleness 1).
        assert_eq!(groups_allowed(&plan, 2, 0), 6);
        assert_eq!(groups_allowed(&plan, 3, 0), 9);
        // Two groups to replace, then one step gave two back.
        assert_eq!(groups_allowed(&plan, 3, 2), 11);
        assert_eq!(groups_allowed(&plan, 3, -2), 7);
        let sync = ProducerPlan {
            max_staleness: 0,
            ..plan
        };
        assert_eq!(groups_allowed(&sync, 2, 0), 3);
    }
}
