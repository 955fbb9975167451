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

/// The ids top-k and top-p keep, found the plain way: sort the whole vocabulary (by logit,
/// ties by id), cut to `top_k`, then to the smallest prefix whose share reaches `top_p`.
fn nucleus_by_full_sort(logits: &[f32], top_k: usize, top_p: f32) -> Vec<usize> {
    let mut order: Vec<usize> = (0..logits.len()).collect();
    order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]).then(a.cmp(&b)));
    if top_k > 0 {
        order.truncate(top_k);
    }
    let max = logits[order[0]];
    let weights: Vec<f64> = order
        .iter()
        .map(|&i| f64::from(logits[i] - max).exp())
        .collect();
    let total: f64 = weights.iter().sum();
    let mut mass = 0.0;
    for (n, w) in weights.iter().enumerate() {
        mass += w / total;
        if mass >= f64::from(top_p) {
            order.truncate(n + 1);
            break;
        }
    }
    order
}

/// A vocabulary of `n` logits with a few likely ids and a long flat tail, deterministic.
fn vocabulary(n: usize, spread: f32) -> Vec<f32> {
    (0..n)
        .map(|i| spread * ((i as f32 * 12.9898).sin() * 43_758.547).fract())
        .collect()
}

#[test]
fn top_p_draws_from_the_nucleus_a_full_sort_finds() {
    // A peaked vocabulary (its nucleus is about 500 ids) and a flat one (about 3,500): both
    // more than the 64 first candidates the sampler selects, so every draw sorts the whole
    // vocabulary, which takes milliseconds in a debug build; 600 draws each.
    for (spread, top_p) in [(12.0f32, 0.9f32), (0.5, 0.8)] {
        let logits = vocabulary(5_000, spread);
        let nucleus = nucleus_by_full_sort(&logits, 0, top_p);
        let params = SamplingParams {
            top_p,
            ..Default::default()
        };
        let mut rng = SeededRng::new(11);
        let mut drawn = std::collections::BTreeSet::new();
        // The logits take few distinct values (the f32 `fract` of numbers up to 43,758 keeps
        // 8 to 15 bits), so ids tie at the cut; which of the tied ids are kept is the
        // sampler's choice.
        let cut = logits[nucleus[nucleus.len() - 1]];
        for _ in 0..600 {
            let (id, _) = sample_token(&logits, &params, &mut rng);
            assert!(
                logits[id as usize] >= cut,
                "{id} (logit {}) is outside the nucleus (cut at {cut})",
                logits[id as usize]
            );
            drawn.insert(id);
        }
        if nucleus.len() > 500 {
            assert!(
                drawn.len() > 300,
                "{} of {} ids drawn",
                drawn.len(),
                nucleus.len()
            );
        } else {
            // The most likely id of a peaked nucleus is drawn.
            assert!(drawn.contains(&(nucleus[0] as u32)));
        }
    }
}

#[test]
fn top_k_keeps_the_k_best_even_among_equal_logits() {
    let logits = vocabulary(2_000, 6.0);
    let best = nucleus_by_full_sort(&logits, 100, 1.0);
    let params = SamplingParams {
        top_k: 100,
        ..Default::default()
    };
    let mut rng = SeededRng::new(5);
    for _ in 0..2_000 {
        let (id, _) = sample_token(&logits, &params, &mut rng);
        assert!(best.contains(&(id as usize)), "{id}");
    }
    // Ten equal logits, top-k 3: three of the ids, each about a third of the time.
    let flat = [0.5f32; 10];
    let params = SamplingParams {
        top_k: 3,
        top_p: 0.99,
        ..Default::default()
    };
    let mut counts = [0usize; 10];
    for _ in 0..3_000 {
        counts[sample_token(&flat, &params, &mut rng).0 as usize] += 1;
    }
    let drawn: Vec<usize> = counts.iter().copied().filter(|&c| c > 0).collect();
    assert_eq!(drawn.len(), 3, "{counts:?}");
    assert!(drawn.iter().all(|&c| c > 850), "{counts:?}");
}
