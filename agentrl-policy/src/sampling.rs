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
    BLOCK_SUMS.with_borrow_mut(|blocks| {
        let (max, sum_exp) = vocabulary_passes(logits, inv_t, blocks);
        pick(logits, max, inv_t, sum_exp, blocks, params, rng)
    })
}

/// The two passes over the vocabulary: the largest logit, then the sum of the weights, with
/// `blocks` receiving the sums of every [`DRAW_BLOCK`] ids. They run in AVX2 where the CPU has
/// it; the arithmetic is the same lane for lane, so every CPU gets the same bits.
fn vocabulary_passes(logits: &[f32], inv_t: f32, blocks: &mut Vec<f32>) -> (f32, f32) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, checked just above.
        return unsafe { vocabulary_passes_avx2(logits, inv_t, blocks) };
    }
    vocabulary_passes_portable(logits, inv_t, blocks)
}

/// [`vocabulary_passes`] in the instructions the build targets (SSE2 on x86-64).
#[inline(always)]
fn vocabulary_passes_portable(logits: &[f32], inv_t: f32, blocks: &mut Vec<f32>) -> (f32, f32) {
    let max = max_logit(logits);
    (max, block_sums(logits, max, inv_t, blocks))
}

/// [`vocabulary_passes`] compiled for AVX2: the eight lanes of each pass fill one register.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn vocabulary_passes_avx2(logits: &[f32], inv_t: f32, blocks: &mut Vec<f32>) -> (f32, f32) {
    vocabulary_passes_portable(logits, inv_t, blocks)
}

/// [`sample_token`] once the largest logit, the sum of the weights and the sums of each
/// [`DRAW_BLOCK`] ids are known.
fn pick(
    logits: &[f32],
    max: f32,
    inv_t: f32,
    sum_exp: f32,
    blocks: &[f32],
    params: &SamplingParams,
    rng: &mut SeededRng,
) -> (TokenId, f32) {
    let greedy = params.temperature <= 0.0;
    let log_z = sum_exp.ln();
    let logprob = |id: usize| (logits[id] - max) * inv_t - log_z;
    if greedy {
        let best = argmax(logits);
        return (best as TokenId, logprob(best));
    }
    let filtered = params.top_k > 0 && params.top_k < logits.len() || params.top_p < 1.0;
    let choice = if filtered {
        sample_filtered(logits, max, inv_t, sum_exp, params, rng)
    } else {
        draw(logits, max, inv_t, blocks, rng.next_f64() as f32 * sum_exp)
    };
    (choice as TokenId, logprob(choice))
}

/// Lanes of the passes over the vocabulary: independent accumulators the compiler keeps in
/// vector registers (one running sum would have to add in order, one element at a time).
const LANES: usize = 8;

/// Ids per block whose weights [`block_sums`] adds up, so that [`draw`] walks blocks, not ids.
const DRAW_BLOCK: usize = 64;

