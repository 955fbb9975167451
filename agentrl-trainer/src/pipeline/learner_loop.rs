//! The learner's side of the pipeline, on a blocking thread: each step takes fresh groups from
//! the producer (dropping stale ones and, under dynamic sampling, those without signal),
//! updates the policy, publishes the new weights, and writes the step's metrics, samples and
//! checkpoints.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use agentrl_core::{Error, Result, RewardFn, Trajectory};
use agentrl_policy::checkpoint::checkpoint_dir;
use tokio::sync::{mpsc, watch};

use super::shaping::{apply_overlong_penalty, is_informative, mask_stale_turns};
use super::step_record::{StepTiming, step_record};
use super::updates::update;
use super::{Group, RlSummary, StepDraw};
use crate::config::OverlongMode;
use crate::config::RunConfig;
use crate::critic::Critic;
use crate::learner::{GrpoParams, Learner};
use crate::metrics::MetricsWriter;
use crate::resume::{
    CRITIC_FILE, CRITIC_OPTIMIZER_FILE, ResumePoint, TrainState, write_checkpoint,
};
use crate::weight_sync::WeightSync;

/// The learner's ends of the pipeline's channels.
pub(super) struct LearnerChannels {
    /// Scored groups from the producer.
    pub(super) groups: mpsc::Receiver<Result<Group>>,
    /// Changes to how many groups the producer may start beyond its per-step quota: +1 for
    /// every dropped group to replace, negative to give back quota a step did not use.
    pub(super) refills: mpsc::UnboundedSender<i64>,
    /// The version of the weights last published.
    pub(super) versions: watch::Sender<u64>,
}

/// The groups the producer sent, as the learner takes them step by step.
struct GroupSource {
    /// Scored groups from the producer.
    groups: mpsc::Receiver<Result<Group>>,
    /// Replacements asked of the producer (see [`LearnerChannels::refills`]).
    refills: mpsc::UnboundedSender<i64>,
    /// Groups received but not yet used (they arrive out of order).
    waiting: Vec<Group>,
    /// Policy names whose turns the staleness bound does not apply to (a cross-policy run's
    /// snapshot and extra policies are old by design).
    exempt: Vec<String>,
    /// Synchronous mode: groups are taken strictly in index order, so a step's batch does not
    /// depend on which rollout finished first.
    in_order: bool,
    /// One past the highest group index taken so far (in order: the next one to take).
    next_index: u64,
}

