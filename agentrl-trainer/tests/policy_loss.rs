//! The policy-loss family at the learner: default options reproduce the plain token-mean PPO
//! surrogate with a k3 KL loss exactly; each option changes the loss as computed by hand;
//! micro-batches add up to the whole batch; the KL penalties of `kl_mode = "reward"`; and the
//! `[rl]` keys with their defaults and errors.

use agentrl_core::Trajectory;
use agentrl_policy::{GptConfig, PolicyModel};
use agentrl_trainer::config::RunConfig;
use agentrl_trainer::learner::{Advantages, GrpoParams, Learner, pack};
use agentrl_trainer::loss::{KlEstimator, KlMode, LossAgg};
use tch::{Device, Kind, Tensor, nn};

mod common;
use common::one_turn_trajectory as traj;

fn cfg() -> GptConfig {
    GptConfig {
        vocab_size: 20,
        d_model: 32,
        n_layers: 1,
        n_heads: 2,
        max_seq_len: 32,
        ffn_mult: 2,
        rope_theta: 10_000.0,
    }
}

/// Runs `f` alone among this file's tests that draw from libtorch's global generator: tests
/// run in parallel, and building a model (also [`Learner::clone_model`] and
/// [`Learner::freeze_reference`], which initialise before copying) draws from it.
fn with_rng<T>(f: impl FnOnce() -> T) -> T {
    static RNG_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = RNG_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    f()
}

/// A learner with seeded weights.
fn seeded_learner(seed: i64, lr: f64) -> Learner {
    with_rng(|| {
        tch::manual_seed(seed);
        Learner::new(cfg(), lr, Device::Cpu).unwrap()
    })
}

/// A copy of the learner's current model.
fn copy_model(learner: &Learner) -> (nn::VarStore, Box<dyn PolicyModel>) {
    with_rng(|| learner.clone_model().unwrap())
}

/// Freezes the learner's current weights as its reference.
fn freeze(learner: &mut Learner) {
    with_rng(|| learner.freeze_reference().unwrap())
}

/// Logprobs `model` gives the policy tokens of `t` (packed alone), at temperature 1.
fn logprobs_of(model: &dyn PolicyModel, t: &Trajectory) -> Vec<f32> {
    let packed = pack(&[t], Device::Cpu);
    let (lp, _) = tch::no_grad(|| model.token_logprobs(&packed.ids, 1.0));
    let lp: Vec<f32> = Vec::try_from(lp.view([-1]).to_kind(Kind::Float)).unwrap();
    let mask: Vec<f32> = Vec::try_from(packed.mask.view([-1])).unwrap();
    lp.iter()
        .zip(mask)
        .filter(|(_, m)| *m == 1.0)
        .map(|(l, _)| *l)
        .collect()
}

/// `t` with rollout logprobs `f(current logprob, token index)` under the learner's weights.
fn with_old(learner: &Learner, t: &Trajectory, f: impl Fn(f32, usize) -> f32) -> Trajectory {
    let (_vs, model) = copy_model(learner);
    let mut t = t.clone();
    t.turns[0].logprobs = logprobs_of(model.as_ref(), &t)
        .into_iter()
        .enumerate()
        .map(|(i, l)| f(l, i))
        .collect();
    t
}

/// Two trajectories: `a` with 3 policy tokens, `b` with 1.
fn pair() -> (Trajectory, Trajectory) {
    (
        traj(vec![1, 2], vec![3, 4, 5], vec![0.0; 3]),
        traj(vec![6, 7, 8], vec![9], vec![0.0; 1]),
    )
}

fn close(got: f64, want: f64, tol: f64) {
    assert!((got - want).abs() < tol, "got {got}, want {want}");
}

/// A small deterministic pseudo-random stream in [0, 1).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
    fn below(&mut self, n: u32) -> u32 {
        (self.next() * n as f64) as u32
    }
}

