//! The learner trains a Llama-family model: with LoRA only the adapters change (the base stays
//! bit-identical) and SFT and GRPO steps move a fixed batch the right way; full fine-tuning
//! changes the base; micro-batches accumulate to the same gradient; adapter checkpoints
//! round-trip; the rollout policy serves the learner's model and takes adapter-only updates.
//! An opt-in test trains LoRA on the real SmolLM2 GGUF (`AGENTRL_SMOLLM2_GGUF`).

use std::collections::BTreeMap;

use agentrl_core::{GenerationRequest, Policy, SamplingParams, SeededRng, Trajectory};
use agentrl_policy::TchPolicy;
use agentrl_policy::llama::{
    Dtype, Llama, LlamaConfig, LoraConfig, TARGET_MODULES, is_adapter_name,
};
use agentrl_trainer::learner::{GrpoParams, Learner, pack};
use tch::{Device, Kind, Tensor, nn};

mod common;
use common::one_turn_trajectory as traj;

const TINY: &str = r#"{"model_type": "llama", "hidden_size": 32, "intermediate_size": 48,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "vocab_size": 40,
    "max_position_embeddings": 64, "tie_word_embeddings": true, "hidden_act": "silu"}"#;

/// A tiny Llama whose every variable comes from a `SeededRng` stream (not libtorch's global
/// generator, which tests running in parallel share), so equal seeds give equal models.
fn tiny_llama(seed: u64) -> (nn::VarStore, Llama) {
    let config = LlamaConfig::from_json_str(TINY, "tiny").unwrap();
    let vs = nn::VarStore::new(Device::Cpu);
    let model = Llama::new(&vs.root(), config).unwrap();
    fill(&vs, seed);
    (vs, model)
}

/// Overwrites every variable of `vs` (in name order) with uniform values in [-0.5, 0.5).
fn fill(vs: &nn::VarStore, seed: u64) {
    let mut rng = SeededRng::new(seed);
    let mut vars: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
    vars.sort_by(|a, b| a.0.cmp(&b.0));
    tch::no_grad(|| {
        for (_, mut v) in vars {
            let n = v.numel();
            let values: Vec<f32> = (0..n).map(|_| rng.next_f64() as f32 - 0.5).collect();
            v.copy_(&Tensor::from_slice(&values).view(v.size().as_slice()));
        }
    });
}

fn lora() -> LoraConfig {
    LoraConfig {
        r: 4,
        alpha: 8.0,
        targets: TARGET_MODULES.iter().map(|s| s.to_string()).collect(),
    }
}

/// A LoRA learner over `tiny_llama(seed)`, its adapters too drawn from the seed's stream.
fn lora_learner(seed: u64, lr: f64) -> Learner {
    let (vs, model) = tiny_llama(seed);
    let learner = Learner::llama(vs, model, Some(&lora()), lr).unwrap();
    let mut named: Vec<String> = learner.weights().into_iter().map(|(n, _)| n).collect();
    named.sort();
    let mut rng = SeededRng::new(seed ^ 0xADA);
    let vars = learner.var_store().variables();
    tch::no_grad(|| {
        for name in &named {
            let mut v = vars[name].shallow_clone();
            if name.contains(".lora_A.") {
                let n = v.numel();
                let values: Vec<f32> = (0..n)
                    .map(|_| (rng.next_f64() as f32 - 0.5) * 0.2)
                    .collect();
                v.copy_(&Tensor::from_slice(&values).view(v.size().as_slice()));
            } else {
                let _ = v.zero_();
            }
        }
    });
    learner
}

fn batch() -> Vec<Trajectory> {
    vec![
        traj(vec![1, 2, 3], vec![7, 8, 9, 10], vec![0.0; 4]),
        traj(vec![4, 5], vec![11, 12, 13], vec![0.0; 3]),
        traj(vec![6, 6, 6, 2], vec![20, 21], vec![0.0; 2]),
    ]
}

/// Summed log-probability the learner's current weights give to the policy tokens of `t`.
fn policy_logprob(learner: &Learner, t: &Trajectory) -> f64 {
    let (_vs, model) = learner.clone_model().unwrap();
    let packed = pack(&[t], Device::Cpu);
    let (lp, _) = tch::no_grad(|| model.token_logprobs(&packed.ids, 1.0));
    (lp * &packed.mask).sum(Kind::Float).double_value(&[])
}