thread_local! {
    /// The per-block sums of the token being sampled on this thread (kept between calls, so
    /// sampling allocates nothing).
    static BLOCK_SUMS: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The largest logit (NaNs are passed over, as `f32::max` does).
#[inline(always)]
fn max_logit(logits: &[f32]) -> f32 {
    let mut lanes = [f32::NEG_INFINITY; LANES];
    let chunks = logits.chunks_exact(LANES);
    let tail = chunks.remainder();
    for chunk in chunks {
        for (m, &l) in lanes.iter_mut().zip(chunk) {
            *m = if l > *m { l } else { *m };
        }
    }
    tail.iter()
        .chain(&lanes)
        .copied()
        .fold(f32::NEG_INFINITY, f32::max)
}

/// The sum of the weights `exp((l - max) * inv_t)` of `logits` (each at most 1); `blocks`
/// receives the sum of every [`DRAW_BLOCK`] ids, in order.
#[inline(always)]
fn block_sums(logits: &[f32], max: f32, inv_t: f32, blocks: &mut Vec<f32>) -> f32 {
    // A loop of its own, not `extend` with a closure: the closure would be compiled apart from
    // the caller and miss its instruction set.
    blocks.clear();
    blocks.resize(logits.len().div_ceil(DRAW_BLOCK), 0.0);
    for (sum, block) in blocks.iter_mut().zip(logits.chunks(DRAW_BLOCK)) {
        *sum = exp_sum(block, max, inv_t);
    }
    blocks.iter().sum()
}

/// The sum of the weights `exp((l - max) * inv_t)` of `logits`.
#[inline(always)]
fn exp_sum(logits: &[f32], max: f32, inv_t: f32) -> f32 {
    let mut lanes = [0.0f32; LANES];
    let chunks = logits.chunks_exact(LANES);
    let tail = chunks.remainder();
    for chunk in chunks {
        for (sum, &l) in lanes.iter_mut().zip(chunk) {
            *sum += exp_nonpositive((l - max) * inv_t);
        }
    }
    let tail: f32 = tail
        .iter()
        .map(|&l| exp_nonpositive((l - max) * inv_t))
        .sum();
    lanes.iter().sum::<f32>() + tail
}

/// The id where a walk over the weights in id order has used up `target` of their sum:
/// whole blocks are passed by their sums (`blocks`, from [`block_sums`]), and only the block
/// that holds the target is walked id by id.
fn draw(logits: &[f32], max: f32, inv_t: f32, blocks: &[f32], mut target: f32) -> usize {
    for (b, &mass) in blocks.iter().enumerate() {
        if target <= mass {
            let start = b * DRAW_BLOCK;
            let block = &logits[start..(start + DRAW_BLOCK).min(logits.len())];
            for (i, &l) in block.iter().enumerate() {
                target -= exp_nonpositive((l - max) * inv_t);
                if target <= 0.0 {
                    return start + i;
                }
            }
            // The block's sum and its walk round apart: its last id.
            return start + block.len() - 1;
        }
        target -= mass;
    }
    logits.len() - 1
}

/// The entropy `-Σ e^l · l` of a row of log-probabilities (each at most 0; a rounding above 0
/// counts as 0), in one pass of eight-lane sums, in AVX2 where the CPU has it.
pub fn entropy_of_logprobs(logp: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, checked just above.
        return unsafe { entropy_avx2(logp) };
    }
    entropy_portable(logp)
}

/// [`entropy_of_logprobs`] compiled for AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn entropy_avx2(logp: &[f32]) -> f32 {
    entropy_portable(logp)
}

/// [`entropy_of_logprobs`] in the instructions the build targets.
#[inline(always)]
fn entropy_portable(logp: &[f32]) -> f32 {
    let mut lanes = [0.0f32; LANES];
    let chunks = logp.chunks_exact(LANES);
    let tail: f32 = chunks
        .remainder()
        .iter()
        .map(|&l| exp_nonpositive(l) * l)
        .sum();
    for chunk in chunks {
        for (sum, &l) in lanes.iter_mut().zip(chunk) {
            *sum += exp_nonpositive(l) * l;
        }
    }
    -(lanes.iter().sum::<f32>() + tail)
}

