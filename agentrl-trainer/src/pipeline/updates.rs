//! The learning step of the pipeline: advantages (group baselines with task normalisation,
//! or PPO's GAE with a critic), the optional KL penalty on rewards, and the policy update.

use agentrl_core::{Outcome, Result, Trajectory};
use ndarray::Array1;

use super::shaping::mask_truncated;
use crate::advantage::{AdvantageEstimator, advantages, gae, normalize_per_task, whiten};
use crate::config::OverlongMode;
use crate::config::RunConfig;
use crate::critic::{Critic, CriticStats};
use crate::learner::{Advantages, GrpoParams, Learner, UpdateStats};
use crate::loss::KlMode;

/// What one update did.
#[derive(Debug, Default)]
pub(super) struct UpdateOutcome {
    /// The policy step's statistics.
    pub(super) stats: UpdateStats,
    /// The critic step's (PPO only).
    pub(super) critic: Option<CriticStats>,
    /// Trajectories trained on.
    pub(super) trained: usize,
    /// Per-trajectory advantages (group estimators only).
    pub(super) advantages: Option<GroupAdvantages>,
    /// Truncated trajectories masked out (`overlong = "mask"`).
    pub(super) masked: usize,
    /// Trajectories whose env failed ([`Outcome::EnvError`]): left out of the group baselines
    /// and of the update (an env failure says nothing about the policy).
    pub(super) env_errors: usize,
    /// Mean KL penalty per trajectory (`kl_mode = "reward"`).
    pub(super) kl_penalty_mean: Option<f64>,
}

/// The step's update on `batch`: with `kl_mode = "reward"` the KL to the reference is first
/// taken off each trajectory's reward, for the update only (the batch keeps the rewards the
/// run gave); then a PPO update when there is a critic, else a group-baseline one.
pub(super) fn update(
    learner: &mut Learner,
    critic: Option<&mut Critic>,
    batch: &mut [Trajectory],
    cfg: &RunConfig,
    grpo: GrpoParams,
) -> Result<UpdateOutcome> {
    let rl = &cfg.rl;
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
    let env_errors = batch
        .iter()
        .filter(|t| t.outcome == Outcome::EnvError)
        .count();
    let outcome = match critic {
        Some(critic) => ppo_update(learner, critic, batch, cfg, grpo).map(
            |(stats, critic_stats, trained, masked)| UpdateOutcome {
                stats,
                critic: Some(critic_stats),
                trained,
                masked,
                ..UpdateOutcome::default()
            },
        ),
        None => {
            let rewards: Array1<f64> = batch.iter().map(|t| t.reward).collect();
            let (stats, trained, adv, masked) = group_update(learner, batch, &rewards, cfg, grpo);
            Ok(UpdateOutcome {
                stats,
                trained,
                advantages: Some(adv),
                masked,
                ..UpdateOutcome::default()
            })
        }
    };
    for (t, raw) in batch.iter_mut().zip(raw_rewards) {
        t.reward = raw;
    }
    Ok(UpdateOutcome {
        kl_penalty_mean,
        env_errors,
        ..outcome?
    })
}

/// One GRPO-family update: group advantages (env errors left out of the baselines with
/// advantage 0, truncated episodes' zeroed under `overlong = "mask"`, then task-normalised
/// when configured) for every trajectory, the policy step on those whose advantage is not zero.
/// Returns the step's statistics, how many trajectories it trained on, the advantages and how
/// many truncated trajectories were masked.
fn group_update(
    learner: &mut Learner,
    batch: &[Trajectory],
    rewards: &Array1<f64>,
    cfg: &RunConfig,
    grpo: GrpoParams,
) -> (UpdateStats, usize, GroupAdvantages, usize) {
    let rl = &cfg.rl;
    let mut adv = advantages_without_env_errors(rl.advantage.estimator(), rewards, batch);
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

/// The group advantages of `batch` under `estimator`, computed as if its env errors
/// ([`Outcome::EnvError`]) were not there (their rewards say nothing about the policy, so they
/// must not move their group's baseline); an env error's own advantage is 0.
fn advantages_without_env_errors(
    estimator: AdvantageEstimator,
    rewards: &Array1<f64>,
    batch: &[Trajectory],
) -> Array1<f64> {
    let valid: Vec<usize> = (0..batch.len())
        .filter(|&i| batch[i].outcome != Outcome::EnvError)
        .collect();
    let sub_rewards: Array1<f64> = valid.iter().map(|&i| rewards[i]).collect();
    let sub_groups: Vec<u64> = valid.iter().map(|&i| batch[i].group_id).collect();
    let sub = advantages(estimator, &sub_rewards, &sub_groups);
    let mut adv = Array1::zeros(batch.len());
    for (k, &i) in valid.iter().enumerate() {
        adv[i] = sub[k];
    }
    adv
}

/// The per-trajectory advantages of a group update, before and after task normalisation.
#[derive(Debug, Default)]
pub(super) struct GroupAdvantages {
    /// From the group baseline alone.
    pub(super) before: Vec<f64>,
    /// As trained on (equal to `before` without task normalisation).
    pub(super) after: Vec<f64>,
}

/// One PPO update (without env errors): the critic's values, per-token GAE advantages
/// (whitened over the batch),
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
    // Env errors train neither the policy nor the critic: their reward is not the policy's.
    let trajs: Vec<&Trajectory> = batch
        .iter()
        .filter(|t| t.num_generated() > 0 && t.outcome != Outcome::EnvError)
        .collect();
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

#[cfg(test)]
mod tests {
    use super::*;
    use agentrl_core::Split;

    fn traj(group: u64, reward: f64, outcome: Outcome) -> Trajectory {
        Trajectory::new("toy", "t", Split::Train, group)
            .with_reward(reward)
            .with_outcome(outcome)
    }

    #[test]
    fn env_errors_get_no_advantage_and_do_not_move_their_group_baseline() {
        let batch = vec![
            traj(0, 1.0, Outcome::Completed),
            traj(0, 0.0, Outcome::Completed),
            traj(0, 0.0, Outcome::EnvError),
            traj(1, 1.0, Outcome::Completed),
            traj(1, 1.0, Outcome::Truncated),
        ];
        let rewards: Array1<f64> = batch.iter().map(|t| t.reward).collect();
        for estimator in [
            AdvantageEstimator::Grpo,
            AdvantageEstimator::DrGrpo,
            AdvantageEstimator::Rloo,
            AdvantageEstimator::ReinforcePp,
        ] {
            let adv = advantages_without_env_errors(estimator, &rewards, &batch);
            assert_eq!(adv[2], 0.0, "{estimator:?}");
            // The same as the advantages of the batch without the env error.
            let rest: Vec<Trajectory> = batch
                .iter()
                .filter(|t| t.outcome != Outcome::EnvError)
                .cloned()
                .collect();
            let rest_rewards: Array1<f64> = rest.iter().map(|t| t.reward).collect();
            let ids: Vec<u64> = rest.iter().map(|t| t.group_id).collect();
            let want = advantages(estimator, &rest_rewards, &ids);
            let got: Vec<f64> = [0, 1, 3, 4].iter().map(|&i| adv[i]).collect();
            assert_eq!(got, want.to_vec(), "{estimator:?}");
        }
        // Only env errors: nothing to learn from.
        let failed = vec![traj(0, 0.0, Outcome::EnvError); 3];
        let zeros: Array1<f64> = Array1::zeros(3);
        let adv = advantages_without_env_errors(AdvantageEstimator::Grpo, &zeros, &failed);
        assert!(adv.iter().all(|&a| a == 0.0));
    }
}