fn base_snapshot(learner: &Learner) -> BTreeMap<String, Tensor> {
    learner
        .var_store()
        .variables()
        .into_iter()
        .filter(|(n, _)| !is_adapter_name(n))
        .map(|(n, t)| (n, t.copy()))
        .collect()
}

fn assert_base_unchanged(learner: &Learner, base: &BTreeMap<String, Tensor>) {
    let now = learner.var_store().variables();
    for (name, before) in base {
        assert!(now[name].equal(before), "base weight {name} changed");
    }
}

#[test]
fn lora_sft_reduces_the_loss_and_keeps_the_base_bit_identical() {
    let mut learner = lora_learner(1, 1e-2);
    let base = base_snapshot(&learner);
    let weights = learner.weights();
    assert_eq!(weights.len(), 2 * 7 * 2, "only adapters travel");
    assert!(weights.iter().all(|(n, _)| is_adapter_name(n)));
    let data = batch();
    let refs: Vec<&Trajectory> = data.iter().collect();
    let first = learner.sft_step(&refs, 1.0);
    let mut last = first.clone();
    for _ in 0..15 {
        last = learner.sft_step(&refs, 1.0);
    }
    assert!(first.grad_norm > 0.0);
    assert!(
        last.loss < first.loss * 0.8,
        "loss {} -> {}",
        first.loss,
        last.loss
    );
    assert_base_unchanged(&learner, &base);
}

#[test]
fn lora_grpo_steps_follow_the_advantages_and_reduce_the_loss() {
    let mut learner = lora_learner(2, 5e-3);
    let base = base_snapshot(&learner);
    let mut good = traj(vec![1, 2, 3], vec![7, 8, 9], vec![0.0; 3]);
    let mut bad = traj(vec![1, 2, 3], vec![30, 31, 32], vec![0.0; 3]);
    // Rollout logprobs are the current policy's (on-policy samples).
    for t in [&mut good, &mut bad] {
        let packed = pack(&[&*t], Device::Cpu);
        let (_vs, model) = learner.clone_model().unwrap();
        let (lp, _) = tch::no_grad(|| model.token_logprobs(&packed.ids, 1.0));
        let lp: Vec<f32> = Vec::try_from(lp.view([-1])).unwrap();
        t.turns[0].logprobs = lp[2..].to_vec();
    }
    let (good0, bad0) = (
        policy_logprob(&learner, &good),
        policy_logprob(&learner, &bad),
    );
    let p = GrpoParams {
        clip_eps: 0.2,
        kl_coef: 0.0,
        temperature: 1.0,
        grad_clip: 1.0,
        ..GrpoParams::default()
    };
    let first = learner.grpo_step(&[&good, &bad], &[1.0, -1.0], p);
    let mut last = first.clone();
    for _ in 0..4 {
        last = learner.grpo_step(&[&good, &bad], &[1.0, -1.0], p);
    }
    assert!(
        last.loss < first.loss,
        "loss {} -> {}",
        first.loss,
        last.loss
    );
    assert!(policy_logprob(&learner, &good) > good0);
    assert!(policy_logprob(&learner, &bad) < bad0);
    assert_base_unchanged(&learner, &base);
}

#[test]
fn full_fine_tuning_changes_the_base_weights() {
    let (vs, model) = tiny_llama(3);
    let mut learner = Learner::llama(vs, model, None, 1e-2).unwrap();
    let base = base_snapshot(&learner);
    assert_eq!(
        learner.weights().len(),
        base.len(),
        "every variable travels"
    );
    let data = batch();
    let refs: Vec<&Trajectory> = data.iter().collect();
    let first = learner.sft_step(&refs, 1.0);
    for _ in 0..5 {
        learner.sft_step(&refs, 1.0);
    }
    let now = learner.var_store().variables();
    for name in [
        "model.embed_tokens.weight",
        "model.layers.0.self_attn.q_proj.weight",
        "model.layers.1.mlp.down_proj.weight",
        "model.norm.weight",
    ] {
        assert!(!now[name].equal(&base[name]), "{name} did not change");
    }
    assert!(learner.sft_step(&refs, 1.0).loss < first.loss);
}

