//! Reward and advantage shaping the learner applies to fresh groups: DAPO's soft overlong
//! penalty, the overlong mask, and the test dynamic sampling drops groups by.

use agentrl_core::{Outcome, Trajectory};
use ndarray::Array1;

use crate::advantage::{AdvantageEstimator, advantages};

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
pub(super) fn apply_overlong_penalty(
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
/// `estimator` (for the group estimators: whether they are not all equal), its env errors
/// ([`Outcome::EnvError`], never trained on) left out.
pub(super) fn is_informative(estimator: AdvantageEstimator, group: &[Trajectory]) -> bool {
    let rewards: Array1<f64> = group
        .iter()
        .filter(|t| t.outcome != Outcome::EnvError)
        .map(|t| t.reward)
        .collect();
    let ids = vec![0u64; rewards.len()];
    advantages(estimator, &rewards, &ids)
        .iter()
        .any(|&a| a != 0.0)
}

/// `overlong = "mask"`: zeroes the advantage of every truncated trajectory of `batch`; returns
/// how many there are.
pub(super) fn mask_truncated(adv: &mut Array1<f64>, batch: &[Trajectory]) -> usize {
    let mut masked = 0;
    for (a, t) in adv.iter_mut().zip(batch) {
        if t.outcome == Outcome::Truncated {
            *a = 0.0;
            masked += 1;
        }
    }
    masked
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentrl_core::Split;

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
            // An env error's reward is no signal.
            let mut failed = same.clone();
            failed[1] = traj(0.0, Outcome::EnvError);
            assert!(!is_informative(estimator, &failed), "{estimator:?}");
        }
    }
}
