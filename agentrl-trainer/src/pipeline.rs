//! The fully asynchronous rollout → train pipeline.
//!
//! A producer task keeps rolling out GRPO groups with the rollout policy and sends them over a
//! bounded queue; the learner (on a blocking thread) takes `tasks_per_step` groups, updates the
//! weights, and pushes them to the rollout policy, bumping the policy version. The producer only
//! starts a group for step `k` once the weights are at least at version `k - max_staleness`, and
//! the learner drops (and counts) any sample older than that, so no sample lags more than
//! `max_staleness` versions. `max_staleness = 0` is the synchronous mode.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use agentrl_core::{Error, Result, RewardFn, SamplingParams, SeededRng, Split, Trajectory};
use ndarray::Array1;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use crate::advantage::{advantages, gae, normalize_per_task, whiten};
use crate::config::RunConfig;
use crate::critic::{Critic, CriticStats};
use crate::learner::{Advantages, GrpoParams, Learner, UpdateStats};
use crate::loss::KlMode;
use crate::metrics::MetricsWriter;
use crate::rollout::{RolloutContext, run_group};
use crate::task_stats::{EpisodeStats, by_task, mean_std};
use crate::weight_sync::WeightSync;
use agentrl_policy::checkpoint::{LatestCheckpoint, checkpoint_dir, write_latest};

/// One rolled-out group, scored.
struct Group {
    trajectories: Vec<Trajectory>,
}