#[test]
fn bf16_full_fine_tuning_takes_small_sft_steps_as_fp32_does() {
    // One SFT step at lr 1e-4 moves every weight by about 1e-4 (Adam's first step), below
    // half the bf16 spacing of almost every weight here (|w| up to 0.5, spacing up to 2e-3):
    // rounded to the nearest, bf16 weights would hardly move.
    let data = batch();
    let refs: Vec<&Trajectory> = data.iter().collect();
    let step = |dtype: Dtype| {
        let (vs, mut model) = tiny_llama(5);
        model.set_dtype(&vs, dtype);
        let mut learner = Learner::llama(vs, model, None, 1e-4).unwrap();
        let before = base_snapshot(&learner);
        learner.sft_step(&refs, 1.0);
        let now = learner.var_store().variables();
        let mut deltas: Vec<f64> = Vec::new();
        for (name, old) in &before {
            let d = (&now[name].to_kind(Kind::Float) - old.to_kind(Kind::Float)).view([-1]);
            deltas.extend(
                Vec::<f32>::try_from(d)
                    .unwrap()
                    .iter()
                    .map(|x| f64::from(*x)),
            );
        }
        deltas
    };
    let (fp32, bf16) = (step(Dtype::F32), step(Dtype::Bf16));
    let moved: f64 = fp32.iter().map(|d| d.abs()).sum();
    // The bf16 change projected on the fp32 step's direction, over the fp32 step's size.
    let along: f64 = fp32.iter().zip(&bf16).map(|(a, b)| a.signum() * b).sum();
    let ratio = along / moved;
    assert!(
        (0.8..1.2).contains(&ratio),
        "bf16 moved {ratio} of the fp32 step"
    );
}

#[test]
fn micro_batches_accumulate_to_the_same_gradient() {
    let data = batch();
    let refs: Vec<&Trajectory> = data.iter().collect();
    let mut whole = lora_learner(4, 1e-3);
    let mut split = lora_learner(4, 1e-3);
    split.set_micro_batch(1);
    let a = whole.sft_step(&refs, 1.0);
    let b = split.sft_step(&refs, 1.0);
    assert_eq!(a.tokens, b.tokens);
    assert!((a.loss - b.loss).abs() < 1e-5, "{} vs {}", a.loss, b.loss);
    assert!(
        (a.grad_norm - b.grad_norm).abs() < 1e-5 * a.grad_norm.max(1.0),
        "{} vs {}",
        a.grad_norm,
        b.grad_norm
    );
}

fn greedy(model: &dyn agentrl_policy::PolicyModel, prompts: &[Vec<u32>]) -> Vec<Vec<u32>> {
    let params: Vec<SamplingParams> = prompts.iter().map(|_| SamplingParams::greedy(8)).collect();
    let mut rngs: Vec<SeededRng> = prompts.iter().map(|_| SeededRng::new(0)).collect();
    model
        .generate(prompts, &params, &mut rngs, 0, None)
        .unwrap()
        .into_iter()
        .map(|g| g.ids)
        .collect()
}

async fn served(policy: &TchPolicy, prompts: &[Vec<u32>]) -> Vec<Vec<u32>> {
    let reqs = prompts
        .iter()
        .map(|p| GenerationRequest::new(p.clone(), SamplingParams::greedy(8)))
        .collect();
    let out = policy.generate(reqs).await.unwrap();
    out.into_iter().map(|g| g.ids).collect()
}

#[tokio::test]
async fn adapter_checkpoints_round_trip_and_the_rollout_copy_follows_the_learner() {
    let dir = tempfile::tempdir().unwrap();
    let data = batch();
    let refs: Vec<&Trajectory> = data.iter().collect();
    let prompts = vec![vec![1u32, 2, 3], vec![4u32, 5]];
    let mut learner = lora_learner(5, 1e-2);
    let (vs, model) = learner.clone_model().unwrap();
    let expected = greedy(model.as_ref(), &prompts);
    let policy = TchPolicy::spawn(vs, model, 8, 0).unwrap();
    assert_eq!(served(&policy, &prompts).await, expected);

    for _ in 0..20 {
        learner.sft_step(&refs, 1.0);
    }
    let (_vs, trained) = learner.clone_model().unwrap();
    let after = greedy(trained.as_ref(), &prompts);
    policy.set_weights(learner.weights(), 1).await.unwrap();
    assert_eq!(served(&policy, &prompts).await, after);

    let path = dir.path().join("step.safetensors");
    learner.save(&path).unwrap();
    let names: Vec<String> = Tensor::read_safetensors(&path)
        .unwrap()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(names.len(), 28);
    assert!(names.iter().all(|n| is_adapter_name(n)), "{names:?}");
    let mut restored = lora_learner(5, 1e-2);
    restored.load(&path).unwrap();
    for ((n1, a), (n2, b)) in learner.weights().iter().zip(restored.weights().iter()) {
        assert_eq!(n1, n2);
        assert!(a.equal(b), "{n1}");
    }
    let (_vs, m) = restored.clone_model().unwrap();
    assert_eq!(greedy(m.as_ref(), &prompts), after);

    // A full checkpoint is no adapter file.
    let (vs, model) = tiny_llama(5);
    let full = Learner::llama(vs, model, None, 1e-2).unwrap();
    let full_path = dir.path().join("full.safetensors");
    full.save(&full_path).unwrap();
    let e = restored.load(&full_path).unwrap_err().to_string();
    assert!(e.contains("missing"), "{e}");
    let e = full.save_peft(dir.path(), "tiny").unwrap_err().to_string();
    assert!(e.contains("LoRA"), "{e}");
}

