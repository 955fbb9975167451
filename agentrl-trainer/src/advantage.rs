//! Advantage estimation: group baselines (GRPO and its relatives Dr. GRPO and RLOO), the
//! global batch baseline of REINFORCE++, per-task normalisation (AgentRL), and per-token
//! generalised advantage estimation against a learned critic (PPO).

use std::collections::HashMap;

use ndarray::Array1;
use serde::{Deserialize, Serialize};

const EPS: f64 = 1e-6;

/// How a rollout's advantage is computed from the rewards of its group (the rollouts of one
/// task), of the whole batch, or per token from a critic.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AdvantageEstimator {
    /// GRPO: `(r - mean) / std` over the group.
    #[default]
    Grpo,
    /// Dr. GRPO: `r - mean`, without the division by the standard deviation (which favours
    /// groups whose rewards barely differ).
    DrGrpo,
    /// RLOO: `r` minus the mean of the *other* rollouts of the group (an unbiased baseline).
    Rloo,
    /// REINFORCE++: `(r - mean) / std` over the whole batch (one global baseline, not per
    /// group), so a group whose rewards are all equal still gets a signal.
    ReinforcePp,
    /// PPO: per-token generalised advantage estimation ([`gae`]) against a learned critic
    /// ([`crate::critic::Critic`]); no group is needed.
    Gae,
}

impl AdvantageEstimator {
    /// Whether advantages are per token from a critic ([`AdvantageEstimator::Gae`]) rather than
    /// per trajectory from its group.
    pub fn needs_critic(self) -> bool {
        self == AdvantageEstimator::Gae
    }

    /// Whether advantages are relative to the other rollouts of the same task, so a group needs
    /// at least two (`grpo`, `dr_grpo`, `rloo`).
    pub fn needs_group(self) -> bool {
        matches!(
            self,
            AdvantageEstimator::Grpo | AdvantageEstimator::DrGrpo | AdvantageEstimator::Rloo
        )
    }
}

/// Advantages of `rewards` under `estimator`, groups given by `groups` (one id per reward). A
/// group whose rewards are all equal gets zeros under every group estimator;
/// [`AdvantageEstimator::ReinforcePp`] ignores the groups and whitens over the whole batch
/// ([`batch_whitened`]); [`AdvantageEstimator::Gae`] has no group baseline and returns the rewards unchanged (its
/// per-token advantages come from [`gae`]).
pub fn advantages(
    estimator: AdvantageEstimator,
    rewards: &Array1<f64>,
    groups: &[u64],
) -> Array1<f64> {
    match estimator {
        AdvantageEstimator::Grpo => return group_advantages(rewards, groups),
        AdvantageEstimator::ReinforcePp => return batch_whitened(rewards),
        AdvantageEstimator::Gae => return rewards.clone(),
        AdvantageEstimator::DrGrpo | AdvantageEstimator::Rloo => {}
    }
    let mut adv = Array1::zeros(rewards.len());
    for idx in indices_by_key(groups).values() {
        let r: Array1<f64> = idx.iter().map(|&i| rewards[i]).collect();
        let n = r.len() as f64;
        let mean = r.mean().unwrap_or(0.0);
        if r.std(0.0) < EPS {
            continue;
        }
        for (&i, &ri) in idx.iter().zip(r.iter()) {
            adv[i] = match estimator {
                AdvantageEstimator::Rloo if n > 1.0 => ri - (mean * n - ri) / (n - 1.0),
                _ => ri - mean,
            };
        }
    }
    adv
}

/// GRPO advantages: each reward minus its group's mean, divided by the group's standard
/// deviation (plus a small epsilon). A group whose rewards are all equal gets zeros.
pub fn group_advantages(rewards: &Array1<f64>, groups: &[u64]) -> Array1<f64> {
    let mut adv = Array1::zeros(rewards.len());
    for idx in indices_by_key(groups).values() {
        let r: Array1<f64> = idx.iter().map(|&i| rewards[i]).collect();
        let mean = r.mean().unwrap_or(0.0);
        let std = r.std(0.0);
        for (&i, &ri) in idx.iter().zip(r.iter()) {
            adv[i] = if std < EPS {
                0.0
            } else {
                (ri - mean) / (std + EPS)
            };
        }
    }
    adv
}

/// REINFORCE++ advantages: each reward minus the mean of the whole batch, divided by the
/// batch's standard deviation (plus a small epsilon). A batch whose rewards are all equal gets
/// zeros.
pub fn batch_whitened(rewards: &Array1<f64>) -> Array1<f64> {
    let mean = rewards.mean().unwrap_or(0.0);
    let std = rewards.std(0.0);
    if std < EPS {
        return Array1::zeros(rewards.len());
    }
    rewards.mapv(|r| (r - mean) / (std + EPS))
}

