//! AgentRL's cross-policy sampling on the trainer's side (`[rl.cross_policy]`).
//!
//! The rollout policy becomes a [`CrossPolicy`] over the current policy (named [`CURRENT`],
//! weight `1 - p`), a stale snapshot of it ([`SNAPSHOT`], weight `p`: a second in-process
//! [`TchPolicy`] whose weights are refreshed only every `stale_every` versions) and optional
//! extra policies over HTTP (their own names and weights). Each turn records which member made
//! it (`Turn::policy_name`), the version of the weights that made it (`Turn::policy_version`)
//! and its sampling logprobs, so the learner's importance ratio uses the logprobs of whichever
//! policy produced each token. [`CrossSync`] publishes the learner's weights to the two
//! in-process members; the pure helpers give the step's turn shares per member and the turn
//! versions the pipeline's staleness bound applies to (the current policy's: snapshot and
//! extra turns are old by design).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use agentrl_core::{Error, Policy, Result, Trajectory, Turn};
use agentrl_policy::{
    CrossPolicy, EngineStats, HttpPolicy, HttpPolicyConfig, NamedWeights, TchPolicy, WeightsQueued,
};

use crate::config::{CrossPolicyConfig, RlConfig};
use crate::learner::Learner;

/// The name of the current policy's turns.
pub const CURRENT: &str = "current";
/// The name of the stale snapshot's turns.
pub const SNAPSHOT: &str = "snapshot";

/// Publishes the learner's weights to the current policy after every step and to the snapshot
/// when [`refresh_snapshot`] says so.
pub struct CrossSync {
    current: TchPolicy,
    snapshot: TchPolicy,
    stale_every: u64,
    published: AtomicBool,
}

impl CrossSync {
    /// The two in-process members; the snapshot is refreshed at versions that are multiples
    /// of `stale_every` (and at the first publish).
    pub fn new(current: TchPolicy, snapshot: TchPolicy, stale_every: u64) -> Self {
        CrossSync {
            current,
            snapshot,
            stale_every,
            published: AtomicBool::new(false),
        }
    }

    /// The current policy.
    pub fn current(&self) -> &TchPolicy {
        &self.current
    }

    /// The stale snapshot.
    pub fn snapshot(&self) -> &TchPolicy {
        &self.snapshot
    }

    /// Makes `learner`'s weights the current policy's as `version`, and the snapshot's too when
    /// it is due (then the snapshot's version is `version`).
    pub async fn publish(&self, learner: &Learner, version: u64) -> Result<()> {
        self.queue(learner, version)?.taken().await
    }

    /// [`CrossSync::publish`] without waiting: the weights are copied and queued for the
    /// member threads, which take them once their running generations finish.
    pub fn queue(&self, learner: &Learner, version: u64) -> Result<WeightsQueued> {
        let first = !self.published.swap(true, Ordering::AcqRel);
        let weights = learner.weights();
        if !refresh_snapshot(version, self.stale_every, first) {
            return self.current.queue_weights(weights, version);
        }
        // Both threads only read the tensors they are given: one deep copy is enough.
        let shared: NamedWeights = weights
            .iter()
            .map(|(name, t)| (name.clone(), t.shallow_clone()))
            .collect();
        Ok(WeightsQueued::join([
            self.current.queue_weights(weights, version)?,
            self.snapshot.queue_weights(shared, version)?,
        ]))
    }

    /// Both engines' stats added up.
    pub fn engine_stats(&self) -> EngineStats {
        add_stats(self.current.stats(), &self.snapshot.stats())
    }
}

/// Whether the snapshot takes the weights published as `version`: at the first publish of a
/// run (so it starts from the run's weights and version) and at every multiple of
/// `stale_every` (so a resumed run keeps the schedule of an uninterrupted one). The snapshot
/// then lags the current policy by at most `stale_every - 1` versions.
pub fn refresh_snapshot(version: u64, stale_every: u64, first: bool) -> bool {
    first || version.is_multiple_of(stale_every.max(1))
}

