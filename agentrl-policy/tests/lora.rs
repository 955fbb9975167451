//! LoRA on the Llama decoder: only adapters train while the base stays bit-identical, merging
//! folds `(alpha / r) · B · A` into the weights without changing the logits, adapters round-trip
//! through the PEFT layout with PEFT's names and config keys, and a `TchPolicy` serves a LoRA
//! model (greedy equals `Llama::generate`, adapter-only weight updates apply). An opt-in test
//! trains adapters on the real SmolLM2 GGUF (`AGENTRL_SMOLLM2_GGUF`).
#![cfg(feature = "tch")]

use std::collections::BTreeMap;

use agentrl_core::{GenerationRequest, Policy, SamplingParams, SeededRng};
use agentrl_policy::PolicyModel;
use agentrl_policy::TchPolicy;
use agentrl_policy::llama::{
    ADAPTER_CONFIG_FILE, ADAPTER_WEIGHTS_FILE, Llama, LoraConfig, TARGET_MODULES, adapter_weights,
    is_adapter_name, load_adapter_weights, read_peft_config,
};
use tch::{Device, Kind, Tensor, nn, nn::OptimizerConfig};

mod common;
use common::{ids, max_diff, tiny};

fn all_targets(r: usize, alpha: f64) -> LoraConfig {
    LoraConfig {
        r,
        alpha,
        targets: TARGET_MODULES.iter().map(|s| s.to_string()).collect(),
    }
}

fn snapshot(vs: &nn::VarStore, adapters: bool) -> BTreeMap<String, Tensor> {
    vs.variables()
        .into_iter()
        .filter(|(n, _)| is_adapter_name(n) == adapters)
        .map(|(n, t)| (n, t.detach().copy()))
        .collect()
}

/// Sets every `lora_B` to small random values, so adapters change the model.
fn randomise_b(vs: &nn::VarStore) {
    tch::no_grad(|| {
        for (n, mut v) in vs.variables() {
            if n.contains(".lora_B.") {
                v.copy_(&(Tensor::randn_like(&v) * 0.3));
            }
        }
    });
}

fn nll(m: &Llama) -> Tensor {
    let (lp, _) = m.token_logprobs(&ids(), 1.0);
    -lp.mean(Kind::Float)
}

#[test]
fn only_adapters_receive_gradients_and_the_base_stays_bit_identical() {
    let (vs, mut m) = tiny(1);
    m.attach_lora(&vs, &all_targets(4, 8.0)).unwrap();
    let base = snapshot(&vs, false);
    let adapters0 = snapshot(&vs, true);
    // 2 layers x 7 projections x (A, B).
    assert_eq!(adapters0.len(), 28);
    let mut opt = nn::adamw(0.9, 0.95, 0.01).build(&vs, 1e-2).unwrap();
    let loss0 = nll(&m).double_value(&[]);
    for step in 0..3 {
        opt.zero_grad();
        let loss = nll(&m);
        loss.backward();
        if step == 0 {
            for (name, v) in vs.variables() {
                if is_adapter_name(&name) {
                    assert!(v.requires_grad(), "{name}");
                    assert!(v.grad().defined(), "{name} got no gradient");
                } else {
                    assert!(!v.requires_grad(), "{name} is trainable");
                    assert!(!v.grad().defined(), "{name} got a gradient");
                }
            }
        }
        opt.step();
    }
    for (name, before) in &base {
        let now = &vs.variables()[name];
        assert!(now.equal(before), "base weight {name} changed");
    }
    let vars = vs.variables();
    for (name, before) in &adapters0 {
        assert!(!vars[name].equal(before), "adapter {name} did not change");
    }
    let loss3 = tch::no_grad(|| nll(&m)).double_value(&[]);
    assert!(loss3 < loss0, "loss {loss0} -> {loss3}");
}

#[test]
fn fresh_adapters_leave_the_model_unchanged() {
    let (vs, mut m) = tiny(2);
    let before = tch::no_grad(|| m.logits(&ids()));
    m.attach_lora(&vs, &LoraConfig::new(8, 16.0)).unwrap();
    let after = tch::no_grad(|| m.logits(&ids()));
    assert_eq!(max_diff(&before, &after), 0.0);
    assert_eq!(m.lora_config().unwrap().targets.len(), 4);
    // Only the named projections got adapters.
    let names: Vec<String> = adapter_weights(&vs).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names.len(), 2 * 4 * 2);
    assert!(names.iter().all(|n| n.contains(".self_attn.")), "{names:?}");
}

