//! The producer side of the pipeline: a task that rolls out GRPO groups with the rollout
//! policy, scores them and sends them to the learner over a bounded queue, gated by the
//! published weights' version so no group lags more than `max_staleness` versions.

use std::sync::Arc;

use agentrl_core::{Error, Result, RewardFn, SamplingParams, SeededRng, Split};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use super::Group;
use crate::config::InFlight;
use crate::rollout::{Restarts, RolloutContext, run_group, run_group_on_current_weights};

/// What the producer needs to know about the run.
pub(super) struct ProducerPlan {
    pub(super) start_step: usize,
    /// Index of the first group to start (groups before it were trained on before a resume).
    pub(super) first_group: u64,
    pub(super) tasks_per_step: usize,
    pub(super) group_size: usize,
    pub(super) max_staleness: u64,
    pub(super) seed: u64,
    pub(super) in_flight: InFlight,
}

/// How many groups the producer may have started in all: `tasks_per_step` for every step up
/// to `version + max_staleness` (a group for step `k` starts only with weights at version
/// `k - max_staleness` or newer), plus the learner's refills.
fn groups_allowed(plan: &ProducerPlan, version: u64, refills: i64) -> i64 {
    let steps = (version + plan.max_staleness + 1).saturating_sub(plan.start_step as u64);
    let quota = i64::try_from(steps.saturating_mul(plan.tasks_per_step as u64)).unwrap_or(i64::MAX);
    quota.saturating_add(refills)
}

/// Rolls out and scores groups of train tasks and sends them to the learner, as fast as the
/// gate allows: [`groups_allowed`] for the published version and the learner's refills.
pub(super) async fn produce(
    ctx: RolloutContext,
    reward: Arc<dyn RewardFn>,
    params: SamplingParams,
    tx: mpsc::Sender<Result<Group>>,
    mut version_rx: watch::Receiver<u64>,
    mut refill_rx: mpsc::UnboundedReceiver<i64>,
    plan: ProducerPlan,
) {
    // One task draw per group: a resumed run skips the draws of the groups before it, so it
    // meets the tasks an uninterrupted run would.
    let mut rng = SeededRng::from_parts(&[plan.seed, 0xA11CE, 0]);
    for _ in 0..plan.first_group {
        rng.next_u64();
    }
    let mut in_flight = JoinSet::new();
    let max_in_flight = (plan.max_staleness as usize + 1) * plan.tasks_per_step;
    let mut refills: i64 = 0;
    for g in plan.first_group.. {
        let started = (g - plan.first_group) as i64;
        // Gate: the quota of the steps the weights allow, plus the learner's refills.
        loop {
            while let Ok(delta) = refill_rx.try_recv() {
                refills += delta;
            }
            let version = *version_rx.borrow_and_update();
            if started < groups_allowed(&plan, version, refills) {
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
        // Each group samples from its own seed (each episode and turn from one derived from
        // it), so what it generates does not depend on when other requests reach the policy.
        let mut params = params.clone();
        params.seed = Some(group_seed(params.seed.unwrap_or(plan.seed), g));
        let (ctx, reward, tx) = (ctx.clone(), reward.clone(), tx.clone());
        let versions = (plan.in_flight == InFlight::Cancel).then(|| version_rx.clone());
        let n = plan.group_size;
        in_flight.spawn(async move {
            // A failure (the policy or a reward function broke) stops the run with its reason:
            // a group that silently went missing would leave the learner waiting forever.
            let group = async {
                let started = std::time::Instant::now();
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
                let rollout_seconds = started.elapsed().as_secs_f64();
                let scoring = std::time::Instant::now();
                for t in trajectories.iter_mut() {
                    agentrl_reward::apply(reward.as_ref(), t)
                        .await
                        .map_err(|e| {
                            Error::Trainer(format!("reward of task {} failed: {e}", task.id))
                        })?;
                }
                Ok(Group {
                    index: g,
                    trajectories,
                    restarts,
                    rollout_seconds,
                    reward_seconds: scoring.elapsed().as_secs_f64(),
                })
            };
            let _ = tx.send(group.await).await;
        });
    }
}

/// The sampling seed of group `index` of a run seeded with `seed`.
fn group_seed(seed: u64, index: u64) -> u64 {
    SeededRng::from_parts(&[seed, 0x5EED, index]).next_u64()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::InFlight;

    #[test]
    fn the_producer_quota_follows_the_version_and_the_refills() {
        let plan = ProducerPlan {
            start_step: 2,
            first_group: 6,
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