/// `a` plus `b`, field by field (the current sizes of the caches too).
pub(crate) fn add_stats(mut a: EngineStats, b: &EngineStats) -> EngineStats {
    a.requests += b.requests;
    a.prefill_tokens += b.prefill_tokens;
    a.reused_tokens += b.reused_tokens;
    a.shared_prompt_hits += b.shared_prompt_hits;
    a.generated_tokens += b.generated_tokens;
    a.prefill_batches += b.prefill_batches;
    a.decode_steps += b.decode_steps;
    a.prefill_seconds += b.prefill_seconds;
    a.decode_seconds += b.decode_seconds;
    a.evictions += b.evictions;
    a.cancelled += b.cancelled;
    a.session_cache_bytes += b.session_cache_bytes;
    a.prompt_cache_bytes += b.prompt_cache_bytes;
    a.cached_sessions += b.cached_sessions;
    a.slot_bytes += b.slot_bytes;
    a
}

/// The rollout policy of `[rl.cross_policy]`: `current` (weight `1 - p`), `snapshot` (weight
/// `p`) and each extra policy over HTTP (its own weight), drawn per turn with `seed`.
pub fn cross_rollout_policy(
    current: &TchPolicy,
    snapshot: &TchPolicy,
    config: &CrossPolicyConfig,
    seed: u64,
) -> Result<CrossPolicy> {
    let mut members: Vec<(String, Arc<dyn Policy>, f64)> = vec![
        (CURRENT.into(), Arc::new(current.clone()), 1.0 - config.p),
        (SNAPSHOT.into(), Arc::new(snapshot.clone()), config.p),
    ];
    for (i, extra) in config.extra.iter().enumerate() {
        let mut http = HttpPolicyConfig::new(extra.url.as_str(), extra.model.as_str());
        http.api_key = extra.api_key.clone();
        http.name = Some(extra.name.clone());
        let policy = HttpPolicy::new(http).map_err(|e| {
            Error::Config(format!("rl.cross_policy.extra[{i}] ({:?}): {e}", extra.url))
        })?;
        members.push((extra.name.clone(), Arc::new(policy), extra.weight));
    }
    CrossPolicy::new(members, seed)
}

/// Every member's name under `rl`'s cross-policy sampling, in order (`current`, `snapshot`,
/// the extras); empty when it is off.
pub fn member_names(rl: &RlConfig) -> Vec<String> {
    let Some(cross) = &rl.cross_policy else {
        return Vec::new();
    };
    [CURRENT, SNAPSHOT]
        .into_iter()
        .map(str::to_string)
        .chain(cross.extra.iter().map(|e| e.name.clone()))
        .collect()
}

/// The members whose turns are old by design (the snapshot and the extras), which the
/// staleness bound does not apply to; empty when cross-policy sampling is off.
pub fn stale_member_names(rl: &RlConfig) -> Vec<String> {
    member_names(rl)
        .into_iter()
        .filter(|n| n != CURRENT)
        .collect()
}

/// Whether the staleness bound applies to `turn`: it was not made by a member named in
/// `exempt` (a cross-policy run's snapshot and extra policies, old by design).
pub fn staleness_bounded(turn: &Turn, exempt: &[String]) -> bool {
    turn.policy_name
        .as_ref()
        .is_none_or(|name| !exempt.contains(name))
}

/// The oldest version among `t`'s turns that the staleness bound applies to
/// ([`staleness_bounded`], and not already left out as [`Turn::stale`]); `None` when there is
/// none (no turns, or all exempt or stale).
pub fn staleness_version(t: &Trajectory, exempt: &[String]) -> Option<u64> {
    t.turns
        .iter()
        .filter(|turn| !turn.stale && staleness_bounded(turn, exempt))
        .map(|turn| turn.policy_version)
        .min()
}

/// Each of `names`' share of all turns in `batch` (0 for a name that made none, and for every
/// name when the batch has no turns), in the order of `names`.
pub fn turn_shares(batch: &[Trajectory], names: &[String]) -> Vec<(String, f64)> {
    let mut counts = vec![0usize; names.len()];
    let mut total = 0usize;
    for turn in batch.iter().flat_map(|t| &t.turns) {
        total += 1;
        if let Some(i) = turn
            .policy_name
            .as_ref()
            .and_then(|name| names.iter().position(|n| n == name))
        {
            counts[i] += 1;
        }
    }
    names
        .iter()
        .zip(counts)
        .map(|(name, c)| (name.clone(), c as f64 / total.max(1) as f64))
        .collect()
}