#[test]
fn merging_gives_w_plus_scaled_ba_and_the_same_logits() {
    let (vs, mut m) = tiny(3);
    let cfg = all_targets(4, 12.0);
    m.attach_lora(&vs, &cfg).unwrap();
    randomise_b(&vs);
    let with_adapters = tch::no_grad(|| m.logits(&ids()));
    let vars = vs.variables();
    let merged: BTreeMap<String, Tensor> = m.merged_weights().into_iter().collect();
    assert_eq!(merged.len(), 14);
    let scale = cfg.alpha / cfg.r as f64;
    for (name, w) in &merged {
        let module = name.trim_end_matches(".weight");
        let a = &vars[&format!("base_model.model.{module}.lora_A.weight")];
        let b = &vars[&format!("base_model.model.{module}.lora_B.weight")];
        let expected = tch::no_grad(|| &vars[name] + b.matmul(a) * scale);
        assert!(max_diff(w, &expected) < 1e-5, "{name}");
        assert!(
            max_diff(w, &vars[name]) > 1e-3,
            "{name}: the adapter changed nothing"
        );
    }
    m.merge_lora();
    assert!(m.lora_config().is_none());
    for (name, w) in &merged {
        assert!(max_diff(&vs.variables()[name], w) < 1e-6, "{name}");
    }
    let after = tch::no_grad(|| m.logits(&ids()));
    let d = max_diff(&with_adapters, &after);
    assert!(d < 1e-4, "merged logits differ by {d}");
}

#[test]
fn peft_save_and_load_round_trip_with_peft_names_and_keys() {
    let dir = tempfile::tempdir().unwrap();
    let (vs, mut m) = tiny(4);
    let cfg = LoraConfig {
        r: 2,
        alpha: 4.0,
        targets: vec!["q_proj".into(), "v_proj".into(), "down_proj".into()],
    };
    m.attach_lora(&vs, &cfg).unwrap();
    randomise_b(&vs);
    m.save_peft(&vs, dir.path(), "HuggingFaceTB/SmolLM2-135M-Instruct")
        .unwrap();
    let tensors: BTreeMap<String, Tensor> =
        Tensor::read_safetensors(dir.path().join(ADAPTER_WEIGHTS_FILE))
            .unwrap()
            .into_iter()
            .collect();
    assert_eq!(tensors.len(), 2 * 3 * 2);
    let a = &tensors["base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"];
    assert_eq!(a.size(), [2, 32]);
    let b = &tensors["base_model.model.model.layers.1.mlp.down_proj.lora_B.weight"];
    assert_eq!(b.size(), [32, 2]);
    assert!(tensors.contains_key("base_model.model.model.layers.1.self_attn.v_proj.lora_B.weight"));
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join(ADAPTER_CONFIG_FILE)).unwrap(),
    )
    .unwrap();
    assert_eq!(json["peft_type"], "LORA");
    assert_eq!(json["task_type"], "CAUSAL_LM");
    assert_eq!(json["r"], 2);
    assert_eq!(json["lora_alpha"], 4.0);
    assert_eq!(
        json["target_modules"],
        serde_json::json!(["q_proj", "v_proj", "down_proj"])
    );
    assert_eq!(
        json["base_model_name_or_path"],
        "HuggingFaceTB/SmolLM2-135M-Instruct"
    );
    let expected = tch::no_grad(|| m.logits(&ids()));

    // The same base in a fresh model (copied: other tests draw from libtorch's global
    // generator concurrently), adapters from disk.
    let (vs2, mut m2) = tiny(4);
    let src = vs.variables();
    tch::no_grad(|| {
        for (name, mut v) in vs2.variables() {
            v.copy_(&src[&name]);
        }
    });
    let plain = tch::no_grad(|| m2.logits(&ids()));
    assert!(max_diff(&plain, &expected) > 1e-3);
    let loaded = m2.load_peft(&vs2, dir.path()).unwrap();
    assert_eq!(loaded, cfg);
    let got = tch::no_grad(|| m2.logits(&ids()));
    assert_eq!(max_diff(&got, &expected), 0.0);
}