/// `e^x` for `x <= 0` (larger `x` is taken as 0, below -87 as -87, about the smallest normal
/// f32), within about 2e-7 of the exact value relative to it, in plain arithmetic the compiler
/// vectorises (the standard library's `exp` is one call per element). `e^x = 2^n e^r` with `n`
/// the nearest integer to `x / ln 2` and `|r| <= ln 2 / 2`, where the Taylor series to degree 7
/// is off by less than `r^8 / 8! < 6e-9`.
#[inline(always)]
pub(crate) fn exp_nonpositive(x: f32) -> f32 {
    // Adding and removing 1.5 * 2^23 rounds to the nearest integer (|x / ln 2| < 2^22).
    const ROUND: f32 = 12_582_912.0;
    // ln 2 in two parts: `n * LN2_HIGH` is exact for the `n` that occur.
    const LN2_HIGH: f32 = 0.693_359_4;
    const LN2_LOW: f32 = -2.121_944_4e-4;
    let x = x.clamp(-87.0, 0.0);
    let rounded = x * std::f32::consts::LOG2_E + ROUND;
    let n = rounded - ROUND;
    let r = x - n * LN2_HIGH - n * LN2_LOW;
    let mut p = 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    // 2^n from its exponent bits; n is in -126..=0. `rounded` is 1.5 * 2^23 + n, where one
    // unit is one step of the mantissa, so n is the difference of the bit patterns (`n as i32`
    // would be a saturating conversion, one element at a time).
    let n_bits = rounded.to_bits().wrapping_sub(ROUND.to_bits()) as i32;
    let two_to_n = f32::from_bits(((n_bits + 127) as u32) << 23);
    p * two_to_n
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
/// mass are the rest sorted too. The top-k are selected from [`candidates`], not from every
/// id.
fn sample_filtered(
    logits: &[f32],
    max: f32,
    inv_t: f32,
    sum_exp: f32,
    params: &SamplingParams,
    rng: &mut SeededRng,
) -> usize {
    let weight = |id: u32| exp_nonpositive((logits[id as usize] - max) * inv_t);
    let rank = |a: &u32, b: &u32| logits[*b as usize].total_cmp(&logits[*a as usize]);
    let vocab = logits.len();
    let limit = if params.top_k > 0 {
        params.top_k.min(vocab)
    } else {
        vocab
    };
    let mut take = if params.top_p < 1.0 {
        FIRST_CANDIDATES.min(limit)
    } else {
        limit
    };
    // With top-k, `ids` become the top-k ids (chosen among fewer candidates than the whole
    // vocabulary); without, every id.
    let mut ids = if limit < vocab {
        candidates(logits, max, limit)
    } else {
        (0..vocab as u32).collect()
    };
    // The top-k mass is the denominator of top-p's shares; without top-k it is the whole
    // vocabulary's, `sum_exp`.
    let total: f32 = if limit < vocab {
        ids.select_nth_unstable_by(limit - 1, rank);
        ids.truncate(limit);
        ids.iter().map(|&id| weight(id)).sum::<f32>()
    } else {
        sum_exp
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

/// How far below the largest logit [`candidates`] looks, nearest first.
const CANDIDATE_GAPS: [f32; 8] = [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];

/// Ids that hold the `want` largest logits: those within the nearest of [`CANDIDATE_GAPS`]
/// below `max` that holds at least `want` ids (counted for every gap in one pass, in vector
/// registers), or every id when none does. NaN logits are never within a gap.
fn candidates(logits: &[f32], max: f32, want: usize) -> Vec<u32> {
    let thresholds = CANDIDATE_GAPS.map(|gap| max - gap);
    let mut counts = [0u32; CANDIDATE_GAPS.len()];
    for &l in logits {
        for (count, &threshold) in counts.iter_mut().zip(&thresholds) {
            *count += u32::from(l >= threshold);
        }
    }
    match counts.iter().position(|&c| c as usize >= want) {
        Some(g) => (0..logits.len() as u32)
            .filter(|&id| logits[id as usize] >= thresholds[g])
            .collect(),
        None => (0..logits.len() as u32).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_nonpositive_is_within_f32_rounding_of_exp() {
        let mut worst = 0.0f64;
        for i in 0..=870_000 {
            let x = -(i as f32) * 1e-4;
            let exact = f64::from(x).exp();
            let got = f64::from(exp_nonpositive(x));
            worst = worst.max((got - exact).abs() / exact);
        }
        assert!(worst < 3e-7, "relative error {worst}");
        assert_eq!(exp_nonpositive(0.0), 1.0);
        // Below -87 the value stays at e^-87; above 0 at 1.
        assert_eq!(exp_nonpositive(-1000.0), exp_nonpositive(-87.0));
        assert_eq!(exp_nonpositive(3.0), 1.0);
    }

    #[test]
    fn max_and_sum_agree_with_the_plain_loops_on_any_length() {
        for len in [1usize, 7, 8, 9, 63, 64, 65, 1000] {
            let logits: Vec<f32> = (0..len)
                .map(|i| ((i * 37 % 101) as f32) * 0.13 - 5.0)
                .collect();
            let max = max_logit(&logits);
            assert_eq!(
                max,
                logits.iter().copied().fold(f32::NEG_INFINITY, f32::max)
            );
            let plain: f64 = logits
                .iter()
                .map(|&l| f64::from((l - max) * 0.7).exp())
                .sum();
            let sum = f64::from(exp_sum(&logits, max, 0.7));
            assert!(
                (sum - plain).abs() / plain < 1e-6,
                "{len}: {sum} vs {plain}"
            );
        }
    }

    #[test]
    fn every_instruction_set_gives_the_same_bits() {
        for len in [1usize, 9, 64, 100, 49_152] {
            let logits: Vec<f32> = (0..len)
                .map(|i| ((i * 7919 % 1009) as f32) * 0.021 - 12.0)
                .collect();
            for inv_t in [1.0, 1.0 / 0.7] {
                let (mut portable, mut dispatched) = (Vec::new(), Vec::new());
                let a = vocabulary_passes_portable(&logits, inv_t, &mut portable);
                let b = vocabulary_passes(&logits, inv_t, &mut dispatched);
                assert_eq!(
                    (a.0.to_bits(), a.1.to_bits()),
                    (b.0.to_bits(), b.1.to_bits())
                );
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&portable), bits(&dispatched), "{len} ids");
            }
        }
    }

    #[test]
    fn entropy_of_logprobs_agrees_with_the_plain_sum() {
        for len in [1usize, 7, 64, 49_152] {
            let logits: Vec<f64> = (0..len).map(|i| ((i * 37 % 101) as f64) * 0.09).collect();
            let lse = logits.iter().map(|l| l.exp()).sum::<f64>().ln();
            let logp: Vec<f64> = logits.iter().map(|l| l - lse).collect();
            let plain: f64 = -logp.iter().map(|l| l.exp() * l).sum::<f64>();
            let single: Vec<f32> = logp.iter().map(|&l| l as f32).collect();
            let got = f64::from(entropy_of_logprobs(&single));
            assert!(
                (got - plain).abs() <= 1e-5 * plain.max(1.0),
                "{len}: {got} vs {plain}"
            );
        }
        // A certain outcome has no entropy (to within e^-87, where the exponential stops).
        assert!(entropy_of_logprobs(&[0.0, -1000.0]).abs() < 1e-30);
    }

    #[test]
    fn draw_picks_the_id_whose_cumulative_weight_covers_the_target() {
        let logits: Vec<f32> = (0..1_000)
            .map(|i| ((i * 7919 % 997) as f32) * 0.01)
            .collect();
        let max = max_logit(&logits);
        let weights: Vec<f64> = logits
            .iter()
            .map(|&l| f64::from(exp_nonpositive(l - max)))
            .collect();
        let total: f64 = weights.iter().sum();
        let mut blocks = Vec::new();
        let sum = block_sums(&logits, max, 1.0, &mut blocks);
        assert_eq!(blocks.len(), 1_000usize.div_ceil(DRAW_BLOCK));
        assert!((f64::from(sum) - total).abs() / total < 1e-6);
        for k in 0..500 {
            let target = total * (f64::from(k) + 0.5) / 500.0;
            let id = draw(&logits, max, 1.0, &blocks, target as f32);
            let before: f64 = weights[..id].iter().sum();
            let through = before + weights[id];
            let slack = total * 1e-5;
            assert!(
                before - slack <= target && target <= through + slack,
                "target {target}: id {id} covers {before}..{through}"
            );
        }
        // A target past the total (rounding) gives the last id.
        assert_eq!(draw(&logits, max, 1.0, &blocks, total as f32 * 2.0), 999);
    }
}
