//! Every reward function and the weighted composer on hand-built trajectories.

use crate::common::{solved, trajectory, turn};
use agentrl_core::{Error, Outcome, RewardBreakdown, RewardFn, Trajectory};
use agentrl_reward::{
    FormatReward, IncompletePunishment, LengthPenalty, OutcomeReward, WeightedSum, apply,
};
use async_trait::async_trait;

async fn score(f: &dyn RewardFn, t: &Trajectory) -> RewardBreakdown {
    f.score(t).await.unwrap()
}

#[tokio::test]
async fn outcome_reward() {
    let f = OutcomeReward::default();
    assert_eq!(f.name(), "outcome");
    assert_eq!(
        score(&f, &solved()).await,
        RewardBreakdown::single("outcome", 1.0)
    );
    let failed = trajectory(vec![turn(3, false)], Some("3"), Outcome::Completed, false);
    assert_eq!(score(&f, &failed).await.total, 0.0);
    let custom = OutcomeReward {
        success: 2.0,
        failure: -1.0,
    };
    assert_eq!(score(&custom, &solved()).await.total, 2.0);
    assert_eq!(score(&custom, &failed).await.parts["outcome"], -1.0);
}

#[tokio::test]
async fn format_reward() {
    let f = FormatReward;
    assert_eq!(f.name(), "format");
    assert_eq!(
        score(&f, &solved()).await,
        RewardBreakdown::single("format", 1.0)
    );

    // One of four turns invalid: 0.5 * 3/4.
    let turns = vec![
        turn(1, false),
        turn(1, true),
        turn(1, false),
        turn(1, false),
    ];
    let t = trajectory(turns, Some("2"), Outcome::Completed, true);
    assert_eq!(score(&f, &t).await.total, 0.375);

    // All valid but no final answer (last assistant message is a tool call): 0.5.
    let t = trajectory(vec![turn(1, false)], None, Outcome::Truncated, false);
    assert_eq!(score(&f, &t).await.total, 0.5);

    // A blank answer does not count.
    let t = trajectory(vec![turn(1, false)], Some("  "), Outcome::Completed, false);
    assert_eq!(score(&f, &t).await.total, 0.5);

    // No turns at all.
    let t = trajectory(vec![], Some("2"), Outcome::Completed, true);
    assert_eq!(score(&f, &t).await.total, 0.0);
}

#[tokio::test]
async fn incomplete_punishment() {
    let f = IncompletePunishment::default();
    assert_eq!(f.name(), "incomplete_punishment");
    assert_eq!(score(&f, &solved()).await.total, 0.0);
    for outcome in [
        Outcome::Truncated,
        Outcome::InvalidAction,
        Outcome::EnvError,
        Outcome::Cancelled,
    ] {
        let t = trajectory(vec![turn(1, false)], None, outcome, false);
        assert_eq!(
            score(&f, &t).await,
            RewardBreakdown::single("incomplete_punishment", -0.2)
        );
    }
}

#[tokio::test]
async fn length_penalty() {
    let f = LengthPenalty {
        max_generated_tokens: 12,
        per_token: 0.5,
    };
    assert_eq!(f.name(), "length_penalty");
    // solved() generates 15 tokens: 3 over budget.
    assert_eq!(
        score(&f, &solved()).await,
        RewardBreakdown::single("length_penalty", -1.5)
    );
    let short = trajectory(vec![turn(12, false)], Some("2"), Outcome::Completed, true);
    let within = score(&f, &short).await.total;
    assert_eq!(within, 0.0);
    assert!(within.is_sign_positive());
}

#[tokio::test]
async fn weighted_sum() {
    let f = WeightedSum::new(vec![])
        .term(1.0, OutcomeReward::default())
        .term(0.1, FormatReward)
        .term(1.0, IncompletePunishment::default());
    assert_eq!(f.name(), "weighted_sum");
    let b = score(&f, &solved()).await;
    assert!((b.total - 1.1).abs() < 1e-12);
    assert_eq!(b.parts.len(), 3);
    assert_eq!(b.parts["outcome"], 1.0);
    assert_eq!(b.parts["format"], 1.0);
    assert_eq!(b.parts["incomplete_punishment"], 0.0);

    let truncated = trajectory(
        vec![turn(1, false), turn(1, true)],
        None,
        Outcome::Truncated,
        false,
    );
    let b = score(&f, &truncated).await;
    assert!((b.total - (0.1 * 0.25 - 0.2)).abs() < 1e-12);
    assert_eq!(b.parts["format"], 0.25);
}

#[tokio::test]
async fn weighted_sum_rejects_colliding_parts() {
    let f = WeightedSum::new(vec![])
        .term(1.0, OutcomeReward::default())
        .term(0.5, OutcomeReward::default());
    match f.score(&solved()).await {
        Err(Error::Reward { name, message }) => {
            assert_eq!(name, "weighted_sum");
            assert!(message.contains("outcome"), "{message}");
        }
        other => panic!("expected a reward error, got {other:?}"),
    }
}

/// A reward that always fails or returns NaN.
struct Broken {
    nan: bool,
}

#[async_trait]
impl RewardFn for Broken {
    fn name(&self) -> &str {
        "broken"
    }
    async fn score(&self, _t: &Trajectory) -> agentrl_core::Result<RewardBreakdown> {
        if self.nan {
            Ok(RewardBreakdown::single("broken", f64::NAN))
        } else {
            Err(Error::Reward {
                name: "broken".into(),
                message: "judge unavailable".into(),
            })
        }
    }
}

#[tokio::test]
async fn weighted_sum_propagates_term_errors() {
    let f = WeightedSum::new(vec![]).term(1.0, Broken { nan: false });
    let err = f.score(&solved()).await.unwrap_err().to_string();
    assert!(err.contains("judge unavailable"), "{err}");
}

#[tokio::test]
async fn apply_sets_reward_and_parts() {
    let f = WeightedSum::new(vec![])
        .term(1.0, OutcomeReward::default())
        .term(0.5, FormatReward);
    let mut t = solved();
    apply(&f, &mut t).await.unwrap();
    assert_eq!(t.reward, 1.5);
    assert_eq!(t.reward_parts.len(), 2);
    assert_eq!(t.reward_parts["format"], 1.0);
}

#[tokio::test]
async fn apply_rejects_non_finite_and_failing_rewards() {
    let mut t = solved();
    let err = apply(&Broken { nan: true }, &mut t).await.unwrap_err();
    assert!(err.to_string().contains("not a finite number"), "{err}");
    assert!(apply(&Broken { nan: false }, &mut t).await.is_err());
    assert_eq!(t.reward, 0.0);
    assert!(t.reward_parts.is_empty());
}