#[test]
fn bad_configs_and_mismatched_adapters_are_refused() {
    let (vs, mut m) = tiny(5);
    let e = m
        .attach_lora(&vs, &LoraConfig::new(0, 1.0))
        .unwrap_err()
        .to_string();
    assert!(e.contains("lora.r"), "{e}");
    let mut bad = LoraConfig::new(2, 2.0);
    bad.targets = vec!["qkv".into()];
    let e = m.attach_lora(&vs, &bad).unwrap_err().to_string();
    assert!(e.contains("qkv"), "{e}");

    let dir = tempfile::tempdir().unwrap();
    m.attach_lora(&vs, &all_targets(2, 2.0)).unwrap();
    m.save_peft(&vs, dir.path(), "tiny").unwrap();
    let (vs2, mut m2) = tiny(5);
    m2.attach_lora(&vs2, &LoraConfig::new(2, 2.0)).unwrap();
    let e = load_adapter_weights(&vs2, dir.path().join(ADAPTER_WEIGHTS_FILE))
        .unwrap_err()
        .to_string();
    assert!(e.contains("no matching adapter"), "{e}");
    let (vs3, mut m3) = tiny(5);
    m3.attach_lora(&vs3, &all_targets(3, 2.0)).unwrap();
    let e = load_adapter_weights(&vs3, dir.path().join(ADAPTER_WEIGHTS_FILE))
        .unwrap_err()
        .to_string();
    assert!(e.contains("shape"), "{e}");

    // An adapter whose weights hold an infinity is refused, naming the tensor.
    let path = dir.path().join(ADAPTER_WEIGHTS_FILE);
    let mut tensors = Tensor::read_safetensors(&path).unwrap();
    tensors.sort_by(|a, b| a.0.cmp(&b.0));
    let _ = tensors[0].1.flatten(0, -1).get(1).fill_(f64::INFINITY);
    Tensor::write_safetensors(&tensors, &path).unwrap();
    let (vs4, mut m4) = tiny(5);
    m4.attach_lora(&vs4, &all_targets(2, 2.0)).unwrap();
    let e = load_adapter_weights(&vs4, &path).unwrap_err().to_string();
    assert!(
        e.contains(&tensors[0].0) && e.contains("NaN or infinite"),
        "{e}"
    );
}

fn greedy(m: &Llama, prompts: &[Vec<u32>]) -> Vec<Vec<u32>> {
    let params: Vec<SamplingParams> = prompts.iter().map(|_| SamplingParams::greedy(10)).collect();
    let mut rngs: Vec<SeededRng> = prompts.iter().map(|_| SeededRng::new(0)).collect();
    m.generate(prompts, &params, &mut rngs, 0, None)
        .unwrap()
        .into_iter()
        .map(|g| g.ids)
        .collect()
}

async fn served(policy: &TchPolicy, prompts: &[Vec<u32>]) -> Vec<Vec<u32>> {
    let reqs = prompts
        .iter()
        .map(|p| GenerationRequest::new(p.clone(), SamplingParams::greedy(10)))
        .collect();
    policy
        .generate(reqs)
        .await
        .unwrap()
        .into_iter()
        .map(|g| g.ids)
        .collect()
}

#[tokio::test]
async fn tch_policy_serves_a_lora_llama_and_takes_adapter_updates() {
    let prompts = vec![vec![1u32, 5, 9], vec![7u32, 3, 3, 8, 20]];
    let cfg = all_targets(4, 8.0);
    // The learner's model, and an identically built copy for the rollout thread.
    let (vs, mut m) = tiny(6);
    m.attach_lora(&vs, &cfg).unwrap();
    let (mut vs_copy, mut copy) = tiny(6);
    copy.attach_lora(&vs_copy, &cfg).unwrap();
    vs_copy.copy(&vs).unwrap();
    let policy = TchPolicy::spawn(vs_copy, copy, 8, 0).unwrap();
    assert_eq!(served(&policy, &prompts).await, greedy(&m, &prompts));

    // Only the adapters travel: the served model then generates what the learner's does.
    randomise_b(&vs);
    let changed = greedy(&m, &prompts);
    let update = adapter_weights(&vs);
    assert!(update.iter().all(|(n, _)| is_adapter_name(n)));
    policy.set_weights(update, 1).await.unwrap();
    assert_eq!(policy.version(), 1);
    assert_eq!(served(&policy, &prompts).await, changed);
}

#[test]
#[ignore = "needs the SmolLM2-135M-Instruct GGUF in AGENTRL_SMOLLM2_GGUF"]
fn smollm2_lora_trains_adapters_only() {
    let path = std::env::var("AGENTRL_SMOLLM2_GGUF").expect("set AGENTRL_SMOLLM2_GGUF");
    tch::manual_seed(0);
    let (vs, mut m, _) = Llama::load_gguf(&path, Device::Cpu).unwrap();
    let seq = Tensor::from_slice(&[1i64, 9690, 198, 504, 3575, 282, 4649, 314, 7042, 30, 2])
        .view([1, -1]);
    let before = tch::no_grad(|| m.logits(&seq));
    m.attach_lora(&vs, &LoraConfig::new(8, 16.0)).unwrap();
    assert_eq!(max_diff(&before, &tch::no_grad(|| m.logits(&seq))), 0.0);
    let embed = vs.variables()["model.embed_tokens.weight"].copy();
    let mut opt = nn::adamw(0.9, 0.95, 0.0).build(&vs, 1e-3).unwrap();
    let loss = |m: &Llama| -m.token_logprobs(&seq, 1.0).0.mean(Kind::Float);
    let l0 = loss(&m).double_value(&[]);
    for _ in 0..5 {
        opt.zero_grad();
        loss(&m).backward();
        opt.step();
    }
    let l1 = tch::no_grad(|| loss(&m)).double_value(&[]);
    assert!(l1 < l0, "{l0} -> {l1}");
    assert!(vs.variables()["model.embed_tokens.weight"].equal(&embed));
    // 30 layers x 4 attention projections x (A, B).
    assert_eq!(adapter_weights(&vs).len(), 240);
}