/// Writes `cross_policy/NAME_turn_share` for every member of `rl`'s cross-policy sampling into
/// a step's metrics record (nothing when it is off).
pub fn add_turn_shares(record: &mut serde_json::Value, batch: &[Trajectory], rl: &RlConfig) {
    for (name, share) in turn_shares(batch, &member_names(rl)) {
        record[format!("cross_policy/{name}_turn_share")] = serde_json::json!(share);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentrl_core::{FinishReason, Split};

    fn turn(name: Option<&str>, version: u64) -> Turn {
        Turn {
            injected_ids: vec![1],
            generated_ids: vec![2],
            logprobs: vec![-0.5],
            policy_version: version,
            policy_name: name.map(str::to_string),
            finish: FinishReason::Stop,
            reward: 0.0,
            stale: false,
            invalid_action: None,
        }
    }

    fn traj(turns: Vec<Turn>) -> Trajectory {
        Trajectory::new("toy", "t", Split::Train, 0).with_turns(turns)
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_snapshot_is_refreshed_at_the_start_and_every_stale_every_versions() {
        let due: Vec<u64> = (0..9).filter(|&v| refresh_snapshot(v, 4, false)).collect();
        assert_eq!(due, vec![0, 4, 8]);
        // A resumed run's first publish refreshes it whatever the version.
        assert!(refresh_snapshot(3, 4, true));
        assert!(!refresh_snapshot(3, 4, false));
        // stale_every = 1: always (the snapshot is the current policy).
        assert!((0..5).all(|v| refresh_snapshot(v, 1, false)));
    }

    #[test]
    fn staleness_ignores_the_exempt_members_turns() {
        let t = traj(vec![
            turn(Some(CURRENT), 7),
            turn(Some(SNAPSHOT), 4),
            turn(Some("peer"), 0),
        ]);
        let exempt = names(&[SNAPSHOT, "peer"]);
        assert_eq!(staleness_version(&t, &exempt), Some(7));
        assert_eq!(staleness_version(&t, &[]), Some(0));
        // Unnamed turns (no cross-policy sampling) and other names always count.
        let plain = traj(vec![turn(None, 5), turn(Some("http://a"), 3)]);
        assert_eq!(staleness_version(&plain, &exempt), Some(3));
        // Only exempt turns, or none: nothing to be stale.
        let old = traj(vec![turn(Some(SNAPSHOT), 1)]);
        assert_eq!(staleness_version(&old, &exempt), None);
        assert_eq!(staleness_version(&traj(Vec::new()), &exempt), None);
    }

    #[test]
    fn turn_shares_count_every_turn_of_the_batch() {
        let batch = vec![
            traj(vec![turn(Some(CURRENT), 1), turn(Some(SNAPSHOT), 0)]),
            traj(vec![turn(Some(CURRENT), 1), turn(Some(CURRENT), 1)]),
        ];
        let shares = turn_shares(&batch, &names(&[CURRENT, SNAPSHOT, "peer"]));
        assert_eq!(
            shares,
            vec![
                ("current".to_string(), 0.75),
                ("snapshot".to_string(), 0.25),
                ("peer".to_string(), 0.0)
            ]
        );
        let none = turn_shares(&[], &names(&[CURRENT]));
        assert_eq!(none, vec![("current".to_string(), 0.0)]);
    }

    #[test]
    fn turn_share_metrics_are_written_only_with_cross_policy_sampling() {
        let cfg = crate::config::RunConfig::tiny_for_tests(
            r#"
[rl]
steps = 1
tasks_per_step = 1
group_size = 2
lr = 1e-3
[rl.cross_policy]
p = 0.5
[[rl.cross_policy.extra]]
name = "peer"
url = "http://127.0.0.1:9"
model = "agentrl"
weight = 0.5
"#,
        );
        let batch = vec![traj(vec![turn(Some(SNAPSHOT), 0), turn(Some("peer"), 0)])];
        let mut record = serde_json::json!({});
        add_turn_shares(&mut record, &batch, &cfg.rl);
        assert_eq!(record["cross_policy/current_turn_share"], 0.0);
        assert_eq!(record["cross_policy/snapshot_turn_share"], 0.5);
        assert_eq!(record["cross_policy/peer_turn_share"], 0.5);
        assert_eq!(stale_member_names(&cfg.rl), names(&[SNAPSHOT, "peer"]));
        let mut plain = cfg.rl.clone();
        plain.cross_policy = None;
        let mut record = serde_json::json!({});
        add_turn_shares(&mut record, &batch, &plain);
        assert_eq!(record, serde_json::json!({}));
        assert!(stale_member_names(&plain).is_empty());
    }
}