impl GroupSource {
    /// Takes the groups of the step that trains version `version`: oldest first, leaving out
    /// of the loss each turn older than `max_staleness` ([`mask_stale_turns`]) and dropping
    /// (and asking a replacement for) a group with no turn left to train, applying the
    /// overlong penalty, and under dynamic sampling dropping groups without signal until
    /// `tasks_per_step` groups are in or the draw limit is reached.
    fn take_step(&mut self, cfg: &RunConfig, version: u64) -> Result<StepDraw> {
        let rl = &cfg.rl;
        let max_drawn = rl.dynamic_sampling.then(|| rl.dynamic_sampling_limit());
        let mut draw = StepDraw::default();
        let (mut groups, mut stale_groups, mut refills) = (0, 0, 0i64);
        // Replacements asked for groups without signal: at most the draw limit less the
        // step's own groups, so the producer never makes a group this step cannot take (it
        // would be trained a step late, or in synchronous mode dropped as stale).
        let mut signal_refills = 0usize;
        while groups < rl.tasks_per_step {
            if let Some(max) = max_drawn
                && draw.drawn >= max
            {
                tracing::warn!(
                    "rl step {}: {} groups drawn (rl.dynamic_sampling_max_groups) but only \
                     {groups} of {} have rewards that differ; training on those",
                    version + 1,
                    draw.drawn,
                    rl.tasks_per_step
                );
                break;
            }
            let pick = loop {
                while let Ok(group) = self.groups.try_recv() {
                    self.waiting.push(group?);
                }
                if let Some(pick) = self.pick() {
                    break pick;
                }
                let t0 = Instant::now();
                let group = self.groups.blocking_recv().ok_or_else(|| {
                    Error::Trainer("the rollout producer stopped before training finished".into())
                })??;
                draw.idle += t0.elapsed().as_secs_f64();
                self.waiting.push(group);
            };
            let mut group = self.waiting.swap_remove(pick);
            self.next_index = self.next_index.max(group.index + 1);
            let exempt = &self.exempt;
            draw.restarts.cancelled += group.restarts.cancelled;
            draw.restarts.restarted += group.restarts.restarted;
            let stale = mask_stale_turns(
                &mut group.trajectories,
                version,
                cfg.pipeline.max_staleness,
                exempt,
            );
            if stale.masked > 0 && !stale.trainable_left {
                draw.dropped_stale += group.trajectories.len();
                stale_groups += 1;
                refills += 1;
                let _ = self.refills.send(1);
                continue;
            }
            draw.stale_turns += stale.masked;
            draw.drawn += 1;
            draw.rollout_seconds += group.rollout_seconds;
            draw.reward_seconds += group.reward_seconds;
            let mut trajectories = group.trajectories;
            if rl.overlong == OverlongMode::Penalty {
                apply_overlong_penalty(
                    &mut trajectories,
                    cfg.model.max_seq_len,
                    rl.overlong_buffer,
                    rl.overlong_penalty,
                );
            }
            draw.all_drawn.0 += trajectories.len();
            draw.all_drawn.1 += trajectories.iter().map(|t| t.reward).sum::<f64>();
            draw.all_drawn.2 += trajectories.iter().filter(|t| t.success).count();
            if max_drawn.is_some() && !is_informative(rl.advantage.estimator(), &trajectories) {
                draw.uninformative += 1;
                if max_drawn.is_some_and(|max| rl.tasks_per_step + signal_refills < max) {
                    signal_refills += 1;
                    refills += 1;
                    let _ = self.refills.send(1);
                }
                continue;
            }
            draw.batch.extend(trajectories);
            groups += 1;
        }
        // The producer's quota counted `tasks_per_step` groups for this step: give back what a
        // step cut short by `dynamic_sampling_max_groups` did not take.
        let unused = rl.tasks_per_step as i64 + refills - (draw.drawn + stale_groups) as i64;
        if unused != 0 {
            let _ = self.refills.send(-unused);
        }
        Ok(draw)
    }

    /// Which waiting group to take next: in order, the one with the next index (`None` until
    /// it arrives); otherwise the oldest, since a group that waits only grows staler.
    fn pick(&self) -> Option<usize> {
        if self.in_order {
            return self.waiting.iter().position(|g| g.index == self.next_index);
        }
        let exempt = &self.exempt;
        (0..self.waiting.len())
            .min_by_key(|&i| self.waiting[i].oldest_version(exempt).unwrap_or(u64::MAX))
    }
}

/// The policy-loss options of `[rl]` as the learner takes them.
fn grpo_params(cfg: &RunConfig) -> GrpoParams {
    let rl = &cfg.rl;
    GrpoParams {
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
    }
}

/// PPO's critic: a copy of the policy (after SFT) with a zero value head, or, when the run
/// resumes, the one saved with its checkpoint (with its optimiser; an old-style checkpoint's
/// `critic-step-N.safetensors` has weights only). `None` for the group estimators.
fn make_critic(
    learner: &Learner,
    cfg: &RunConfig,
    run_dir: &Path,
    start: usize,
    resume: Option<&ResumePoint>,
) -> Result<Option<Critic>> {
    let rl = &cfg.rl;
    let Some(gae) = rl.advantage.gae() else {
        return Ok(None);
    };
    let mut critic = Critic::from_learner(
        learner,
        gae.critic_lr.unwrap_or(rl.lr),
        cfg.model.micro_batch,
    )?;
    if let Some(saved) = resume.and_then(|r| r.file(CRITIC_FILE)) {
        critic.load(&saved)?;
        if let Some(opt) = resume.and_then(|r| r.file(CRITIC_OPTIMIZER_FILE)) {
            critic.load_optimizer(&opt)?;
        }
        tracing::info!("resumed the critic from {}", saved.display());
        return Ok(Some(critic));
    }
    let legacy = checkpoint_dir(run_dir).join(format!("critic-step-{start:06}.safetensors"));
    if start > 0 && legacy.is_file() {
        critic.load(&legacy)?;
        tracing::info!("resumed the critic's weights from {}", legacy.display());
    }
    Ok(Some(critic))
}

