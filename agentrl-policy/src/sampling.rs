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

/// Ids among which the nucleus is sought first; when their mass falls short, all are sorted.
const FIRST_CANDIDATES: usize = 64;

/// Samples among the `top_k` most likely ids (all when 0), cut to the smallest prefix of them,
/// most likely first, whose probability reaches `top_p`. Among ids of equal logits at the cut,
/// which are kept is arbitrary but the same for the same logits.
///
/// The candidates come from partial selection, not a sort of the vocabulary: the best 64 ids
/// (or the top-k) are selected and sorted, and only when 64 ids hold less than `top_p` of the
/// mass are the rest sorted too.
fn sample_filtered(
    logits: &[f32],
    max: f32,
    inv_t: f32,
    params: &SamplingParams,
    rng: &mut SeededRng,
) -> usize {
    let weight = |id: u32| ((logits[id as usize] - max) * inv_t).exp();
    let rank = |a: &u32, b: &u32| logits[*b as usize].total_cmp(&logits[*a as usize]);
    let vocab = logits.len();
    let limit = if params.top_k > 0 {
        params.top_k.min(vocab)
    } else {
        vocab
    };
    let mut ids: Vec<u32> = (0..vocab as u32).collect();
    // The top-k mass is the denominator of top-p's shares; without top-k it is the whole
    // vocabulary's, the sum `sample_token` also takes. It is summed again here rather than
    // passed in: passing it made the unfiltered path ~15% slower in the `sampling` bench
    // (code generation), a cost every temperature-sampled token would pay.
    let total: f32 = if limit < vocab {
        ids.select_nth_unstable_by(limit - 1, rank);
        ids.truncate(limit);
        ids.iter().map(|&id| weight(id)).sum::<f32>()
    } else {
        logits
            .iter()
            .map(|&l| ((l - max) * inv_t).exp())
            .sum::<f32>()
    };
    let mut take = if params.top_p < 1.0 {
        FIRST_CANDIDATES.min(limit)
    } else {
        limit
    };
    loop {
        if take < ids.len() {
            ids.select_nth_unstable_by(take - 1, rank);
        }
        ids[..take].sort_unstable_by(rank);
        let ranked: Vec<f32> = ids[..take].iter().map(|&id| weight(id)).collect();
        let mut keep = None;
        if params.top_p < 1.0 {
            let mut mass = 0.0;
            for (n, w) in ranked.iter().enumerate() {
                mass += w / total;
                if mass >= params.top_p {
                    keep = Some(n + 1);
                    break;
                }
            }
        }
        // Every candidate is kept when the mass is not reached within the top-k set.
        let keep = match keep {
            Some(keep) => keep,
            None if take == limit => take,
            None => {
                take = limit;
                continue;
            }
        };
        let kept_total: f32 = ranked[..keep].iter().sum();
        let mut target = rng.next_f64() as f32 * kept_total;
        for (n, w) in ranked[..keep].iter().enumerate() {
            target -= w;
            if target <= 0.0 {
                return ids[n] as usize;
            }
        }
        return ids[keep - 1] as usize;
    }
}