impl Group {
    /// The oldest policy version that generated any of the group's tokens; `None` when the
    /// policy generated nothing (e.g. every prompt was already longer than the context), which
    /// cannot be stale.
    fn oldest_version(&self) -> Option<u64> {
        self.trajectories
            .iter()
            .filter(|t| !t.turns.is_empty())
            .map(|t| t.min_policy_version())
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
    let params = rl.sampling.clone();
    let producer = tokio::spawn(produce(
        run.ctx.clone(),
        run.reward.clone(),
        params,
        tx,
        version_rx,
        ProducerPlan {
            start_step: start,
            tasks_per_step: rl.tasks_per_step,
            group_size: rl.group_size,
            max_staleness: cfg.pipeline.max_staleness,
            seed: cfg.seed,
        },
    ));
    let run_dir = run.run_dir.clone();
    let trained = tokio::task::spawn_blocking(move || {
        learner_loop(
            learner, metrics, rx, weights, version_tx, handle, cfg, run_dir, start,
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
}

async fn produce(
    ctx: RolloutContext,
    reward: Arc<dyn RewardFn>,
    params: SamplingParams,
    tx: mpsc::Sender<Result<Group>>,
    mut version_rx: watch::Receiver<u64>,
    plan: ProducerPlan,
) {
    let mut rng = SeededRng::from_parts(&[plan.seed, 0xA11CE, plan.start_step as u64]);
    let mut in_flight = JoinSet::new();
    let max_in_flight = (plan.max_staleness as usize + 1) * plan.tasks_per_step;
    for g in 0u64.. {
        let step = (plan.start_step + g as usize / plan.tasks_per_step) as u64;
        // Gate: a group for step `step` starts only with weights >= step - max_staleness.
        loop {
            if *version_rx.borrow_and_update() + plan.max_staleness >= step {
                break;
            }
            if version_rx.changed().await.is_err() {
                return;
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
        let n = plan.group_size;
        in_flight.spawn(async move {
            // A failure (the policy or a reward function broke) stops the run with its reason:
            // a group that silently went missing would leave the learner waiting forever.
            let group = async {
                let mut trajectories =
                    run_group(&ctx, &task, n, &params, g).await.map_err(|e| {
                        Error::Trainer(format!("rollout of task {} failed: {e}", task.id))
                    })?;
                for t in trajectories.iter_mut() {
                    agentrl_reward::apply(reward.as_ref(), t)
                        .await
                        .map_err(|e| {
                            Error::Trainer(format!("reward of task {} failed: {e}", task.id))
                        })?;
                }
                Ok(Group { trajectories })
            };
            let _ = tx.send(group.await).await;
        });
    }
}

/// One GRPO-family update: group advantages (task-normalised when configured) for every
/// trajectory, the policy step on those whose advantage is not zero. Returns the step's
/// statistics and how many trajectories it trained on.
fn group_update(
    learner: &mut Learner,
    batch: &[Trajectory],
    rewards: &Array1<f64>,
    cfg: &RunConfig,
    grpo: GrpoParams,
) -> (UpdateStats, usize, GroupAdvantages) {
    let rl = &cfg.rl;
    let group_ids: Vec<u64> = batch.iter().map(|t| t.group_id).collect();
    let mut adv = advantages(rl.advantage.estimator(), rewards, &group_ids);
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
        return (Default::default(), 0, advantages);
    }
    let trajs: Vec<&Trajectory> = live.iter().map(|&i| &batch[i]).collect();
    let a: Vec<f64> = live.iter().map(|&i| adv[i]).collect();
    (learner.grpo_step(&trajs, &a, grpo), live.len(), advantages)
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
/// the policy step on them, then the critic step towards the GAE returns. Returns both steps'
/// statistics and how many trajectories were trained on.
fn ppo_update(
    learner: &mut Learner,
    critic: &mut Critic,
    batch: &[Trajectory],
    cfg: &RunConfig,
    grpo: GrpoParams,
) -> Result<(UpdateStats, CriticStats, usize)> {
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
    let stats = learner.policy_step(&trajs, Advantages::PerToken(&adv), grpo);
    let critic_stats = critic.step(
        &trajs,
        &returns,
        &values,
        gae_params.value_clip,
        rl.grad_clip,
    );
    Ok((stats, critic_stats, trajs.len()))
}

#[allow(clippy::too_many_arguments)]
fn learner_loop(
    mut learner: Learner,
    mut metrics: MetricsWriter,
    mut rx: mpsc::Receiver<Result<Group>>,
    weights: Arc<WeightSync>,
    version_tx: watch::Sender<u64>,
    handle: tokio::runtime::Handle,
    cfg: RunConfig,
    run_dir: PathBuf,
    start: usize,
) -> Result<(Learner, MetricsWriter, RlSummary)> {
    let rl = &cfg.rl;
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
    for step in start..rl.steps {
        let version = step as u64;
        let mut batch: Vec<Trajectory> = Vec::new();
        let mut idle = 0.0;
        let mut dropped = 0;
        let mut groups = 0;
        while groups < rl.tasks_per_step {
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
                .min_by_key(|&i| waiting[i].oldest_version().unwrap_or(u64::MAX))
                .unwrap_or(0);
            let group = waiting.swap_remove(pick);
            let age = group.oldest_version().map(|v| version.saturating_sub(v));
            if age.is_some_and(|age| age > cfg.pipeline.max_staleness) {
                dropped += group.trajectories.len();
                continue;
            }
            batch.extend(group.trajectories);
            groups += 1;
        }
        // `kl_mode = "reward"`: the KL to the reference is a penalty on each trajectory's
        // reward for the update only; metrics and samples keep the reward the run gave.
        let raw_rewards: Vec<f64> = batch.iter().map(|t| t.reward).collect();
        let mut kl_penalty_mean = None;
        if rl.kl_mode == KlMode::Reward && rl.kl_coef > 0.0 {
            let all: Vec<&Trajectory> = batch.iter().collect();
            let kl = learner.kl_penalties(&all, rl.kl_estimator, grpo.temperature);
            kl_penalty_mean = Some(kl.iter().sum::<f64>() / kl.len().max(1) as f64);
            for (t, k) in batch.iter_mut().zip(kl) {
                t.reward -= rl.kl_coef * k;
            }
        }
        let rewards: Array1<f64> = batch.iter().map(|t| t.reward).collect();
        let (stats, critic_stats, trained, group_advantages) = match critic.as_mut() {
            Some(critic) => {
                let (stats, critic_stats, trained) =
                    ppo_update(&mut learner, critic, &batch, &cfg, grpo)?;
                (stats, Some(critic_stats), trained, None)
            }
            None => {
                let (stats, trained, adv) =
                    group_update(&mut learner, &batch, &rewards, &cfg, grpo);
                (stats, None, trained, Some(adv))
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
            .filter(|t| !t.turns.is_empty())
            .map(|t| version.saturating_sub(t.min_policy_version()) as f64)
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
            "trainer_idle_seconds": idle,
            "step_seconds": elapsed,
            "tool_calls_per_episode": batch.iter().map(|t| t.tool_calls as f64).sum::<f64>() / n,
            "invalid_actions_per_episode": batch.iter().map(|t| t.invalid_actions() as f64).sum::<f64>() / n,
        });
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