/// Everything the learner thread needs besides the learner and the metrics file.
pub(super) struct LearnerSetup {
    /// The pipeline's channels.
    pub(super) channels: LearnerChannels,
    /// Publishes new weights to the rollout policy.
    pub(super) weights: Arc<WeightSync>,
    /// The runtime, to publish from this blocking thread.
    pub(super) handle: tokio::runtime::Handle,
    /// The run's configuration.
    pub(super) cfg: RunConfig,
    /// Run directory (samples and checkpoints go under it).
    pub(super) run_dir: PathBuf,
    /// First step (non-zero when resuming).
    pub(super) start: usize,
    /// Index of the first group the producer starts.
    pub(super) first_group: u64,
    /// The checkpoint the run resumes from (the critic's weights and optimiser).
    pub(super) resume: Option<ResumePoint>,
    /// The reward, whose state checkpoints keep.
    pub(super) reward: Arc<dyn RewardFn>,
}

/// Trains steps `start..rl.steps`: take a batch, update, publish, record, checkpoint.
pub(super) fn learner_loop(
    mut learner: Learner,
    mut metrics: MetricsWriter,
    setup: LearnerSetup,
) -> Result<(Learner, MetricsWriter, RlSummary)> {
    let LearnerSetup {
        channels,
        weights,
        handle,
        cfg,
        run_dir,
        start,
        first_group,
        resume,
        reward: reward_fn,
    } = setup;
    // Shared with each step's update, which may run on another thread.
    let cfg = Arc::new(cfg);
    let rl = &cfg.rl;
    // libtorch keeps its thread count per OS thread, and a thread new to it takes the count
    // set last anywhere, which a policy thread with `pipeline.policy_threads` may have changed.
    // When the updates run on the model thread (see `on_torch_thread`), this thread keeps to
    // one, so that whatever libtorch work is left here starts no OpenMP team of its own.
    let torch_here = match update_thread(&weights) {
        Some(_) => 1,
        None => cfg.torch_threads,
    };
    agentrl_policy::set_torch_threads(torch_here);
    let mut source = GroupSource {
        groups: channels.groups,
        refills: channels.refills,
        waiting: Vec::new(),
        exempt: crate::cross_policy::stale_member_names(rl),
        in_order: cfg.pipeline.max_staleness == 0,
        next_index: first_group,
    };
    let t_run = Instant::now();
    let mut summary = RlSummary::default();
    let progress = crate::progress::phase("RL", rl.steps.saturating_sub(start) as u64);
    let grpo = grpo_params(&cfg);
    learner.set_lr(rl.lr);
    let mut critic = make_critic(&learner, &cfg, &run_dir, start, resume.as_ref())?;
    let mut last_step_end = Instant::now();
    let mut last_engine = weights.engine_stats().unwrap_or_default();
    let versions = Arc::new(channels.versions);
    // The last step's weights while the rollout policy has not taken them yet.
    let mut publishing: Option<tokio::task::JoinHandle<Result<()>>> = None;
    for step in start..rl.steps {
        let version = step as u64;
        let mut draw = source.take_step(&cfg, version)?;
        let t_update = Instant::now();
        let state = UpdateState {
            learner,
            critic,
            batch: std::mem::take(&mut draw.batch),
            cfg: Arc::clone(&cfg),
        };
        let (state, updated) = on_torch_thread(&weights, cfg.torch_threads, state, move |s| {
            update(
                &mut s.learner,
                s.critic.as_mut(),
                &mut s.batch,
                &s.cfg,
                grpo,
            )
        })?;
        (learner, critic, draw.batch) = (state.learner, state.critic, state.batch);
        let updated = updated?;
        let update_seconds = t_update.elapsed().as_secs_f64();
        let new_version = version + 1;
        let t_publish = Instant::now();
        // The previous step's weights are taken before these are queued (an in-process
        // policy takes new weights only between generations; the learner does not wait for
        // that, see `WeightSync::queue`).
        finish_publishing(&handle, &mut publishing)?;
        let queued = weights.queue(&learner, new_version)?;
        if queued.is_none() {
            handle.block_on(weights.publish(&learner, new_version))?;
        }
        let timing = StepTiming {
            step: step + 1,
            new_version,
            elapsed: last_step_end.elapsed().as_secs_f64(),
            update_seconds,
            publish_seconds: t_publish.elapsed().as_secs_f64(),
            staleness: draw
                .batch
                .iter()
                .filter_map(|t| crate::cross_policy::staleness_version(t, &source.exempt))
                .map(|v| version.saturating_sub(v) as f64)
                .collect(),
        };
        last_step_end = Instant::now();
        let engine = weights.engine_stats();
        let record = step_record(
            &timing,
            &draw,
            &updated,
            engine.as_ref().map(|now| (now, &last_engine)),
            rl,
        );
        if let Some(now) = engine {
            last_engine = now;
        }
        let mut record = record;
        if let WeightSync::Servers(_) = weights.as_ref() {
            record["rollout_servers_dropped"] = serde_json::json!(weights.servers_dropped());
        }
        metrics.write(&record)?;
        summary.steps += 1;
        summary.trajectories += updated.trained;
        summary.dropped_stale += draw.dropped_stale;
        summary.stale_turns_masked += draw.stale_turns;
        summary.dynamic_dropped_groups += draw.uninformative;
        summary.episodes_cancelled += draw.restarts.cancelled;
        summary.trainer_idle_seconds += draw.idle;
        let critic_skipped = updated
            .critic
            .as_ref()
            .is_some_and(|c| c.skipped_non_finite);
        if updated.stats.skipped_non_finite || critic_skipped {
            summary.non_finite_skipped += 1;
        }
        let (reward, success) = (
            record["reward_mean"].as_f64().unwrap_or(0.0),
            record["success_rate"].as_f64().unwrap_or(0.0),
        );
        progress.inc(1);
        progress.set_message(format!("reward {reward:.2} success {success:.2}"));
        if (step + 1) % 5 == 0 || step + 1 == rl.steps {
            tracing::info!(
                "rl step {}/{}: reward {reward:.3}, success {success:.3}, loss {:.4}, entropy {:.3}, idle {:.2}s",
                step + 1,
                rl.steps,
                updated.stats.loss,
                updated.stats.entropy,
                draw.idle
            );
        }
        let is_last = step + 1 == rl.steps;
        if is_last || (rl.checkpoint_every > 0 && (step + 1) % rl.checkpoint_every == 0) {
            let (metrics_bytes, tensorboard) = metrics.position()?;
            let state = TrainState {
                step: step + 1,
                version: new_version,
                next_group: source.next_index,
                metrics_bytes: Some(metrics_bytes),
                reward_state: reward_fn.state(),
                tensorboard,
            };
            save_step(&run_dir, &state, &draw.batch, &learner, critic.as_ref())?;
        }
        // Only now may the producer start the next step's groups (in synchronous mode, none
        // is in flight while the checkpoint above records the reward's state), and only once
        // the rollout policy has the new weights (for `in_flight = "cancel"`, whose episodes
        // restart on them).
        match queued {
            Some(publication) => {
                let versions = Arc::clone(&versions);
                publishing = Some(handle.spawn(async move {
                    publication.taken().await?;
                    let _ = versions.send(new_version);
                    Ok(())
                }));
            }
            None => {
                let _ = versions.send(new_version);
            }
        }
    }
    // The rollout policy holds the last weights when the run goes on (to its evaluation).
    finish_publishing(&handle, &mut publishing)?;
    progress.finish();
    // The process-wide default follows the last count set: back to the run's.
    if torch_here != cfg.torch_threads {
        agentrl_policy::set_torch_threads(cfg.torch_threads);
    }
    summary.wall_seconds = t_run.elapsed().as_secs_f64();
    Ok((learner, metrics, summary))
}

