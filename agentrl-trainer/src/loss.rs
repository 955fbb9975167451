//! The policy-gradient loss family as small functions on tensors: the clipped surrogate
//! (asymmetric "clip-higher" range and dual clip), the per-token KL estimators, and the
//! reduction of per-token losses to one scalar under global (whole-batch) normalisers.
//!
//! [`crate::learner::Learner::policy_step`] composes them; the options come from `[rl]`
//! ([`crate::config::RlConfig`]) through [`crate::learner::GrpoParams`].

use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor};

/// How per-token losses are reduced to the scalar that is backpropagated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LossAgg {
    /// The sum over every trained token of the batch divided by their count: each token
    /// weighs the same, so long sequences weigh more.
    #[default]
    TokenMean,
    /// Each sequence's mean over its trained tokens, then the mean over sequences: each
    /// sequence weighs the same.
    SeqMeanTokenMean,
    /// Dr. GRPO: each sequence's sum over its trained tokens divided by a constant
    /// (`rl.loss_agg_norm`), then the mean over sequences: no length normalisation bias.
    SeqMeanTokenSumNorm,
}

/// An estimator of the per-token KL(policy ‖ reference), written with
/// `d = ref_logp - logp`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KlEstimator {
    /// `k1 = -d = logp - ref_logp` (unbiased, high variance, can be negative).
    K1,
    /// `k2 = d² / 2` (low variance, biased).
    K2,
    /// `k3 = exp(d) - d - 1` (unbiased, never negative).
    #[default]
    K3,
}

/// Where the KL to the frozen reference enters the objective.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KlMode {
    /// Added to the loss, weighted by `rl.kl_coef` and aggregated like the policy loss.
    #[default]
    Loss,
    /// Subtracted from each trajectory's reward (`kl_coef` × its summed per-token KL) before
    /// advantages are computed; see [`crate::learner::Learner::kl_penalties`].
    Reward,
}

/// Default of `rl.loss_agg_norm`: the divisor of each sequence's token sum under
/// `loss_agg = "seq-mean-token-sum-norm"`.
pub const DEFAULT_LOSS_AGG_NORM: f64 = 1024.0;

/// The whole batch's normalisers of [`aggregate`], so that micro-batches whose losses are
/// backpropagated separately add up to the loss of the whole batch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Normalisers {
    /// Trained tokens in the whole batch (at least 1).
    pub tokens: f64,
    /// Sequences of the whole batch with at least one trained token (at least 1).
    pub sequences: f64,
    /// The constant that divides each sequence's token sum under
    /// [`LossAgg::SeqMeanTokenSumNorm`].
    pub norm: f64,
}

/// Per-token clipped surrogate loss `max(-r·A, -clip(r, 1 - low, 1 + high)·A)`, bounded by
/// `c·|A|` where `A < 0` when `dual_clip = Some(c)`.
pub fn clipped_surrogate(
    ratio: &Tensor,
    adv: &Tensor,
    clip_low: f64,
    clip_high: f64,
    dual_clip: Option<f64>,
) -> Tensor {
    let surr1 = ratio * adv;
    let surr2 = ratio.clamp(1.0 - clip_low, 1.0 + clip_high) * adv;
    let pg = -surr1.minimum(&surr2);
    match dual_clip {
        None => pg,
        Some(c) => {
            let bounded = pg.minimum(&(adv * -c));
            pg.where_self(&adv.ge(0.0), &bounded)
        }
    }
}

/// 1 where the ratio lies outside `[1 - clip_low, 1 + clip_high]`, else 0 (float).
pub fn clipped_tokens(ratio: &Tensor, clip_low: f64, clip_high: f64) -> Tensor {
    ratio
        .lt(1.0 - clip_low)
        .logical_or(&ratio.gt(1.0 + clip_high))
        .to_kind(Kind::Float)
}

/// Per-token KL estimate of `estimator` from the policy's and the reference's logprobs.
pub fn kl_per_token(logp: &Tensor, ref_logp: &Tensor, estimator: KlEstimator) -> Tensor {
    let d = ref_logp - logp;
    match estimator {
        KlEstimator::K1 => -d,
        KlEstimator::K2 => d.square() * 0.5,
        KlEstimator::K3 => d.exp() - &d - 1.0,
    }
}