/// Six trajectories of random lengths and tokens, with rollout logprobs off the current
/// policy's by up to ±0.5 (so ratios land on both sides of the clip range), and random
/// advantages of both signs.
fn random_batch(learner: &Learner, rng: &mut Lcg) -> (Vec<Trajectory>, Vec<f64>) {
    let mut batch = Vec::new();
    let mut adv = Vec::new();
    for _ in 0..6 {
        let prompt: Vec<u32> = (0..1 + rng.below(4)).map(|_| rng.below(20)).collect();
        let generated: Vec<u32> = (0..1 + rng.below(6)).map(|_| rng.below(20)).collect();
        let n = generated.len();
        let t = traj(prompt, generated, vec![0.0; n]);
        let noise: Vec<f32> = (0..n).map(|_| (rng.next() - 0.5) as f32).collect();
        batch.push(with_old(learner, &t, |l, i| l + noise[i]));
        adv.push(rng.next() * 4.0 - 2.0);
    }
    (batch, adv)
}

/// Today's formula, written out: token-level clipped surrogate summed over policy tokens / the
/// batch's trained tokens, plus `kl_coef` × the token-mean k3 KL; backpropagated into `vs`.
/// Returns (loss, kl, clip fraction, entropy, grad norm).
fn old_formula(
    vs: &nn::VarStore,
    model: &dyn PolicyModel,
    reference: &dyn PolicyModel,
    batch: &[&Trajectory],
    adv: &[f64],
    clip_eps: f64,
    kl_coef: f64,
) -> (f64, f64, f64, f64, f64) {
    let packed = pack(batch, Device::Cpu);
    let denom = packed.tokens.max(1) as f64;
    let adv: Vec<f32> = adv.iter().map(|&a| a as f32).collect();
    let adv = Tensor::from_slice(&adv).view([-1, 1]);
    let (logp, entropy) = model.token_logprobs(&packed.ids, 1.0);
    let mask = &packed.mask;
    let ratio = (&logp - &packed.old_logprobs).exp();
    let surr1 = &ratio * &adv;
    let surr2 = ratio.clamp(1.0 - clip_eps, 1.0 + clip_eps) * &adv;
    let pg = -surr1.minimum(&surr2);
    let mut loss = (&pg * mask).sum(Kind::Float) / denom;
    let ref_logp = tch::no_grad(|| reference.token_logprobs(&packed.ids, 1.0).0);
    let d = &ref_logp - &logp;
    let k3 = d.exp() - &d - 1.0;
    let kl = (&k3 * mask).sum(Kind::Float) / denom;
    let kl_value = kl.double_value(&[]);
    loss = &loss + kl * kl_coef;
    loss.backward();
    let clip = tch::no_grad(|| {
        let c = (&ratio - 1.0).abs().gt(clip_eps).to_kind(Kind::Float);
        ((c * mask).sum(Kind::Float) / denom).double_value(&[])
    });
    let ent = tch::no_grad(|| ((entropy * mask).sum(Kind::Float) / denom).double_value(&[]));
    let norms: Vec<Tensor> = vs
        .trainable_variables()
        .iter()
        .map(|v| v.grad())
        .filter(|g| g.defined())
        .map(|g| g.norm().square())
        .collect();
    let grad_norm = Tensor::stack(&norms, 0)
        .sum(Kind::Float)
        .sqrt()
        .double_value(&[]);
    (loss.double_value(&[]), kl_value, clip, ent, grad_norm)
}