/// Task advantage normalisation: within each task (env id), rescales the non-zero advantages
/// of the batch to zero mean and unit standard deviation, so tasks with easy or hard reward
/// scales contribute alike in multi-task training.
pub fn normalize_per_task(adv: &mut Array1<f64>, tasks: &[&str]) {
    for idx in indices_by_key(tasks).values() {
        let live: Vec<usize> = idx
            .iter()
            .copied()
            .filter(|&i| adv[i].abs() > EPS)
            .collect();
        if live.len() < 2 {
            continue;
        }
        let a: Array1<f64> = live.iter().map(|&i| adv[i]).collect();
        let mean = a.mean().unwrap_or(0.0);
        let std = a.std(0.0);
        if std < EPS {
            continue;
        }
        for &i in &live {
            adv[i] = (adv[i] - mean) / std;
        }
    }
}

/// Generalised advantage estimation over one trajectory's policy tokens.
///
/// `values` and `policy` are aligned with the trajectory's next-token positions (`values[j]`
/// is the critic's estimate at position `j`; `policy[j]` is 1 when token `j + 1` was generated
/// by the policy). The policy tokens, in order, are the steps; env tokens between them are not
/// steps. The only reward is `reward`, at the last policy token. With
/// `delta_k = r_k + gamma V_{k+1} - V_k` (and `V` after the last step 0), the advantage is
/// `A_k = delta_k + gamma lambda A_{k+1}` and the return `A_k + V_k`. Returns `(advantages,
/// returns)`, aligned like `values`, 0 at positions that are not policy tokens.
pub fn gae(
    values: &[f32],
    policy: &[f32],
    reward: f64,
    gamma: f64,
    lambda: f64,
) -> (Vec<f32>, Vec<f32>) {
    let n = values.len().min(policy.len());
    let steps: Vec<usize> = (0..n).filter(|&j| policy[j] > 0.0).collect();
    let mut advantages = vec![0f32; values.len()];
    let mut returns = vec![0f32; values.len()];
    let mut next_value = 0.0;
    let mut next_advantage = 0.0;
    for (k, &j) in steps.iter().enumerate().rev() {
        let r = if k + 1 == steps.len() { reward } else { 0.0 };
        let v = values[j] as f64;
        let delta = r + gamma * next_value - v;
        let a = delta + gamma * lambda * next_advantage;
        advantages[j] = a as f32;
        returns[j] = (a + v) as f32;
        next_value = v;
        next_advantage = a;
    }
    (advantages, returns)
}

/// Rescales the policy-token advantages of a batch (`policy` marks them, as in [`gae`]) to zero
/// mean and unit standard deviation, as PPO does; other positions stay 0.
pub fn whiten(advantages: &mut [Vec<f32>], policy: &[Vec<f32>]) {
    let live: Vec<f64> = advantages
        .iter()
        .zip(policy)
        .flat_map(|(a, m)| {
            a.iter()
                .zip(m)
                .filter(|(_, m)| **m > 0.0)
                .map(|(a, _)| *a as f64)
        })
        .collect();
    if live.len() < 2 {
        return;
    }
    let a = Array1::from(live);
    let mean = a.mean().unwrap_or(0.0);
    let std = a.std(0.0);
    for (row, mask) in advantages.iter_mut().zip(policy) {
        for (a, m) in row.iter_mut().zip(mask) {
            if *m > 0.0 {
                *a = ((*a as f64 - mean) / (std + EPS)) as f32;
            }
        }
    }
}

