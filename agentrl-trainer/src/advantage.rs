//! Advantage estimation: group baselines (GRPO and its relatives Dr. GRPO and RLOO) and
//! per-task normalisation (AgentRL).

use std::collections::HashMap;

use ndarray::Array1;
use serde::{Deserialize, Serialize};

const EPS: f64 = 1e-6;

/// How a rollout's advantage is computed from the rewards of its group (the rollouts of one
/// task).
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
}

/// Advantages of `rewards` under `estimator`, groups given by `groups` (one id per reward). A
/// group whose rewards are all equal gets zeros under every estimator.
pub fn advantages(
    estimator: AdvantageEstimator,
    rewards: &Array1<f64>,
    groups: &[u64],
) -> Array1<f64> {
    if estimator == AdvantageEstimator::Grpo {
        return group_advantages(rewards, groups);
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