#[test]
fn default_options_give_the_old_loss() {
    let mut learner = seeded_learner(31, 1e-2);
    let (ref_vs, reference) = copy_model(&learner);
    let _keep = ref_vs;
    freeze(&mut learner);
    let mut rng = Lcg(7);
    // One step first, so the policy differs from the reference and the KL is not zero.
    let (warm, warm_adv) = random_batch(&learner, &mut rng);
    let warm: Vec<&Trajectory> = warm.iter().collect();
    learner.grpo_step(&warm, &warm_adv, GrpoParams::default());

    let (batch, adv) = random_batch(&learner, &mut rng);
    let batch: Vec<&Trajectory> = batch.iter().collect();
    let (vs, model) = copy_model(&learner);
    let (loss, kl, clip, entropy, grad_norm) = old_formula(
        &vs,
        model.as_ref(),
        reference.as_ref(),
        &batch,
        &adv,
        0.2,
        0.05,
    );
    let params = GrpoParams {
        kl_coef: 0.05,
        ..GrpoParams::default()
    };
    let stats = learner.grpo_step(&batch, &adv, params);
    assert!(kl > 0.0 && clip > 0.0, "kl {kl}, clip fraction {clip}");
    // The same formula over the same tensors; only the last bit of an f32 reduction may
    // differ, where a CPU's kernels sum in another order (seen on one with AMX: the entropy
    // one ulp apart). A wrong term would be off by far more than 1e-6 of the value.
    let ulps = |x: f64| 1e-6 * x.abs().max(1e-3);
    close(stats.loss, loss, ulps(loss));
    close(stats.kl, kl, ulps(kl));
    close(stats.entropy, entropy, ulps(entropy));
    assert_eq!(stats.clip_fraction, clip);
    close(stats.grad_norm, grad_norm, 1e-6 * grad_norm.max(1.0));
}

#[test]
fn micro_batches_give_the_whole_batch_loss_under_every_aggregation() {
    let mut rng = Lcg(11);
    let probe = seeded_learner(41, 1e-2);
    let (batch, adv) = random_batch(&probe, &mut rng);
    let batch: Vec<&Trajectory> = batch.iter().collect();
    for loss_agg in [
        LossAgg::TokenMean,
        LossAgg::SeqMeanTokenMean,
        LossAgg::SeqMeanTokenSumNorm,
    ] {
        let params = GrpoParams {
            loss_agg,
            loss_agg_norm: 4.0,
            entropy_coef: 0.01,
            ..GrpoParams::default()
        };
        let mut whole = seeded_learner(41, 1e-2);
        let mut split = seeded_learner(41, 1e-2);
        split.set_micro_batch(1);
        let a = whole.grpo_step(&batch, &adv, params);
        let b = split.grpo_step(&batch, &adv, params);
        close(a.loss, b.loss, 1e-5);
        close(a.grad_norm, b.grad_norm, 1e-5 * a.grad_norm.max(1.0));
        close(a.entropy, b.entropy, 1e-5);
    }
}

#[test]
fn aggregation_modes_at_ratio_one_by_hand() {
    let learner = seeded_learner(51, 1e-2);
    let (a, b) = pair();
    let (a, b) = (
        with_old(&learner, &a, |l, _| l),
        with_old(&learner, &b, |l, _| l),
    );
    let cases = [
        // a: 3 tokens with A = 1, b: 1 token with A = -0.5; at ratio 1 a token's loss is -A.
        // token-mean: -(3·1 + 1·(-0.5)) / 4 = -2.5 / 4 = -0.625.
        (LossAgg::TokenMean, -0.625),
        // seq-mean-token-mean: -((3·1)/3 + (-0.5)/1) / 2 = -0.5 / 2 = -0.25.
        (LossAgg::SeqMeanTokenMean, -0.25),
        // seq-mean-token-sum-norm, norm 4: -(3/4 + (-0.5)/4) / 2 = -0.625 / 2 = -0.3125.
        (LossAgg::SeqMeanTokenSumNorm, -0.3125),
    ];
    for (loss_agg, want) in cases {
        // Whole batch, one row per pass, and passes bounded by padded tokens (a has 5 tokens,
        // b 4: together 2 × 5 = 10 > 6, so two passes).
        for (micro_batch, tokens) in [(0, 0), (1, 0), (0, 6)] {
            let mut l = seeded_learner(51, 1e-2);
            l.set_micro_batch(micro_batch);
            l.set_micro_batch_tokens(tokens);
            let params = GrpoParams {
                loss_agg,
                loss_agg_norm: 4.0,
                ..GrpoParams::default()
            };
            let stats = l.grpo_step(&[&a, &b], &[1.0, -0.5], params);
            close(stats.loss, want, 1e-5);
            assert_eq!(stats.tokens, 4);
        }
    }
}