/// Scalar of a per-token tensor `[B, T]` over `mask`ed tokens under `agg`, with the whole
/// batch's normalisers (a micro-batch's share of the batch's value).
pub fn aggregate(per_token: &Tensor, mask: &Tensor, agg: LossAgg, norms: &Normalisers) -> Tensor {
    let masked = per_token * mask;
    match agg {
        LossAgg::TokenMean => masked.sum(Kind::Float) / norms.tokens,
        LossAgg::SeqMeanTokenMean => {
            let lengths = mask.sum_dim_intlist(1, false, Kind::Float).clamp_min(1.0);
            let per_seq = masked.sum_dim_intlist(1, false, Kind::Float) / lengths;
            per_seq.sum(Kind::Float) / norms.sequences
        }
        LossAgg::SeqMeanTokenSumNorm => masked.sum(Kind::Float) / (norms.norm * norms.sequences),
    }
}

/// Rows of a mask `[B, T]` with at least one trained token.
pub fn trained_sequences(mask: &Tensor) -> usize {
    let rows = mask.sum_dim_intlist(1, false, Kind::Float).gt(0.0);
    rows.sum(Kind::Int64).int64_value(&[]).max(0) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(rows: &[&[f32]]) -> Tensor {
        let w = rows[0].len() as i64;
        let flat: Vec<f32> = rows.iter().flat_map(|r| r.iter().copied()).collect();
        Tensor::from_slice(&flat).view([rows.len() as i64, w])
    }

    fn values(x: &Tensor) -> Vec<f64> {
        let n = x.numel() as i64;
        let x = x.to_kind(Kind::Double).view([-1]);
        (0..n).map(|i| x.double_value(&[i])).collect()
    }

    fn close(got: &[f64], want: &[f64]) {
        assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-6, "{got:?} vs {want:?}");
        }
    }

    #[test]
    fn surrogate_clips_asymmetrically() {
        // Ratios 0.5, 0.9, 1.1, 1.5; low 0.2 → lower bound 0.8, high 0.3 → upper bound 1.3.
        let ratio = t(&[&[0.5, 0.9, 1.1, 1.5]]);
        // A = +1: loss = -min(r, clip(r)) = -min(0.5, 0.8), -0.9, -1.1, -min(1.5, 1.3).
        let pos = clipped_surrogate(&ratio, &t(&[&[1.0; 4]]), 0.2, 0.3, None);
        close(&values(&pos), &[-0.5, -0.9, -1.1, -1.3]);
        // A = -2: loss = max(2r, 2 clip(r)) = max(1, 1.6), 1.8, 2.2, max(3, 2.6).
        let neg = clipped_surrogate(&ratio, &t(&[&[-2.0; 4]]), 0.2, 0.3, None);
        close(&values(&neg), &[1.6, 1.8, 2.2, 3.0]);
        // Symmetric 0.2: the upper bound is 1.2, so 1.5 clips to 1.2 for A = +1.
        let sym = clipped_surrogate(&ratio, &t(&[&[1.0; 4]]), 0.2, 0.2, None);
        close(&values(&sym), &[-0.5, -0.9, -1.1, -1.2]);
        // Clipped either side: 0.5 < 0.8 and 1.5 > 1.3.
        close(
            &values(&clipped_tokens(&ratio, 0.2, 0.3)),
            &[1.0, 0.0, 0.0, 1.0],
        );
        // With low 0.6 (bound 0.4) only 1.5 is outside.
        close(
            &values(&clipped_tokens(&ratio, 0.6, 0.3)),
            &[0.0, 0.0, 0.0, 1.0],
        );
    }

    #[test]
    fn dual_clip_bounds_negative_advantages_only() {
        // Ratios 1.0, 4.0, 10.0 with clip 0.2 (bounds 0.8, 1.2) and c = 3.
        let ratio = t(&[&[1.0, 4.0, 10.0], &[1.0, 4.0, 10.0]]);
        // Row 0: A = -1. Plain: max(r, clip(r)) = 1, 4, 10; dual: min(., 3·1) = 1, 3, 3.
        // Row 1: A = +0.5. Plain: -min(0.5r, 0.5 clip(r)) = -0.5, -0.6, -0.6; dual leaves it.
        let adv = t(&[&[-1.0], &[0.5]]);
        let dual = clipped_surrogate(&ratio, &adv, 0.2, 0.2, Some(3.0));
        close(&values(&dual), &[1.0, 3.0, 3.0, -0.5, -0.6, -0.6]);
        let plain = clipped_surrogate(&ratio, &adv, 0.2, 0.2, None);
        close(&values(&plain), &[1.0, 4.0, 10.0, -0.5, -0.6, -0.6]);
    }

    #[test]
    fn kl_estimators_by_hand() {
        // logp = -1, ref = -1.5 → d = -0.5; logp = -2, ref = -1 → d = 1; equal → d = 0.
        let logp = t(&[&[-1.0, -2.0, -0.3]]);
        let ref_logp = t(&[&[-1.5, -1.0, -0.3]]);
        // k1 = -d: 0.5, -1, 0.
        let k1 = kl_per_token(&logp, &ref_logp, KlEstimator::K1);
        close(&values(&k1), &[0.5, -1.0, 0.0]);
        // k2 = d²/2: 0.125, 0.5, 0.
        let k2 = kl_per_token(&logp, &ref_logp, KlEstimator::K2);
        close(&values(&k2), &[0.125, 0.5, 0.0]);
        // k3 = e^d - d - 1: e^-0.5 + 0.5 - 1 = 0.10653066, e - 1 - 1 = 0.71828183, 0.
        let k3 = kl_per_token(&logp, &ref_logp, KlEstimator::K3);
        close(&values(&k3), &[0.106_530_66, 0.718_281_83, 0.0]);
    }

    #[test]
    fn aggregation_modes_by_hand() {
        // Row 0 trains 3 tokens (1, 2, 3); row 1 trains 1 token (10); row 2 trains none.
        let x = t(&[&[1.0, 2.0, 3.0, 99.0], &[99.0, 10.0, 99.0, 99.0], &[5.0; 4]]);
        let mask = t(&[&[1.0, 1.0, 1.0, 0.0], &[0.0, 1.0, 0.0, 0.0], &[0.0; 4]]);
        assert_eq!(trained_sequences(&mask), 2);
        let norms = Normalisers {
            tokens: 4.0,
            sequences: 2.0,
            norm: 8.0,
        };
        let agg = |a| aggregate(&x, &mask, a, &norms).double_value(&[]);
        // token-mean: (1 + 2 + 3 + 10) / 4 = 4.
        close(&[agg(LossAgg::TokenMean)], &[4.0]);
        // seq-mean-token-mean: (6/3 + 10/1) / 2 = 6.
        close(&[agg(LossAgg::SeqMeanTokenMean)], &[6.0]);
        // seq-mean-token-sum-norm: (6/8 + 10/8) / 2 = 1.
        close(&[agg(LossAgg::SeqMeanTokenSumNorm)], &[1.0]);
    }

    #[test]
    fn micro_batches_add_up_to_the_whole_batch() {
        // Same data as above split into two micro-batches of rows with global normalisers:
        // seq-mean-token-mean gives 2/2 = 1 for the first and 10/2 = 5 for the second.
        let norms = Normalisers {
            tokens: 4.0,
            sequences: 2.0,
            norm: 8.0,
        };
        let a = aggregate(
            &t(&[&[1.0, 2.0, 3.0]]),
            &t(&[&[1.0, 1.0, 1.0]]),
            LossAgg::SeqMeanTokenMean,
            &norms,
        );
        let b = aggregate(
            &t(&[&[99.0, 10.0, 99.0]]),
            &t(&[&[0.0, 1.0, 0.0]]),
            LossAgg::SeqMeanTokenMean,
            &norms,
        );
        close(&[a.double_value(&[]), b.double_value(&[])], &[1.0, 5.0]);
    }

    #[test]
    fn option_names_are_kebab_and_lower_case() {
        #[derive(Deserialize)]
        struct T {
            agg: LossAgg,
            kl: KlEstimator,
            mode: KlMode,
        }
        let v: T =
            toml::from_str("agg = \"seq-mean-token-sum-norm\"\nkl = \"k2\"\nmode = \"reward\"")
                .unwrap();
        assert_eq!(v.agg, LossAgg::SeqMeanTokenSumNorm);
        assert_eq!(v.kl, KlEstimator::K2);
        assert_eq!(v.mode, KlMode::Reward);
        let err = toml::from_str::<T>("agg = \"mean\"\nkl = \"k3\"\nmode = \"loss\"")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("token-mean") && err.contains("seq-mean-token-mean"),
            "{err}"
        );
    }
}