#[test]
#[ignore = "needs the SmolLM2-135M-Instruct GGUF in AGENTRL_SMOLLM2_GGUF"]
fn smollm2_lora_sft_reduces_the_loss() {
    let path = std::env::var("AGENTRL_SMOLLM2_GGUF").expect("set AGENTRL_SMOLLM2_GGUF");
    let (vs, model) =
        agentrl_policy::load::load_llama(path.as_ref(), Device::Cpu, Dtype::F32).unwrap();
    let mut learner = Learner::llama(vs, model, Some(&LoraConfig::new(8, 16.0)), 2e-3).unwrap();
    let base = base_snapshot(&learner);
    let t = traj(
        vec![
            1, 9690, 198, 504, 3575, 282, 4649, 314, 7042, 30, 2, 198, 1, 520, 9531, 198,
        ],
        vec![504, 3575, 282, 4649, 314, 7042, 30, 2],
        vec![0.0; 8],
    );
    let first = learner.sft_step(&[&t], 1.0);
    let mut last = first.clone();
    for _ in 0..4 {
        last = learner.sft_step(&[&t], 1.0);
    }
    assert!(last.loss < first.loss, "{} -> {}", first.loss, last.loss);
    assert_base_unchanged(&learner, &base);
}

/// Whether two tensors use the same memory.
fn same_storage(a: &Tensor, b: &Tensor) -> bool {
    a.data_ptr() == b.data_ptr()
}

/// Log-probabilities `model` gives to every next token of `ids`.
fn logprobs_of(model: &dyn agentrl_policy::PolicyModel, ids: &[i64]) -> Tensor {
    let ids = Tensor::from_slice(ids).view([1, -1]);
    tch::no_grad(|| model.token_logprobs(&ids, 1.0).0)
}

#[tokio::test]
async fn a_rollout_model_shares_the_frozen_base_and_copies_or_shares_the_adapters() {
    let data = batch();
    let refs: Vec<&Trajectory> = data.iter().collect();
    let ids = [1i64, 2, 3, 4, 5, 6];
    let mut learner = lora_learner(6, 1e-2);
    let (copied_vs, copied) = learner.shared_model(false).unwrap();
    let (shared_vs, shared) = learner.shared_model(true).unwrap();
    let before = logprobs_of(copied.as_ref(), &ids);
    assert!(logprobs_of(shared.as_ref(), &ids).equal(&before));

    // The frozen base is the learner's memory in both; the adapters only when asked.
    let learned = learner.var_store().variables();
    for (vs, share_trained) in [(&copied_vs, false), (&shared_vs, true)] {
        for (name, t) in vs.variables() {
            let expect = share_trained || !is_adapter_name(&name);
            assert_eq!(
                same_storage(&t, &learned[&name]),
                expect,
                "{name} (share_trained {share_trained})"
            );
        }
    }

    for _ in 0..20 {
        learner.sft_step(&refs, 1.0);
    }
    let (_vs, fresh) = learner.clone_model().unwrap();
    let after = logprobs_of(fresh.as_ref(), &ids);
    assert!(!after.equal(&before), "the SFT steps changed nothing");
    // The sharing model follows the learner's steps; the copy keeps the old adapters until
    // they are published to it.
    assert!(logprobs_of(shared.as_ref(), &ids).equal(&after));
    assert!(logprobs_of(copied.as_ref(), &ids).equal(&before));
    let policy = TchPolicy::spawn(copied_vs, copied, 8, 0).unwrap();
    policy.set_weights(learner.weights(), 1).await.unwrap();
    let prompts = vec![vec![1u32, 2, 3], vec![4u32, 5]];
    assert_eq!(
        served(&policy, &prompts).await,
        greedy(fresh.as_ref(), &prompts)
    );
}