#[test]
fn the_entropy_bonus_lowers_the_loss_by_the_weighted_entropy() {
    let probe = seeded_learner(52, 1e-2);
    let (a, b) = pair();
    let (a, b) = (
        with_old(&probe, &a, |l, _| l),
        with_old(&probe, &b, |l, _| l),
    );
    let mut plain = seeded_learner(52, 1e-2);
    let s0 = plain.grpo_step(&[&a, &b], &[1.0, -0.5], GrpoParams::default());
    let mut bonus = seeded_learner(52, 1e-2);
    let params = GrpoParams {
        entropy_coef: 0.1,
        ..GrpoParams::default()
    };
    let s1 = bonus.grpo_step(&[&a, &b], &[1.0, -0.5], params);
    // Token-mean: loss = -0.625 - 0.1 × (token-mean entropy, which the stats report).
    close(s0.loss, -0.625, 1e-5);
    assert!(s1.entropy > 0.0);
    close(s1.loss, -0.625 - 0.1 * s1.entropy, 1e-5);
}

#[test]
fn clip_higher_and_dual_clip_at_the_learner() {
    let probe = seeded_learner(53, 1e-2);
    let (a, _) = pair();
    // Ratio 1.25 on every token: old logprob = current - ln 1.25.
    let up = with_old(&probe, &a, |l, _| l - 1.25f32.ln());
    let step = |params: GrpoParams, t: &Trajectory, adv: f64| {
        seeded_learner(53, 1e-2).grpo_step(&[t], &[adv], params)
    };
    // A = +1, symmetric 0.2: -min(1.25, 1.2) = -1.2, every token clipped.
    let sym = step(GrpoParams::default(), &up, 1.0);
    close(sym.loss, -1.2, 1e-5);
    close(sym.clip_fraction, 1.0, 1e-12);
    // clip_high = 0.28 (bound 1.28): -min(1.25, 1.25) = -1.25, nothing clipped.
    let higher = GrpoParams {
        clip_high: Some(0.28),
        ..GrpoParams::default()
    };
    let s = step(higher, &up, 1.0);
    close(s.loss, -1.25, 1e-5);
    close(s.clip_fraction, 0.0, 1e-12);
    // Ratio e^3 = 20.0855 with A = -1: plain loss max(20.0855, 1.2) = 20.0855; dual clip 3
    // bounds it at 3 · |-1| = 3.
    let far = with_old(&probe, &a, |l, _| l - 3.0);
    let plain = step(GrpoParams::default(), &far, -1.0);
    close(plain.loss, 3f64.exp(), 1e-3);
    let dual = GrpoParams {
        dual_clip: Some(3.0),
        ..GrpoParams::default()
    };
    close(step(dual, &far, -1.0).loss, 3.0, 1e-5);
    // Dual clip leaves positive advantages alone: -min(20.0855, 1.2) = -1.2.
    close(step(dual, &far, 1.0).loss, -1.2, 1e-5);
}