/// `adapter_config.json` exactly as PEFT 0.21.2 writes it for `LoraConfig(r=8, lora_alpha=16,
/// target_modules=["q_proj", "v_proj"], lora_dropout=0.05, task_type="CAUSAL_LM")`.
const PEFT_0_21_CONFIG: &str = r#"{
  "alora_invocation_tokens": null, "alpha_pattern": {}, "arrow_config": null,
  "auto_mapping": null, "base_model_name_or_path": null, "bias": "none", "corda_config": null,
  "ensure_weight_tying": false, "eva_config": null, "exclude_modules": null,
  "fan_in_fan_out": false, "inference_mode": false, "init_lora_weights": true,
  "kasa_config": null, "layer_replication": null, "layers_pattern": null,
  "layers_to_transform": null, "loftq_config": {}, "lora_alpha": 16, "lora_bias": false,
  "lora_dropout": 0.05, "lora_ga_config": null, "megatron_config": null,
  "megatron_core": "megatron.core", "modules_to_save": null, "monteclora_config": null,
  "peft_type": "LORA", "peft_version": "0.21.2", "qalora_group_size": 16, "r": 8,
  "rank_pattern": {}, "revision": null, "target_modules": ["q_proj", "v_proj"],
  "target_parameters": null, "task_type": "CAUSAL_LM", "trainable_token_indices": null,
  "use_bdlora": null, "use_dora": false, "use_qalora": false, "use_rslora": false,
  "velora_config": null
}"#;

/// Reads `PEFT_0_21_CONFIG` with `key` set to `value` (JSON).
fn read_with(key: &str, value: &str) -> agentrl_core::Result<LoraConfig> {
    let mut config: serde_json::Value = serde_json::from_str(PEFT_0_21_CONFIG).unwrap();
    config[key] = serde_json::from_str(value).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(ADAPTER_CONFIG_FILE), config.to_string()).unwrap();
    read_peft_config(dir.path())
}

#[test]
fn adapter_configs_of_current_peft_load_and_what_plain_lora_cannot_compute_is_refused() {
    let plain = read_with("r", "8").unwrap();
    assert_eq!(plain.r, 8);
    assert_eq!(plain.alpha, 16.0);
    assert_eq!(plain.targets, ["q_proj", "v_proj"]);
    // rsLoRA scales by alpha / sqrt(r): the same update as alpha * sqrt(8) over r.
    let rs = read_with("use_rslora", "true").unwrap();
    assert!(
        (rs.scale() - 16.0 / 8f64.sqrt()).abs() < 1e-12,
        "{}",
        rs.scale()
    );
    assert_eq!(
        read_with("target_modules", "\"all-linear\"")
            .unwrap()
            .targets,
        TARGET_MODULES
    );
    let e = read_with("target_modules", "\".*\\\\.q_proj\"")
        .unwrap_err()
        .to_string();
    assert!(e.contains("target_modules") && e.contains("q_proj"), "{e}");
    for (key, value) in [
        ("use_dora", "true"),
        ("lora_bias", "true"),
        ("bias", "\"all\""),
        ("rank_pattern", "{\"q_proj\": 4}"),
        ("alpha_pattern", "{\"v_proj\": 32}"),
        ("layers_to_transform", "[0]"),
        ("modules_to_save", "[\"lm_head\"]"),
        ("trainable_token_indices", "[5, 6]"),
        ("exclude_modules", "[\"model.layers.0.self_attn.q_proj\"]"),
    ] {
        let e = read_with(key, value).unwrap_err().to_string();
        assert!(
            e.contains(key) && e.contains(ADAPTER_CONFIG_FILE),
            "{key}: {e}"
        );
    }
    // Unset in any of the spellings PEFT writes.
    for (key, value) in [
        ("modules_to_save", "[]"),
        ("use_dora", "null"),
        ("bias", "\"none\""),
    ] {
        read_with(key, value).unwrap();
    }
    let e = read_with("peft_type", "\"IA3\"").unwrap_err().to_string();
    assert!(e.contains("IA3"), "{e}");
}
