//! The fully asynchronous rollout → train pipeline.
//!
//! A producer task keeps rolling out GRPO groups with the rollout policy and sends them over a
//! bounded queue; the learner (on a blocking thread) takes `tasks_per_step` groups, updates the
//! weights, and pushes them to the rollout policy, bumping the policy version. The producer only
//! starts a group for step `k` once the weights are at least at version `k - max_staleness`, and
//! the learner leaves out of the loss (and counts) every turn older than that, so no trained
//! token lags more than `max_staleness` versions. The bound is per turn, not per episode: a
//! long episode's first turns may lag while its last ones are fresh, and dropping whole groups
//! by their oldest turn starved the long envs of a mixture. A group with no turn left to train
//! is dropped and replaced. `max_staleness = 0` is the synchronous mode.
//!
//! Three `[rl]` options act here:
//! - `dynamic_sampling` (DAPO): the learner drops a group whose rewards are all equal (it has no
//!   advantage signal) and asks the producer for another, until `tasks_per_step` groups with a
//!   signal are in or `dynamic_sampling_max_groups` groups were drawn in the step (metrics
//!   `groups_drawn`, `dynamic_dropped_groups`, and `drawn_reward_mean`/`drawn_success_rate`
//!   over every group drawn, since the batch lacks the dropped ones). Every group the
//!   learner drops as stale is one it asks the producer to replace, on top of the producer's
//!   per-step quota; a group without signal is replaced only while the step's requests stay
//!   within `dynamic_sampling_max_groups`, so the producer never makes a group the step cannot
//!   take (it would come back a step late, stale), and a step cut short by the bound gives
//!   back the quota it did not use: the producer never stops short of what the learner waits
//!   for, nor drifts further ahead.
//! - `overlong`: episodes cut short ([`Outcome::Truncated`](agentrl_core::Outcome::Truncated)) are trained on as usual
//!   (`"none"`), get zero advantage (`"mask"`), or every episode near the context limit loses
//!   reward ([`overlong_penalty`], `"penalty"`) before advantages are computed.
//! - `in_flight = "cancel"`: groups are played with a watch of the published version
//!   ([`run_group_on_current_weights`](crate::rollout::run_group_on_current_weights)), so an episode running when new weights arrive is
//!   cancelled and its group played again under them.
//!
//! The pieces: `producer` rolls out and scores groups, the learner thread
//! (`learner_loop`) takes them step by step, `shaping` holds the overlong penalty and mask
//! and the dynamic-sampling test, `updates` the advantages and the policy (and critic)
//! update, and `step_record` the step's `metrics.jsonl` record.

mod learner_loop;
mod producer;
mod shaping;
mod step_record;
mod updates;

use std::path::PathBuf;
use std::sync::Arc;

use agentrl_core::{Error, Result, RewardFn, Trajectory};
use tokio::sync::{mpsc, watch};

use self::learner_loop::{LearnerChannels, LearnerSetup, learner_loop};
use self::producer::{ProducerPlan, produce};
pub use self::shaping::{OVERLONG_PENALTY_PART, overlong_penalty};
use crate::config::RunConfig;
use crate::learner::Learner;
use crate::metrics::MetricsWriter;
use crate::resume::ResumePoint;
use crate::rollout::{Restarts, RolloutContext};
use crate::weight_sync::WeightSync;

/// One rolled-out group, scored.
struct Group {
    /// The group's index in the run's stream of groups (its task and sampling seeds derive
    /// from it).
    index: u64,
    /// The group's episodes, scored.
    trajectories: Vec<Trajectory>,
    /// How often it was played again because new weights arrived (`in_flight = "cancel"`).
    restarts: Restarts,
    /// Seconds from the group's start to its last episode's end.
    rollout_seconds: f64,
    /// Seconds spent scoring its episodes.
    reward_seconds: f64,
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
    /// Trajectories dropped for staleness (their groups had no turn left to train).
    pub dropped_stale: usize,
    /// Turns left out of the loss for staleness in the groups trained on.
    pub stale_turns_masked: usize,
    /// Groups dropped by dynamic sampling (all rewards equal).
    pub dynamic_dropped_groups: usize,
    /// Episodes cancelled because new weights arrived (`in_flight = "cancel"`).
    pub episodes_cancelled: usize,
    /// Steps whose policy (or critic) update was skipped because its loss or gradients were
    /// NaN or infinite.
    pub non_finite_skipped: usize,
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
    /// The checkpoint the run resumes from, if any: where the group stream continues
    /// (without one, at `start_step × tasks_per_step`), and the critic's weights and
    /// optimiser.
    pub resume: Option<ResumePoint>,
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
    let first_group = match &run.resume {
        Some(point) => point.state.next_group,
        None => (start as u64).saturating_mul(rl.tasks_per_step as u64),
    };
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
            first_group,
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
    let setup = LearnerSetup {
        channels,
        weights,
        handle,
        cfg,
        run_dir,
        start,
        first_group,
        resume: run.resume,
        reward: run.reward.clone(),
    };
    let trained = tokio::task::spawn_blocking(move || learner_loop(learner, metrics, setup))
        .await
        .map_err(|e| Error::Trainer(format!("learner thread failed: {e}")))?;
    producer.abort();
    trained
}

/// What a step took from the producer.
#[derive(Debug, Default)]
struct StepDraw {
    /// The trajectories to train on.
    batch: Vec<Trajectory>,
    /// Seconds the learner waited for groups.
    idle: f64,
    /// Trajectories dropped for staleness (their groups had no turn left to train).
    dropped_stale: usize,
    /// Turns left out of the loss for staleness, in the groups kept.
    stale_turns: usize,
    /// Fresh groups taken (kept, or dropped for want of signal).
    drawn: usize,
    /// Groups dropped by dynamic sampling (all rewards equal).
    uninformative: usize,
    /// Episodes cancelled and restarted because new weights arrived.
    restarts: Restarts,
    /// Every fresh trajectory drawn, kept or not: episodes, reward sum, successes.
    all_drawn: (usize, f64, usize),
    /// Rollout seconds of the groups taken, summed (groups run side by side).
    rollout_seconds: f64,
    /// Reward seconds of the groups taken, summed.
    reward_seconds: f64,
}
