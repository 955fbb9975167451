//! Sampling one token from a row of logits: temperature, top-k, top-p, greedy.

use agentrl_core::{SamplingParams, SeededRng, TokenId};

/// Picks the next id from `logits` and returns it with its log-probability.
///
/// The log-probability is taken under `softmax(logits / temperature)` before top-k/top-p
/// filtering (under `softmax(logits)` when greedy), which is the distribution the trainer
/// recomputes from the same logits and temperature.
pub fn sample_token(
    logits: &[f32],
    params: &SamplingParams,
    rng: &mut SeededRng,
) -> (TokenId, f32) {
    let greedy = params.temperature <= 0.0;
    let inv_t = if greedy {
        1.0
    } else {
        1.0 / params.temperature
    };
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum_exp: f32 = logits.iter().map(|&l| ((l - max) * inv_t).exp()).sum();
    let log_z = sum_exp.ln();
    let logprob = |id: usize| (logits[id] - max) * inv_t - log_z;
    if greedy {
        let best = argmax(logits);
        return (best as TokenId, logprob(best));
    }
    let filtered = params.top_k > 0 && params.top_k < logits.len() || params.top_p < 1.0;
    let choice = if filtered {
        sample_filtered(logits, max, inv_t, params, rng)
    } else {
        let mut target = rng.next_f64() as f32 * sum_exp;
        let mut pick = logits.len() - 1;
        for (i, &l) in logits.iter().enumerate() {
            target -= ((l - max) * inv_t).exp();
            if target <= 0.0 {
                pick = i;
                break;
            }
        }
        pick
    };
    (choice as TokenId, logprob(choice))
}

fn argmax(logits: &[f32]) -> usize {
    let mut best = 0;
    for (i, &l) in logits.iter().enumerate() {
        if l > logits[best] {
            best = i;
        }
    }
    best
}

fn sample_filtered(
    logits: &[f32],
    max: f32,
    inv_t: f32,
    params: &SamplingParams,
    rng: &mut SeededRng,
) -> usize {
    let mut order: Vec<usize> = (0..logits.len()).collect();
    order.sort_unstable_by(|&a, &b| logits[b].total_cmp(&logits[a]));
    if params.top_k > 0 {
        order.truncate(params.top_k);
    }
    let weights: Vec<f32> = order
        .iter()
        .map(|&i| ((logits[i] - max) * inv_t).exp())
        .collect();
    let total: f32 = weights.iter().sum();
    let mut keep = weights.len();
    if params.top_p < 1.0 {
        let mut mass = 0.0;
        for (n, w) in weights.iter().enumerate() {
            mass += w / total;
            if mass >= params.top_p {
                keep = n + 1;
                break;
            }
        }
    }
    let kept_total: f32 = weights[..keep].iter().sum();
    let mut target = rng.next_f64() as f32 * kept_total;
    for n in 0..keep {
        target -= weights[n];
        if target <= 0.0 {
            return order[n];
        }
    }
    order[keep - 1]
}
