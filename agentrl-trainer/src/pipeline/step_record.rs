//! The `rl_step` record of `metrics.jsonl`: what a step drew, trained on and took, overall
//! and per task (env).

use agentrl_core::{Outcome, Trajectory};
use agentrl_policy::EngineStats;

use super::StepDraw;
use super::updates::{GroupAdvantages, UpdateOutcome};
use crate::config::RlConfig;
use crate::task_stats::{EpisodeStats, by_task, mean_std};

/// Where a step stands when its record is written.
pub(super) struct StepTiming {
    /// The step (1-based).
    pub(super) step: usize,
    /// The version the step's update published.
    pub(super) new_version: u64,
    /// Seconds since the previous step ended (the previous checkpoint write included).
    pub(super) elapsed: f64,
    /// Seconds of the update: forward, backward and optimiser step (the critic's too).
    pub(super) update_seconds: f64,
    /// Seconds the learner spent publishing the new weights to the rollout policy or servers
    /// (for an in-process policy that copies them: waiting for it to take the previous step's
    /// weights, then copying and queueing these).
    pub(super) publish_seconds: f64,
    /// How many versions behind the step each trained trajectory's oldest trained (bounded,
    /// not stale) turn is.
    pub(super) staleness: Vec<f64>,
}

/// The step's record: rewards and success, the update's statistics, staleness and the
/// pipeline's counters, the rollout engine's work since `engine_before` (in process), reward
/// parts, cross-policy turn shares, and the `per_task` object.
pub(super) fn step_record(
    timing: &StepTiming,
    draw: &StepDraw,
    update: &UpdateOutcome,
    engine: Option<(&EngineStats, &EngineStats)>,
    rl: &RlConfig,
) -> serde_json::Value {
    let batch = &draw.batch;
    let stats = &update.stats;
    let staleness = &timing.staleness;
    let n = batch.len().max(1) as f64;
    let generated: usize = batch.iter().map(|t| t.num_generated()).sum();
    let mut record = serde_json::json!({
        "kind": "rl_step",
        "step": timing.step,
        "policy_version": timing.new_version,
        "reward_mean": batch.iter().map(|t| t.reward).sum::<f64>() / n,
        "success_rate": batch.iter().filter(|t| t.success).count() as f64 / n,
        "loss": stats.loss,
        "kl": update.kl_penalty_mean.unwrap_or(stats.kl),
        "clip_fraction": stats.clip_fraction,
        "entropy": stats.entropy,
        "grad_norm": stats.grad_norm,
        "non_finite_skipped": u8::from(stats.skipped_non_finite),
        "trained_trajectories": update.trained,
        "trained_tokens": stats.tokens,
        "shared_prefix_saved_tokens": stats.shared_prefix_saved,
        "tokens_per_second": generated as f64 / timing.elapsed.max(1e-9),
        "staleness_mean": staleness.iter().sum::<f64>() / staleness.len().max(1) as f64,
        "staleness_max": staleness.iter().copied().fold(0.0, f64::max),
        "dropped_stale": draw.dropped_stale,
        "stale_turns_masked": draw.stale_turns,
        "groups_drawn": draw.drawn,
        "dynamic_dropped_groups": draw.uninformative,
        "overlong_masked": update.masked,
        "env_error_masked": update.env_errors,
        "outcomes": outcome_counts(batch),
        "group_ids": group_ids(batch),
        "episodes_cancelled": draw.restarts.cancelled,
        "episodes_restarted": draw.restarts.restarted,
        "trainer_idle_seconds": draw.idle,
        "step_seconds": timing.elapsed,
        "update_seconds": timing.update_seconds,
        "publish_seconds": timing.publish_seconds,
        "rollout_seconds_per_group": draw.rollout_seconds / draw.drawn.max(1) as f64,
        "reward_seconds": draw.reward_seconds,
        "tool_calls_per_episode": batch.iter().map(|t| t.tool_calls as f64).sum::<f64>() / n,
        "invalid_actions_per_episode": batch.iter().map(|t| t.invalid_actions() as f64).sum::<f64>() / n,
    });
    if rl.dynamic_sampling {
        // The batch lacks the groups without signal (e.g. all solved): these are the
        // learning curve over every group the step drew.
        let (episodes, reward, successes) = draw.all_drawn;
        let n = episodes.max(1) as f64;
        record["drawn_reward_mean"] = serde_json::json!(reward / n);
        record["drawn_success_rate"] = serde_json::json!(successes as f64 / n);
    }
    if let Some((now, before)) = engine {
        record["prefill_tokens"] = serde_json::json!(now.prefill_tokens - before.prefill_tokens);
        record["reused_tokens"] = serde_json::json!(now.reused_tokens - before.reused_tokens);
        record["kv_evictions"] = serde_json::json!(now.evictions - before.evictions);
        record["prefill_seconds"] = serde_json::json!(now.prefill_seconds - before.prefill_seconds);
        record["decode_seconds"] = serde_json::json!(now.decode_seconds - before.decode_seconds);
        record["prefill_batches"] = serde_json::json!(now.prefill_batches - before.prefill_batches);
        record["decode_steps"] = serde_json::json!(now.decode_steps - before.decode_steps);
        record["session_cache_mib"] = serde_json::json!(now.session_cache_bytes as f64 / 1048576.0);
    }
    if let Some(c) = &update.critic {
        record["value_loss"] = serde_json::json!(c.value_loss);
        record["value_mean"] = serde_json::json!(c.value_mean);
        record["critic_grad_norm"] = serde_json::json!(c.grad_norm);
        record["critic_non_finite_skipped"] = serde_json::json!(u8::from(c.skipped_non_finite));
    }
    add_reward_parts(&mut record, batch);
    crate::cross_policy::add_turn_shares(&mut record, batch, rl);
    let overall = EpisodeStats::of(batch);
    record["turns_mean"] = serde_json::json!(overall.turns_mean);
    record["generated_tokens_mean"] = serde_json::json!(overall.generated_tokens_mean);
    record["truncated_rate"] = serde_json::json!(overall.truncated_rate);
    if let Some(adv) = &update.advantages {
        let all: Vec<usize> = (0..batch.len()).collect();
        let (mean, std) = mean_std(&adv.after, &all);
        record["advantage_mean"] = serde_json::json!(mean);
        record["advantage_std"] = serde_json::json!(std);
    }
    record["per_task"] = per_task_record(batch, update.advantages.as_ref());
    record
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

/// How the batch's episodes ended: one count per [`Outcome`], every outcome named (0 when
/// none), so the counts add up to the episodes of the batch.
fn outcome_counts(batch: &[Trajectory]) -> serde_json::Value {
    let all = [
        Outcome::Completed,
        Outcome::Truncated,
        Outcome::InvalidAction,
        Outcome::EnvError,
        Outcome::Cancelled,
    ];
    let mut out = serde_json::Map::new();
    for outcome in all {
        let name = serde_json::to_value(outcome)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_else(|| format!("{outcome:?}"));
        let n = batch.iter().filter(|t| t.outcome == outcome).count();
        out.insert(name, serde_json::json!(n));
    }
    serde_json::Value::Object(out)
}

/// The producer's numbers of the groups in the batch, in the order drawn (each group once): a
/// sample trained twice would show up as a number in two steps.
fn group_ids(batch: &[Trajectory]) -> Vec<u64> {
    let mut ids: Vec<u64> = Vec::new();
    for t in batch {
        if !ids.contains(&t.group_id) {
            ids.push(t.group_id);
        }
    }
    ids
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
