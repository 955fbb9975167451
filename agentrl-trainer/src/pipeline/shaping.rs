//! Reward and advantage shaping the learner applies to fresh groups: DAPO's soft overlong
//! penalty, the overlong mask, and the test dynamic sampling drops groups by.

use agentrl_core::{Outcome, Trajectory};
use ndarray::Array1;

use crate::advantage::{AdvantageEstimator, advantages};
use crate::cross_policy::staleness_bounded;

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

/// What [`mask_stale_turns`] did to a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct StaleTurns {
    /// Turns it marked [`Turn::stale`](agentrl_core::Turn::stale).
    pub(super) masked: usize,
    /// Whether any turn with generated tokens is left to train on.
    pub(super) trainable_left: bool,
}

/// Marks [`Turn::stale`](agentrl_core::Turn::stale) each turn of `group` made by weights
/// more than `max_staleness` versions older than `version` (the version the step trains),
/// except the turns the bound does not apply to ([`staleness_bounded`]). The turn-level bound
/// keeps long episodes, whose first turns may lag while their last ones are fresh, in the
/// batch instead of dropping whole groups of them.
pub(super) fn mask_stale_turns(
    group: &mut [Trajectory],
    version: u64,
    max_staleness: u64,
    exempt: &[String],
) -> StaleTurns {
    let mut masked = 0;
    let mut trainable_left = false;
    for turn in group.iter_mut().flat_map(|t| &mut t.turns) {
        if staleness_bounded(turn, exempt)
            && !turn.stale
            && version.saturating_sub(turn.policy_version) > max_staleness
        {
            turn.stale = true;
            masked += 1;
        }
        trainable_left |= !turn.stale && !turn.generated_ids.is_empty();
    }
    StaleTurns {
        masked,
        trainable_left,
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
                stale: false,
                invalid_action: None,
            }])
            .with_reward(1.0);
        assert_eq!(t.num_tokens(), 90);
        apply_overlong_penalty(std::slice::from_mut(&mut t), 100, 20, 1.0);
        assert_eq!(t.reward, 0.5);
        assert_eq!(t.reward_parts[OVERLONG_PENALTY_PART], -0.5);
    }

    /// A turn of `generated` ids made by `version` of the policy named `name`.
    fn made_by(version: u64, name: Option<&str>, generated: usize) -> agentrl_core::Turn {
        agentrl_core::Turn {
            injected_ids: vec![1; 3],
            generated_ids: vec![2; generated],
            logprobs: vec![-0.5; generated],
            policy_version: version,
            policy_name: name.map(str::to_string),
            finish: agentrl_core::FinishReason::Stop,
            reward: 0.0,
            stale: false,
            invalid_action: None,
        }
    }

    #[test]
    fn turns_beyond_the_staleness_bound_leave_the_loss_and_their_episode_stays() {
        let exempt = vec!["snapshot".to_string()];
        let mut group = vec![
            Trajectory::new("toy", "long", Split::Train, 0).with_turns(vec![
                made_by(3, None, 4),
                made_by(4, Some("current"), 4),
                made_by(5, None, 4),
                made_by(6, None, 4),
            ]),
            Trajectory::new("toy", "long", Split::Train, 0)
                .with_turns(vec![made_by(0, Some("snapshot"), 4), made_by(5, None, 4)]),
        ];
        // Training version 6 with a bound of 1: versions 3 and 4 lag 3 and 2, too many; 5 and 6
        // are in; the snapshot's version 0 is exempt.
        let stale = mask_stale_turns(&mut group, 6, 1, &exempt);
        assert_eq!(
            stale,
            StaleTurns {
                masked: 2,
                trainable_left: true
            }
        );
        let marks: Vec<Vec<bool>> = group
            .iter()
            .map(|t| t.turns.iter().map(|turn| turn.stale).collect())
            .collect();
        assert_eq!(marks, [vec![true, true, false, false], vec![false, false]]);
        // Each turn is 3 injected then 4 generated ids; the stale ones' generated ids are 0.
        let mask = group[0].loss_mask();
        let trained: Vec<f32> = mask.chunks(7).map(|turn| turn[3..].iter().sum()).collect();
        assert_eq!(trained, [0.0, 0.0, 4.0, 4.0]);
        // Marking again counts nothing new.
        assert_eq!(mask_stale_turns(&mut group, 6, 1, &exempt).masked, 0);
        // Later, every bounded turn is stale, and only the exempt snapshot turn trains.
        let stale = mask_stale_turns(&mut group, 9, 1, &exempt);
        assert_eq!(
            stale,
            StaleTurns {
                masked: 3,
                trainable_left: true
            }
        );
        // Without the exemption nothing is left, and the learner drops the group.
        let stale = mask_stale_turns(&mut group, 9, 1, &[]);
        assert_eq!(
            stale,
            StaleTurns {
                masked: 1,
                trainable_left: false
            }
        );
        // A turn that generated nothing is never something to train.
        let mut empty = vec![
            Trajectory::new("toy", "t", Split::Train, 0).with_turns(vec![made_by(6, None, 0)]),
        ];
        assert!(!mask_stale_turns(&mut empty, 6, 1, &[]).trainable_left);
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
