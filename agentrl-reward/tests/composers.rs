//! The gate, clip, scale/offset and running-normalisation composers.

use crate::common::{solved, trajectory, turn};
use agentrl_core::{Outcome, RewardBreakdown, RewardFn, Trajectory};
use agentrl_reward::{
    Clip, FormatReward, Gate, OutcomeReward, RunningNorm, ScaleOffset, ScoreReward, WeightedSum,
};

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

/// Solved, but one of two actions was invalid (format 0.25).
fn sloppy_success() -> Trajectory {
    trajectory(
        vec![turn(2, false), turn(2, true)],
        Some("2"),
        Outcome::Completed,
        true,
    )
}

#[tokio::test]
async fn gate_counts_the_outcome_only_with_a_clean_format() {
    let gate = Gate::new(FormatReward, OutcomeReward::default(), 1.0);
    assert_eq!(gate.name(), "gate");
    let open = gate.score(&solved()).await.unwrap();
    assert_eq!(open.total, 1.0);
    assert_eq!(open.parts["outcome"], 1.0);
    assert_eq!(open.parts["gate"], 1.0);
    assert!(!open.parts.contains_key("format"));

    let closed = gate.score(&sloppy_success()).await.unwrap();
    assert_eq!(closed.total, 0.0);
    // The gated reward is still reported, so every breakdown has the same keys.
    assert_eq!(closed.parts["outcome"], 1.0);
    assert_eq!(closed.parts["gate"], 0.0);

    let harsh = Gate {
        otherwise: -1.0,
        ..Gate::new(FormatReward, OutcomeReward::default(), 0.2)
    };
    assert_eq!(harsh.score(&sloppy_success()).await.unwrap().total, 1.0);
    let failed_format = trajectory(vec![turn(1, true)], None, Outcome::Truncated, false);
    assert_eq!(harsh.score(&failed_format).await.unwrap().total, -1.0);
}

#[tokio::test]
async fn gate_composes_with_its_condition_in_a_sum() {
    let sum = WeightedSum::new(vec![])
        .term(1.0, Gate::new(FormatReward, OutcomeReward::default(), 1.0))
        .term(0.1, FormatReward);
    let b = sum.score(&sloppy_success()).await.unwrap();
    assert!(close(b.total, 0.1 * 0.25));
    assert_eq!(b.parts.len(), 3);
}

#[tokio::test]
async fn clip_and_scale_offset_change_the_total_only() {
    let scaled = ScaleOffset::new(OutcomeReward::default(), 4.0, -1.0);
    assert_eq!(scaled.name(), "scale_offset");
    let b = scaled.score(&solved()).await.unwrap();
    assert_eq!(b.total, 3.0);
    assert_eq!(b.parts, RewardBreakdown::single("outcome", 1.0).parts);

    let clipped = Clip::new(
        ScaleOffset::new(OutcomeReward::default(), 4.0, -1.0),
        -0.5,
        2.0,
    );
    assert_eq!(clipped.name(), "clip");
    assert_eq!(clipped.score(&solved()).await.unwrap().total, 2.0);
    let failed = trajectory(vec![turn(1, false)], Some("3"), Outcome::Completed, false);
    let low = clipped.score(&failed).await.unwrap();
    assert_eq!(low.total, -0.5);
    assert_eq!(low.parts["outcome"], 0.0);
    let inside = Clip::new(OutcomeReward::default(), -1.0, 1.0);
    assert_eq!(inside.score(&solved()).await.unwrap().total, 1.0);
}

#[tokio::test]
async fn running_norm_normalises_over_everything_seen() {
    let norm = RunningNorm::new(ScoreReward::default(), 1e-8);
    assert_eq!(norm.name(), "running_norm");
    let scored = |s: f64| {
        let mut t = solved();
        t.score = Some(s);
        t
    };
    // The first value is its own mean.
    let first = norm.score(&scored(1.0)).await.unwrap();
    assert_eq!(first.total, 0.0);
    assert_eq!(first.parts["score"], 1.0);
    // After 1 and 3: mean 2, std 1.
    assert!(close(norm.score(&scored(3.0)).await.unwrap().total, 1.0));
    // After 1, 3, 2: mean 2, so 2 scores 0.
    assert!(close(norm.score(&scored(2.0)).await.unwrap().total, 0.0));
    let stats = norm.stats();
    assert_eq!(stats.count, 3);
    assert!(close(stats.mean, 2.0));
    assert!(close(stats.std(), (2.0f64 / 3.0).sqrt()));
    // Stateful: the same trajectory scores differently later.
    let again = norm.score(&scored(3.0)).await.unwrap().total;
    assert!(again > 0.0 && !close(again, 1.0));
}

#[tokio::test]
async fn running_norm_is_safe_under_concurrency() {
    let norm = std::sync::Arc::new(RunningNorm::new(OutcomeReward::default(), 1e-6));
    let mut tasks = Vec::new();
    for i in 0..32 {
        let norm = norm.clone();
        tasks.push(tokio::spawn(async move {
            let mut t = solved();
            t.success = i % 2 == 0;
            norm.score(&t).await.unwrap().total
        }));
    }
    for task in tasks {
        assert!(task.await.unwrap().is_finite());
    }
    let stats = norm.stats();
    assert_eq!(stats.count, 32);
    assert!(close(stats.mean, 0.5));
    assert!(close(stats.std(), 0.5));
}