#[test]
fn kl_penalties_sum_the_estimator_over_policy_tokens() {
    let mut learner = seeded_learner(54, 1e-2);
    let (a, b) = pair();
    let empty = traj(vec![1, 2, 3], vec![], vec![]);
    assert_eq!(
        learner.kl_penalties(&[&a, &b], KlEstimator::K3, 1.0),
        vec![0.0, 0.0],
        "no reference: no penalty"
    );
    let (_ref_vs, reference) = copy_model(&learner);
    freeze(&mut learner);
    let p = learner.kl_penalties(&[&a, &b, &empty], KlEstimator::K3, 1.0);
    assert_eq!(p, vec![0.0, 0.0, 0.0], "the policy is its reference");
    let (a, b) = (
        with_old(&learner, &a, |l, _| l),
        with_old(&learner, &b, |l, _| l),
    );
    learner.grpo_step(&[&a, &b], &[1.0, -1.0], GrpoParams::default());
    let (_vs, model) = copy_model(&learner);
    for micro_batch in [0, 1] {
        learner.set_micro_batch(micro_batch);
        for (estimator, per_token) in [
            (KlEstimator::K1, (|d: f64| -d) as fn(f64) -> f64),
            (KlEstimator::K2, |d: f64| d * d / 2.0),
            (KlEstimator::K3, |d: f64| d.exp() - d - 1.0),
        ] {
            let got = learner.kl_penalties(&[&a, &empty, &b], estimator, 1.0);
            assert_eq!(got.len(), 3);
            assert_eq!(got[1], 0.0, "no policy tokens: no penalty");
            for (t, got) in [(&a, got[0]), (&b, got[2])] {
                // d = ref_logp - logp per policy token, summed through the estimator.
                let want: f64 = logprobs_of(model.as_ref(), t)
                    .iter()
                    .zip(logprobs_of(reference.as_ref(), t))
                    .map(|(&l, r)| per_token(r as f64 - l as f64))
                    .sum();
                close(got, want, 1e-5 * want.abs().max(1.0));
            }
        }
    }
    let k3 = learner.kl_penalties(&[&a, &b], KlEstimator::K3, 1.0);
    assert!(k3.iter().all(|&k| k > 0.0), "{k3:?}");
}

#[test]
fn reward_mode_adds_no_kl_to_the_loss_and_other_estimators_do() {
    let probe = seeded_learner(55, 1e-2);
    let (a, b) = pair();
    let (a, b) = (
        with_old(&probe, &a, |l, _| l),
        with_old(&probe, &b, |l, _| l),
    );
    // A learner one step away from its reference.
    let drifted = || {
        let mut l = seeded_learner(55, 1e-2);
        freeze(&mut l);
        l.grpo_step(&[&a, &b], &[1.0, -1.0], GrpoParams::default());
        l
    };
    let with_kl = |kl_estimator, kl_mode| GrpoParams {
        kl_coef: 0.5,
        kl_estimator,
        kl_mode,
        ..GrpoParams::default()
    };
    let none = drifted().grpo_step(&[&a, &b], &[1.0, -0.5], GrpoParams::default());
    let reward = drifted().grpo_step(
        &[&a, &b],
        &[1.0, -0.5],
        with_kl(KlEstimator::K3, KlMode::Reward),
    );
    assert_eq!(reward.loss, none.loss);
    assert_eq!(reward.kl, 0.0);
    for estimator in [KlEstimator::K1, KlEstimator::K2, KlEstimator::K3] {
        let s = drifted().grpo_step(&[&a, &b], &[1.0, -0.5], with_kl(estimator, KlMode::Loss));
        // Token-mean: loss = surrogate + 0.5 × the token-mean KL the stats report.
        close(s.loss, none.loss + 0.5 * s.kl, 1e-5);
        assert!(s.kl != 0.0, "{estimator:?}");
    }
    // Per-token advantages go through the same loss.
    let token_adv = vec![vec![1.0f32; 4], vec![-0.5f32; 3]];
    let per_token = drifted().policy_step(
        &[&a, &b],
        Advantages::PerToken(&token_adv),
        GrpoParams::default(),
    );
    close(per_token.loss, none.loss, 1e-6);
}

/// The demo config with `[rl]` extended by `extra` lines (its `clip_eps = 0.2`, the default,
/// left out so that `extra` may set it).
fn demo_with(extra: &str) -> String {
    let base = include_str!("../../configs/demo.toml").replacen("clip_eps = 0.2\n", "", 1);
    base.replacen("[rl]\n", &format!("[rl]\n{extra}\n"), 1)
}

