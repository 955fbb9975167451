//! bf16 Llama: base weights and activations in bf16 track the f32 model closely, logits stay
//! f32, KV-cache generation agrees with the full forward, LoRA adapters stay f32 and are the only
//! thing that trains, and merging folds them into the bf16 weights.
#![cfg(feature = "tch")]

use agentrl_core::{SamplingParams, SeededRng};
use agentrl_policy::PolicyModel;
use agentrl_policy::llama::{Dtype, LoraConfig, is_adapter_name};
use tch::{Kind, Tensor, nn, nn::OptimizerConfig};

mod common;
use common::{ids, max_diff, tiny};

/// The largest KL divergence `KL(p || q)` over the positions of two `[B, T, V]` logit tensors.
fn max_kl(p_logits: &Tensor, q_logits: &Tensor) -> f64 {
    let lp = p_logits.log_softmax(-1, Kind::Float);
    let lq = q_logits.log_softmax(-1, Kind::Float);
    (lp.exp() * (&lp - &lq))
        .sum_dim_intlist(-1, false, Kind::Float)
        .max()
        .double_value(&[])
}

/// bf16 rounding moves the tiny models' next-token distributions by a KL of a few 1e-4 (measured
/// over seeds); ten times that still tells a working bf16 path from a broken one.
const BF16_KL: f64 = 5e-3;

#[test]
fn bf16_weights_track_the_f32_model_and_give_f32_logits() {
    let (vs, mut m) = tiny(11);
    let want = tch::no_grad(|| m.logits(&ids()));
    m.set_dtype(&vs, Dtype::Bf16);
    assert_eq!(m.dtype(), Dtype::Bf16);
    for (name, v) in vs.variables() {
        assert_eq!(v.kind(), Kind::BFloat16, "{name}");
    }
    let got = tch::no_grad(|| m.logits(&ids()));
    assert_eq!(got.kind(), Kind::Float);
    assert!(
        max_diff(&got, &want) > 0.0,
        "bf16 changed nothing: the weights were not converted"
    );
    let kl = max_kl(&want, &got);
    assert!(
        kl < BF16_KL,
        "bf16 next-token distributions are off by KL {kl}"
    );
    // Back to f32: the model computes in f32 again (on the rounded weights).
    m.set_dtype(&vs, Dtype::F32);
    assert!(vs.variables().values().all(|v| v.kind() == Kind::Float));
    let again = tch::no_grad(|| m.logits(&ids()));
    assert!(max_kl(&want, &again) < BF16_KL);
}

#[test]
fn bf16_cached_generation_agrees_with_the_full_forward() {
    let (vs, mut m) = tiny(12);
    m.set_dtype(&vs, Dtype::Bf16);
    let prompts = vec![vec![1u32, 5, 7, 9], vec![3u32, 4]];
    let params = vec![SamplingParams::greedy(10); 2];
    let gens = m
        .generate(
            &prompts,
            &params,
            &mut [SeededRng::new(0), SeededRng::new(1)],
            0,
            None,
        )
        .unwrap();
    for (prompt, g) in prompts.iter().zip(&gens) {
        assert_eq!(g.ids.len(), 10);
        let all: Vec<i64> = prompt.iter().chain(&g.ids).map(|&i| i as i64).collect();
        let seq = Tensor::from_slice(&all).view([1, -1]);
        let (lp, _) = tch::no_grad(|| m.token_logprobs(&seq, 1.0));
        let lp: Vec<f32> = Vec::try_from(lp.view([-1])).unwrap();
        for (a, b) in lp[prompt.len() - 1..].iter().zip(&g.logprobs) {
            assert!(a.is_finite() && b.is_finite());
            assert!((a - b).abs() < 0.05, "cached {b} vs full {a}");
        }
    }
}

#[test]
fn lora_adapters_stay_f32_on_a_bf16_base_and_only_they_train() {
    let (vs, mut m) = tiny(13);
    m.set_dtype(&vs, Dtype::Bf16);
    m.attach_lora(&vs, &LoraConfig::new(4, 8.0)).unwrap();
    let snapshot = |adapters: bool| -> Vec<(String, Tensor)> {
        let mut v: Vec<_> = vs
            .variables()
            .into_iter()
            .filter(|(n, _)| is_adapter_name(n) == adapters)
            .map(|(n, t)| (n, t.detach().copy()))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    };
    let base = snapshot(false);
    let adapters = snapshot(true);
    assert!(base.iter().all(|(_, t)| t.kind() == Kind::BFloat16));
    assert!(adapters.iter().all(|(_, t)| t.kind() == Kind::Float));
    let nll = |m: &agentrl_policy::llama::Llama| -m.token_logprobs(&ids(), 1.0).0.mean(Kind::Float);
    let mut opt = nn::adamw(0.9, 0.95, 0.0).build(&vs, 1e-2).unwrap();
    let loss0 = tch::no_grad(|| nll(&m)).double_value(&[]);
    for _ in 0..5 {
        opt.zero_grad();
        let loss = nll(&m);
        loss.backward();
        opt.step();
    }
    let loss5 = tch::no_grad(|| nll(&m)).double_value(&[]);
    assert!(loss5 < loss0, "loss {loss0} -> {loss5}");
    for ((name, before), (_, now)) in base.iter().zip(snapshot(false)) {
        assert!(now.equal(before), "base weight {name} changed");
    }
    for ((name, before), (_, now)) in adapters.iter().zip(snapshot(true)) {
        assert!(!now.equal(before), "adapter {name} did not train");
    }
    // Merging folds the f32 update into the bf16 weights: same function, up to bf16 rounding.
    let with_adapters = tch::no_grad(|| m.logits(&ids()));
    m.merge_lora();
    let merged = tch::no_grad(|| m.logits(&ids()));
    let kl = max_kl(&with_adapters, &merged);
    assert!(kl < BF16_KL, "merged model is off by KL {kl}");
}

#[test]
fn dtype_names_parse_and_unknown_ones_are_refused() {
    for (text, want) in [
        ("f32", Dtype::F32),
        ("float32", Dtype::F32),
        ("bf16", Dtype::Bf16),
        ("BFloat16", Dtype::Bf16),
    ] {
        assert_eq!(text.parse::<Dtype>().unwrap(), want);
    }
    let err = "fp8".parse::<Dtype>().unwrap_err().to_string();
    assert!(err.contains("fp8") && err.contains("bf16"), "{err}");
    assert_eq!(Dtype::Bf16.to_string(), "bf16");
}