/// Waits until the rollout policy has taken the weights queued last (see
/// [`WeightSync::queue`]), if any.
fn finish_publishing(
    handle: &tokio::runtime::Handle,
    publishing: &mut Option<tokio::task::JoinHandle<Result<()>>>,
) -> Result<()> {
    match publishing.take() {
        Some(task) => handle
            .block_on(task)
            .map_err(|e| Error::Trainer(format!("publishing the weights stopped: {e}")))?,
        None => Ok(()),
    }
}

/// What a step's update owns while it runs, possibly on another thread.
struct UpdateState {
    learner: Learner,
    critic: Option<Critic>,
    batch: Vec<Trajectory>,
    cfg: Arc<RunConfig>,
}

/// The policy whose model thread runs the updates: the in-process one of the synchronous
/// pipeline ([`WeightSync::Shared`]), idle while the learner updates, so that the process
/// holds one OpenMP team, whose threads spin between operations instead of sleeping (see
/// `TchPolicy::run_on_model_thread`). `None` where rollouts run beside the update or on other
/// processes: the learner's own thread runs them.
fn update_thread(weights: &WeightSync) -> Option<&agentrl_policy::TchPolicy> {
    match weights {
        WeightSync::Shared(engines) => Some(engines.first()),
        _ => None,
    }
}

