//! Token sampling: greedy, temperature, top-k, top-p and logprobs.

use agentrl_core::{SamplingParams, SeededRng};
use agentrl_policy::sample_token;

#[test]
fn greedy_picks_the_argmax_with_its_log_softmax() {
    let logits = [0.0f32, 2.0, 1.0];
    let (id, lp) = sample_token(&logits, &SamplingParams::greedy(1), &mut SeededRng::new(0));
    assert_eq!(id, 1);
    let z: f32 = logits.iter().map(|l| l.exp()).sum();
    assert!((lp - (2.0f32.exp() / z).ln()).abs() < 1e-5);
}

#[test]
fn temperature_sampling_follows_the_distribution() {
    let logits = [0.0f32, (3.0f32).ln()]; // p = 0.25, 0.75
    let params = SamplingParams::default();
    let mut rng = SeededRng::new(7);
    let ones = (0..4000)
        .filter(|_| sample_token(&logits, &params, &mut rng).0 == 1)
        .count();
    let share = ones as f64 / 4000.0;
    assert!((share - 0.75).abs() < 0.03, "{share}");
}

#[test]
fn top_k_and_top_p_never_pick_filtered_tokens() {
    let logits = [3.0f32, 2.9, -5.0, -6.0];
    let mut rng = SeededRng::new(1);
    let k = SamplingParams {
        top_k: 2,
        ..Default::default()
    };
    let p = SamplingParams {
        top_p: 0.9,
        ..Default::default()
    };
    for _ in 0..500 {
        assert!(sample_token(&logits, &k, &mut rng).0 < 2);
        assert!(sample_token(&logits, &p, &mut rng).0 < 2);
    }
}

#[test]
fn seeded_streams_repeat() {
    let logits: Vec<f32> = (0..50).map(|i| (i as f32 * 0.37).sin()).collect();
    let params = SamplingParams {
        temperature: 1.3,
        ..Default::default()
    };
    let run = |seed| {
        let mut rng = SeededRng::new(seed);
        (0..20)
            .map(|_| sample_token(&logits, &params, &mut rng).0)
            .collect::<Vec<_>>()
    };
    assert_eq!(run(3), run(3));
    assert_ne!(run(3), run(4));
}