#[test]
fn rl_loss_keys_parse_with_defaults_that_keep_the_plain_surrogate() {
    let cfg = RunConfig::from_toml_str(&demo_with(""), "demo.toml").unwrap();
    let rl = &cfg.rl;
    assert_eq!(
        (rl.clip_low, rl.clip_high, rl.dual_clip),
        (None, None, None)
    );
    assert_eq!(rl.loss_agg, LossAgg::TokenMean);
    assert_eq!(rl.loss_agg_norm, 1024.0);
    assert_eq!(rl.entropy_coef, 0.0);
    assert_eq!(rl.kl_estimator, KlEstimator::K3);
    assert_eq!(rl.kl_mode, KlMode::Loss);
    let d = GrpoParams::default();
    assert_eq!(
        (
            d.clip_low,
            d.clip_high,
            d.dual_clip,
            d.loss_agg,
            d.loss_agg_norm
        ),
        (None, None, None, LossAgg::TokenMean, 1024.0)
    );
    assert_eq!(
        (d.kl_estimator, d.kl_mode, d.entropy_coef),
        (KlEstimator::K3, KlMode::Loss, 0.0)
    );

    let text = demo_with(
        "clip_low = 0.2\nclip_high = 0.28\ndual_clip = 3.0\nloss_agg = \"seq-mean-token-sum-norm\"\n\
         loss_agg_norm = 256.0\nentropy_coef = 0.001\nkl_estimator = \"k2\"\nkl_mode = \"reward\"\n\
         advantage = \"reinforce_pp\"",
    );
    let cfg = RunConfig::from_toml_str(&text, "demo.toml").unwrap();
    let rl = &cfg.rl;
    assert_eq!(
        (rl.clip_low, rl.clip_high, rl.dual_clip),
        (Some(0.2), Some(0.28), Some(3.0))
    );
    assert_eq!(rl.loss_agg, LossAgg::SeqMeanTokenSumNorm);
    assert_eq!(rl.loss_agg_norm, 256.0);
    assert_eq!(rl.entropy_coef, 0.001);
    assert_eq!(rl.kl_estimator, KlEstimator::K2);
    assert_eq!(rl.kl_mode, KlMode::Reward);
    assert_eq!(
        rl.advantage.estimator(),
        agentrl_trainer::advantage::AdvantageEstimator::ReinforcePp
    );
    // The copy a run writes reads back the same.
    let again = RunConfig::from_toml_str(&toml::to_string_pretty(&cfg).unwrap(), "copy").unwrap();
    assert_eq!(again.rl, cfg.rl);
    // REINFORCE++'s baseline is the batch's, so one rollout per task is enough; not for GRPO.
    let single =
        demo_with("advantage = \"reinforce_pp\"").replace("group_size = 8", "group_size = 1");
    RunConfig::from_toml_str(&single, "demo.toml").unwrap();
    let grpo_single = demo_with("").replace("group_size = 8", "group_size = 1");
    assert!(RunConfig::from_toml_str(&grpo_single, "demo.toml").is_err());
}

#[test]
fn sft_loss_agg_parses_round_trips_and_refuses_the_rl_only_option() {
    let base = include_str!("../../configs/demo.toml");
    assert_eq!(
        RunConfig::from_toml_str(base, "demo.toml")
            .unwrap()
            .sft()
            .unwrap()
            .loss_agg,
        LossAgg::TokenMean
    );
    let with = |agg: &str| base.replacen("[sft]\n", &format!("[sft]\nloss_agg = \"{agg}\"\n"), 1);
    let cfg = RunConfig::from_toml_str(&with("seq-mean-token-mean"), "demo.toml").unwrap();
    assert_eq!(cfg.sft().unwrap().loss_agg, LossAgg::SeqMeanTokenMean);
    let again = RunConfig::from_toml_str(&toml::to_string_pretty(&cfg).unwrap(), "copy").unwrap();
    assert_eq!(again.sft().unwrap().loss_agg, LossAgg::SeqMeanTokenMean);
    let err = RunConfig::from_toml_str(&with("seq-mean-token-sum-norm"), "demo.toml")
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        err.contains("sft.loss_agg") && err.contains("demo.toml"),
        "{err}"
    );
}