/// Runs `work` on `state` where the learner's libtorch work belongs ([`update_thread`], with
/// `threads` libtorch threads, else this thread), and returns the state with the result.
fn on_torch_thread<S: Send + 'static, T: Send + 'static>(
    weights: &WeightSync,
    threads: i32,
    mut state: S,
    work: impl FnOnce(&mut S) -> T + Send + 'static,
) -> Result<(S, T)> {
    match update_thread(weights) {
        Some(policy) => policy.run_on_model_thread(Some(threads), move || {
            let out = work(&mut state);
            (state, out)
        }),
        None => {
            let out = work(&mut state);
            Ok((state, out))
        }
    }
}

/// After a checkpoint step: the step's samples, then the checkpoint directory
/// ([`write_checkpoint`]), which also points `latest.json` at it.
fn save_step(
    run_dir: &Path,
    state: &TrainState,
    batch: &[Trajectory],
    learner: &Learner,
    critic: Option<&Critic>,
) -> Result<()> {
    let samples = run_dir.join("samples");
    std::fs::create_dir_all(&samples).map_err(|e| Error::io("creating", &samples, e))?;
    let sample_file = samples.join(format!("rl_step_{:06}.jsonl", state.step));
    agentrl_core::write_jsonl(&sample_file, batch, false)?;
    write_checkpoint(run_dir, state, learner, critic).map(drop)
}

#[cfg(test)]
mod tests {
    use agentrl_core::{Split, Trajectory};
    use tokio::sync::mpsc;

    use super::{Group, GroupSource};
    use crate::config::RunConfig;

    /// Group `index` of two episodes: rewards that differ when `signal`, else equal.
    fn group(index: u64, signal: bool) -> Group {
        let episode = |reward| Trajectory::new("toy", "t", Split::Train, index).with_reward(reward);
        Group {
            index,
            trajectories: vec![episode(0.0), episode(if signal { 1.0 } else { 0.0 })],
            restarts: Default::default(),
            rollout_seconds: 0.0,
            reward_seconds: 0.0,
        }
    }

    #[test]
    fn dynamic_sampling_never_asks_for_more_groups_than_its_bound() {
        // 2 groups a step, a bound of 4, signal in group 3 only: the step draws 0..=3 and
        // stops at its bound with one group of signal.
        let cfg = RunConfig::tiny_for_tests(
            r#"
[rl]
steps = 1
tasks_per_step = 2
group_size = 2
lr = 1e-3
dynamic_sampling = true
dynamic_sampling_max_groups = 4
[pipeline]
max_staleness = 0
"#,
        );
        let (groups_tx, groups) = mpsc::channel(8);
        let (refills, mut requests) = mpsc::unbounded_channel();
        for index in 0..6 {
            groups_tx
                .try_send(Ok(group(index, index == 3)))
                .expect("room");
        }
        let mut source = GroupSource {
            groups,
            refills,
            waiting: Vec::new(),
            exempt: Vec::new(),
            in_order: true,
            next_index: 0,
        };
        let draw = source.take_step(&cfg, 0).expect("a step");
        assert_eq!((draw.drawn, draw.uninformative), (4, 3));
        assert_eq!(draw.batch.len(), 2);
        // The producer's quota after each message: never past the 4 groups the step can take
        // (a group made beyond them would be trained a step late, or dropped as stale).
        let mut asked = cfg.rl.tasks_per_step as i64;
        while let Ok(delta) = requests.try_recv() {
            asked += delta;
            assert!(asked <= 4, "the producer was asked for {asked} groups");
        }
        assert_eq!(asked, 4);
    }
}