fn indices_by_key<K: std::hash::Hash + Eq + Copy>(keys: &[K]) -> HashMap<K, Vec<usize>> {
    let mut map: HashMap<K, Vec<usize>> = HashMap::new();
    for (i, &k) in keys.iter().enumerate() {
        map.entry(k).or_default().push(i);
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn group_advantages_are_centred_per_group() {
        let r = array![1.0, 0.0, 1.0, 0.0, 0.5, 0.5];
        let a = group_advantages(&r, &[1, 1, 2, 2, 3, 3]);
        assert!((a[0] - 1.0).abs() < 1e-4 && (a[1] + 1.0).abs() < 1e-4);
        assert!((a[2] - 1.0).abs() < 1e-4);
        assert_eq!(a[4], 0.0);
        assert_eq!(a[5], 0.0);
    }

    #[test]
    fn dr_grpo_centres_and_rloo_leaves_one_out() {
        let r = array![1.0, 0.0, 0.0, 0.0, 0.5, 0.5];
        let g = [1, 1, 1, 1, 2, 2];
        let dr = advantages(AdvantageEstimator::DrGrpo, &r, &g);
        assert!((dr[0] - 0.75).abs() < 1e-12 && (dr[1] + 0.25).abs() < 1e-12);
        let rloo = advantages(AdvantageEstimator::Rloo, &r, &g);
        // 1 - mean(0, 0, 0) = 1; 0 - mean(1, 0, 0) = -1/3.
        assert!((rloo[0] - 1.0).abs() < 1e-12 && (rloo[1] + 1.0 / 3.0).abs() < 1e-12);
        // RLOO is Dr. GRPO scaled by n / (n - 1).
        assert!((rloo[1] - dr[1] * 4.0 / 3.0).abs() < 1e-12);
        for a in [dr, rloo] {
            assert_eq!((a[4], a[5]), (0.0, 0.0), "equal rewards carry no signal");
        }
        let grpo = advantages(AdvantageEstimator::Grpo, &r, &g);
        assert_eq!(grpo, group_advantages(&r, &g));
    }

    #[test]
    fn reinforce_pp_whitens_over_the_whole_batch() {
        // Rewards 1, 0, 0, 0 | 0.5, 0.5 in two groups; the batch mean is 2 / 6 = 1/3.
        // Deviations 2/3, -1/3, -1/3, -1/3, 1/6, 1/6; their squares 4/9, 1/9 × 3, 1/36 × 2
        // sum to 7/9 + 1/18 = 15/18, so the (population) variance is 15/108 = 5/36 and
        // std = sqrt(5)/6 = 0.372678. Advantages: (2/3)/0.372678 = 1.788854,
        // (-1/3)/0.372678 = -0.894427, (1/6)/0.372678 = 0.447214.
        let r = array![1.0, 0.0, 0.0, 0.0, 0.5, 0.5];
        let g = [1, 1, 1, 1, 2, 2];
        let a = advantages(AdvantageEstimator::ReinforcePp, &r, &g);
        let want = [
            1.788854, -0.894427, -0.894427, -0.894427, 0.447214, 0.447214,
        ];
        for (got, want) in a.iter().zip(want) {
            assert!((got - want).abs() < 1e-5, "{a:?}");
        }
        // Unlike the group estimators, the equal-reward group 2 is not zeroed, and the groups
        // do not matter.
        assert_eq!(a, advantages(AdvantageEstimator::ReinforcePp, &r, &[0; 6]));
        assert_ne!(a, group_advantages(&r, &g));
        // A batch of equal rewards carries no signal.
        let flat = advantages(AdvantageEstimator::ReinforcePp, &array![0.3, 0.3], &[1, 2]);
        assert_eq!(flat, array![0.0, 0.0]);
        assert!(!AdvantageEstimator::ReinforcePp.needs_group());
        assert!(AdvantageEstimator::Rloo.needs_group());
    }

    #[test]
    fn gae_by_hand_skips_env_tokens() {
        // Positions: policy, policy, env, env, policy. Values 0.5, 0.25, (9, 9 ignored), 0.5.
        let values = [0.5, 0.25, 9.0, 9.0, 0.5];
        let policy = [1.0, 1.0, 0.0, 0.0, 1.0];
        let (a, r) = gae(&values, &policy, 1.0, 1.0, 0.5);
        // Last step: delta = 1 - 0.5 = 0.5, A = 0.5.
        // Middle: delta = 0 + 0.5 - 0.25 = 0.25, A = 0.25 + 0.5 * 0.5 = 0.5.
        // First: delta = 0 + 0.25 - 0.5 = -0.25, A = -0.25 + 0.5 * 0.5 = 0.
        assert_eq!(a, vec![0.0, 0.5, 0.0, 0.0, 0.5]);
        assert_eq!(r, vec![0.5, 0.75, 0.0, 0.0, 1.0]);
        // lambda = 1, gamma = 1: every advantage is the reward minus the step's own value.
        let (a, r) = gae(&values, &policy, 1.0, 1.0, 1.0);
        assert_eq!(a, vec![0.5, 0.75, 0.0, 0.0, 0.5]);
        assert_eq!(r, vec![1.0, 1.0, 0.0, 0.0, 1.0]);
        // gamma discounts per policy step.
        let (_, r) = gae(&[0.0; 3], &[1.0; 3], 1.0, 0.5, 1.0);
        assert_eq!(r, vec![0.25, 0.5, 1.0]);
        // No policy token: nothing to estimate.
        let (a, _) = gae(&[1.0, 2.0], &[0.0, 0.0], 1.0, 1.0, 1.0);
        assert_eq!(a, vec![0.0, 0.0]);
    }

    #[test]
    fn whitening_touches_only_policy_tokens() {
        let mut adv = vec![vec![1.0, 7.0, 3.0], vec![5.0]];
        let policy = vec![vec![1.0, 0.0, 1.0], vec![1.0]];
        whiten(&mut adv, &policy);
        assert_eq!(adv[0][1], 7.0);
        let live = [adv[0][0] as f64, adv[0][2] as f64, adv[1][0] as f64];
        let mean = live.iter().sum::<f64>() / 3.0;
        assert!(mean.abs() < 1e-6, "{live:?}");
        assert!(
            (live[0] + 1.2247).abs() < 1e-3 && live[1].abs() < 1e-6,
            "{live:?}"
        );
    }

    #[test]
    fn per_task_normalisation_gives_unit_scale() {
        let mut a = array![0.1, -0.1, 0.0, 3.0, -3.0, 1.0];
        normalize_per_task(&mut a, &["x", "x", "x", "y", "y", "y"]);
        assert_eq!(a[2], 0.0, "zero advantages stay zero");
        let x = [a[0], a[1]];
        assert!((x[0] - 1.0).abs() < 1e-6 && (x[1] + 1.0).abs() < 1e-6);
        let y = array![a[3], a[4], a[5]];
        assert!(y.mean().unwrap().abs() < 1e-9);
        assert!((y.std(0.0) - 1.0).abs() < 1e-9);
    }
}