#[test]
fn bad_loss_options_name_the_key() {
    let cases = [
        ("dual_clip = 1.0", &["rl.dual_clip", "> 1"][..]),
        ("dual_clip = 0.5", &["rl.dual_clip"]),
        ("clip_low = 1.5", &["rl.clip_low", "(0, 1]"]),
        ("clip_low = 0.0", &["rl.clip_low"]),
        ("clip_high = 0.0", &["rl.clip_high", "> 0"]),
        ("clip_eps = 1.5", &["rl.clip_eps", "rl.clip_low"]),
        ("loss_agg_norm = 0.0", &["rl.loss_agg_norm"]),
        ("entropy_coef = -0.1", &["rl.entropy_coef"]),
        (
            "loss_agg = \"mean\"",
            &[
                "loss_agg",
                "token-mean",
                "seq-mean-token-mean",
                "seq-mean-token-sum-norm",
            ],
        ),
        ("kl_estimator = \"k4\"", &["kl_estimator", "k1", "k2", "k3"]),
        ("kl_mode = \"advantage\"", &["kl_mode", "loss", "reward"]),
        ("advantage = \"reinforce\"", &["advantage", "reinforce_pp"]),
    ];
    for (line, needles) in cases {
        let err = RunConfig::from_toml_str(&demo_with(line), "demo.toml")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_else(|| panic!("{line} was accepted"));
        for needle in needles {
            assert!(
                err.contains(needle) && err.contains("demo.toml"),
                "{line}: {needle}: {err}"
            );
        }
    }
}

#[test]
fn a_group_prompt_shared_once_gives_the_same_update() {
    // A group of three sharing a 6-id prompt, then a row with its own prompt.
    let prompt = vec![1, 2, 3, 4, 5, 6];
    let rows = [
        traj(prompt.clone(), vec![7, 8, 9], vec![0.0; 3]),
        traj(prompt.clone(), vec![7, 10], vec![0.0; 2]),
        traj(
            [prompt.clone(), vec![11]].concat(),
            vec![12, 13, 14, 15],
            vec![0.0; 4],
        ),
        traj(vec![2, 4, 6], vec![16, 17], vec![0.0; 2]),
    ];
    let probe = seeded_learner(53, 1e-2);
    let rows: Vec<Trajectory> = rows
        .iter()
        .map(|t| with_old(&probe, t, |l, i| l - 0.05 * i as f32))
        .collect();
    let refs: Vec<&Trajectory> = rows.iter().collect();
    let advantages = [1.0, -0.5, 0.25, -1.0];
    let params = GrpoParams {
        entropy_coef: 0.01,
        ..GrpoParams::default()
    };
    let mut plain = seeded_learner(53, 1e-2);
    let s0 = plain.grpo_step(&refs, &advantages, params);
    let mut shared = seeded_learner(53, 1e-2);
    shared.set_shared_prefix(4);
    let s1 = shared.grpo_step(&refs, &advantages, params);
    close(s1.loss, s0.loss, 1e-5);
    close(s1.entropy, s0.entropy, 1e-5);
    close(s1.grad_norm, s0.grad_norm, 1e-4 * s0.grad_norm.max(1.0));
    assert_eq!(s1.tokens, s0.tokens);
    // AdamW's first step moves each weight by about lr × sign(gradient), so a gradient that
    // is ~0 either way may move by a different amount; anything larger than a tenth of a step
    // would be a wrong gradient (the decoders' own tests compare gradients to 1e-5).
    for ((name, a), (_, b)) in plain.weights().iter().zip(shared.weights().iter()) {
        let diff = (a - b).abs().max().double_value(&[]);
        assert!(diff < 1e-3, "{name} differs by {diff} after the step");
    }
}
