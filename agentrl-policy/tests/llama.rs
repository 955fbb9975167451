//! The Llama-family decoder: Hugging Face configs parse, checkpoints load from one file or
//! shards with the Hugging Face tensor names, cached generation matches the full forward.
#![cfg(feature = "tch")]

use std::path::Path;

use agentrl_core::{SamplingParams, SeededRng};
use agentrl_policy::PolicyModel;
use agentrl_policy::llama::{Llama, LlamaConfig};
use tch::{Device, Kind, Tensor, nn};

mod common;
use common::{ids, max_diff, random_llama, save_single};

const LLAMA3: &str = r#"{
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": 128001, "hidden_act": "silu", "hidden_size": 4096,
  "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 8192,
  "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32,
  "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": null,
  "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.40.0.dev0", "use_cache": true, "vocab_size": 128256
}"#;

const QWEN2: &str = r#"{
  "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
  "eos_token_id": 151645, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
  "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 21,
  "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24,
  "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
  "sliding_window": 32768, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "transformers_version": "4.43.1", "use_cache": true, "use_sliding_window": false,
  "vocab_size": 151936
}"#;

const SMOLLM2: &str = r#"{
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 0, "eos_token_id": 0, "hidden_act": "silu", "hidden_size": 576,
  "initializer_range": 0.041666666666666664, "intermediate_size": 1536, "is_llama_config": true,
  "max_position_embeddings": 8192, "model_type": "llama", "num_attention_heads": 9,
  "num_hidden_layers": 30, "num_key_value_heads": 3, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_interleaved": false, "rope_scaling": null, "rope_theta": 100000,
  "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.42.3",
  "use_cache": true, "vocab_size": 49152
}"#;

fn tiny_json(tied: bool, model_type: &str) -> String {
    format!(
        r#"{{"model_type": "{model_type}", "hidden_size": 32, "intermediate_size": 48,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "vocab_size": 64,
        "max_position_embeddings": 64, "tie_word_embeddings": {tied}, "hidden_act": "silu"}}"#
    )
}

/// A tiny model of `model_type` with every variable (norms and biases included) randomised,
/// and its `config.json`.
fn tiny(seed: i64, tied: bool, model_type: &str) -> (nn::VarStore, Llama, String) {
    let json = tiny_json(tied, model_type);
    let (vs, m) = random_llama(seed, &json);
    (vs, m, json)
}

fn save_sharded(vs: &nn::VarStore, json: &str, dir: &Path, drop: Option<&str>) {
    std::fs::write(dir.join("config.json"), json).unwrap();
    let mut vars: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
    vars.sort_by(|a, b| a.0.cmp(&b.0));
    let half = vars.len() / 2;
    let mut map = serde_json::Map::new();
    for (k, part) in [&vars[..half], &vars[half..]].iter().enumerate() {
        let file = format!("model-{:05}-of-00002.safetensors", k + 1);
        let kept: Vec<(String, Tensor)> = part
            .iter()
            .filter(|(n, _)| Some(n.as_str()) != drop)
            .map(|(n, t)| {
                (
                    n.clone(),
                    t.detach().to_kind(Kind::BFloat16).to_kind(Kind::Float),
                )
            })
            .collect();
        for (n, _) in part.iter() {
            map.insert(n.clone(), serde_json::Value::String(file.clone()));
        }
        Tensor::write_safetensors(&kept, dir.join(&file)).unwrap();
    }
    // An extra tensor that the model does not use is ignored.
    let extra = [(
        "model.rotary_emb.inv_freq".to_string(),
        Tensor::ones([4], (Kind::Float, Device::Cpu)),
    )];
    Tensor::write_safetensors(&extra, dir.join("extra.safetensors")).unwrap();
    map.insert(
        "model.rotary_emb.inv_freq".into(),
        serde_json::Value::String("extra.safetensors".into()),
    );
    let index = serde_json::json!({"metadata": {"total_size": 0}, "weight_map": map});
    std::fs::write(
        dir.join("model.safetensors.index.json"),
        serde_json::to_string_pretty(&index).unwrap(),
    )
    .unwrap();
}

#[test]
fn real_configs_parse() {
    let l3 = LlamaConfig::from_json_str(LLAMA3, "llama3").unwrap();
    assert_eq!(l3.kv_heads(), 8);
    assert_eq!(l3.head_size(), 128);
    assert_eq!(l3.rope_theta, 500_000.0);
    assert!(!l3.tie_word_embeddings && !l3.qkv_bias() && !l3.o_bias());
    let q = LlamaConfig::from_json_str(QWEN2, "qwen2").unwrap();
    assert!(q.qkv_bias() && !q.o_bias() && q.tie_word_embeddings);
    assert_eq!((q.head_size(), q.kv_heads()), (64, 2));
    let s = LlamaConfig::from_json_str(SMOLLM2, "smollm2").unwrap();
    assert!(s.tie_word_embeddings && !s.qkv_bias());
    assert_eq!((s.head_size(), s.kv_heads(), s.vocab_size), (64, 3, 49152));
    // Defaults: kv heads = heads, rope_theta 10000, untied.
    let minimal = r#"{"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
        "num_attention_heads": 4, "vocab_size": 10, "max_position_embeddings": 16}"#;
    let m = LlamaConfig::from_json_str(minimal, "minimal").unwrap();
    assert_eq!((m.kv_heads(), m.rope_theta), (4, 10_000.0));
    assert!(!m.tie_word_embeddings);
}

#[test]
fn invalid_configs_are_rejected_with_the_field() {
    let e = LlamaConfig::from_json_str(
        &LLAMA3.replace("\"num_key_value_heads\": 8", "\"num_key_value_heads\": 5"),
        "c.json",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("c.json") && e.contains("num_key_value_heads"),
        "{e}"
    );
    let e = LlamaConfig::from_json_str(
        &LLAMA3.replace("\"hidden_size\": 4096", "\"hidden_size\": 4001"),
        "c.json",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("hidden_size"), "{e}");
    let e = LlamaConfig::from_json_str(
        &LLAMA3.replace(
            "\"rope_scaling\": null",
            "\"rope_scaling\": {\"type\": \"longrope\", \"factor\": 4}",
        ),
        "c.json",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("longrope") && e.contains("c.json"), "{e}");
    assert!(LlamaConfig::from_json_str("{\"hidden_size\": 4}", "c.json").is_err());
}

#[test]
fn llama31_rope_scaling_keeps_high_and_scales_low_frequencies() {
    let json = LLAMA3.replace(
        "\"rope_scaling\": null",
        r#""rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192, "rope_type": "llama3"}"#,
    );
    let c = LlamaConfig::from_json_str(&json, "llama3.1").unwrap();
    let plain = LlamaConfig::from_json_str(LLAMA3, "llama3")
        .unwrap()
        .inv_freq();
    let scaled = c.inv_freq();
    assert_eq!(scaled[0], plain[0]);
    let last = plain.len() - 1;
    assert!((scaled[last] - plain[last] / 8.0).abs() < 1e-15);
}

#[test]
fn variables_carry_hugging_face_names() {
    let (vs, _, _) = tiny(0, false, "qwen2");
    let vars = vs.variables();
    for name in [
        "model.embed_tokens.weight",
        "model.layers.0.self_attn.q_proj.weight",
        "model.layers.0.self_attn.q_proj.bias",
        "model.layers.1.self_attn.k_proj.bias",
        "model.layers.1.self_attn.v_proj.weight",
        "model.layers.1.self_attn.o_proj.weight",
        "model.layers.0.mlp.gate_proj.weight",
        "model.layers.0.mlp.up_proj.weight",
        "model.layers.0.mlp.down_proj.weight",
        "model.layers.0.input_layernorm.weight",
        "model.layers.0.post_attention_layernorm.weight",
        "model.norm.weight",
        "lm_head.weight",
    ] {
        assert!(
            vars.contains_key(name),
            "{name} missing from {:?}",
            vars.keys()
        );
    }
    assert!(!vars.contains_key("model.layers.0.self_attn.o_proj.bias"));
    assert_eq!(vars.len(), 1 + 2 * 12 + 1 + 1);
    assert_eq!(
        vars["model.layers.0.self_attn.k_proj.weight"].size(),
        [16, 32]
    );
    let (vs, _, _) = tiny(0, true, "llama");
    let vars = vs.variables();
    assert!(!vars.contains_key("lm_head.weight"));
    assert!(!vars.contains_key("model.layers.0.self_attn.q_proj.bias"));
}

#[test]
fn single_file_and_shards_load_to_the_same_logits() {
    for (tied, kind) in [(false, "llama"), (true, "qwen2")] {
        let (vs, m, json) = tiny(3, tied, kind);
        // Round through bf16 so both checkpoints hold the same values.
        tch::no_grad(|| {
            for (_, mut v) in vs.variables() {
                let r = v.to_kind(Kind::BFloat16).to_kind(Kind::Float);
                v.copy_(&r);
            }
        });
        let want = tch::no_grad(|| m.logits(&ids()));
        assert_eq!(want.size(), [2, 7, 64]);
        let single = tempfile::tempdir().unwrap();
        save_single(&vs, &json, single.path());
        let sharded = tempfile::tempdir().unwrap();
        save_sharded(&vs, &json, sharded.path(), None);
        let (_, a) = Llama::load(single.path(), Device::Cpu).unwrap();
        let (_, b) = Llama::load(sharded.path(), Device::Cpu).unwrap();
        let (_, c) = Llama::load(single.path().join("model.safetensors"), Device::Cpu).unwrap();
        let (la, lb, lc) = tch::no_grad(|| (a.logits(&ids()), b.logits(&ids()), c.logits(&ids())));
        assert_eq!(max_diff(&la, &want), 0.0);
        assert_eq!(max_diff(&lb, &want), 0.0);
        assert_eq!(max_diff(&lc, &want), 0.0);
    }
}

#[test]
fn a_missing_tensor_is_named_with_its_file() {
    let (vs, _, json) = tiny(4, false, "llama");
    let dir = tempfile::tempdir().unwrap();
    let name = "model.layers.1.mlp.up_proj.weight";
    save_sharded(&vs, &json, dir.path(), Some(name));
    let e = Llama::load(dir.path(), Device::Cpu)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(name) && e.contains("-of-00002.safetensors"),
        "{e}"
    );
    // Missing from the index itself.
    let index = dir.path().join("model.safetensors.index.json");
    let text = std::fs::read_to_string(&index).unwrap();
    std::fs::write(
        &index,
        text.replace("\"model.norm.weight\"", "\"model.norm.other\""),
    )
    .unwrap();
    let e = Llama::load(dir.path(), Device::Cpu)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("model.norm.weight") && e.contains("index.json"),
        "{e}"
    );
    // A single file without the head.
    let single = tempfile::tempdir().unwrap();
    std::fs::write(single.path().join("config.json"), &json).unwrap();
    let kept: Vec<(String, Tensor)> = vs
        .variables()
        .into_iter()
        .filter(|(n, _)| n != "lm_head.weight")
        .collect();
    Tensor::write_safetensors(&kept, single.path().join("model.safetensors")).unwrap();
    let e = Llama::load(single.path(), Device::Cpu)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("lm_head.weight") && e.contains("model.safetensors"),
        "{e}"
    );
    // The same file is complete for a tied config.
    std::fs::write(single.path().join("config.json"), tiny_json(true, "llama")).unwrap();
    assert!(Llama::load(single.path(), Device::Cpu).is_ok());
    // A wrong shape is named too.
    let mut bad = kept;
    for (n, t) in bad.iter_mut() {
        if n == "model.norm.weight" {
            *t = Tensor::ones([31], (Kind::Float, Device::Cpu));
        }
    }
    Tensor::write_safetensors(&bad, single.path().join("model.safetensors")).unwrap();
    let e = Llama::load(single.path(), Device::Cpu)
        .unwrap_err()
        .to_string();
    assert!(e.contains("model.norm.weight") && e.contains("[31]"), "{e}");
    let empty = tempfile::tempdir().unwrap();
    let e = Llama::load(empty.path(), Device::Cpu)
        .unwrap_err()
        .to_string();
    assert!(e.contains("model.safetensors"), "{e}");
}

#[test]
fn tied_head_uses_the_embedding_matrix() {
    let (vs, m, _) = tiny(5, true, "llama");
    let vars = vs.variables();
    let x = tch::no_grad(|| m.logits(&ids()));
    // Perturbing the embedding moves the logits of every position, also through the head.
    let emb = &vars["model.embed_tokens.weight"];
    let (_, untied, _) = tiny(5, false, "llama");
    let y = tch::no_grad(|| untied.logits(&ids()));
    assert!(max_diff(&x, &y) > 1e-3);
    tch::no_grad(|| {
        let mut e = emb.shallow_clone();
        let _ = e.g_mul_scalar_(2.0);
    });
    let z = tch::no_grad(|| m.logits(&ids()));
    assert!(max_diff(&x, &z) > 1e-3);
}

#[test]
fn cached_generation_logprobs_equal_the_full_forward() {
    for kind in ["llama", "qwen2"] {
        let (_vs, m, _) = tiny(6, false, kind);
        let prompt = vec![1u32, 5, 7, 9];
        let g = m
            .generate(
                std::slice::from_ref(&prompt),
                &[SamplingParams::greedy(12)],
                &mut [SeededRng::new(1)],
                7,
                None,
            )
            .unwrap()
            .remove(0);
        assert_eq!(g.ids.len(), 12);
        assert_eq!(g.policy_version, 7);
        let all: Vec<i64> = prompt
            .iter()
            .chain(g.ids.iter())
            .map(|&i| i as i64)
            .collect();
        let seq = Tensor::from_slice(&all).view([1, -1]);
        let (lp, ent) = tch::no_grad(|| m.token_logprobs(&seq, 1.0));
        assert_eq!(ent.size(), [1, all.len() as i64 - 1]);
        let lp: Vec<f32> = Vec::try_from(lp.view([-1])).unwrap();
        for (a, b) in lp[prompt.len() - 1..].iter().zip(g.logprobs.iter()) {
            assert!((a - b).abs() < 1e-4, "{a} vs {b}");
        }
    }
}

#[test]
fn left_padding_does_not_change_a_row() {
    let (_vs, m, _) = tiny(7, true, "qwen2");
    let short = vec![3u32, 4];
    let long = vec![1u32, 2, 3, 4, 5, 6, 7, 8, 9];
    let p = SamplingParams::greedy(6);
    let alone = m
        .generate(
            std::slice::from_ref(&short),
            std::slice::from_ref(&p),
            &mut [SeededRng::new(0)],
            0,
            None,
        )
        .unwrap();
    let batched = m
        .generate(
            &[long, short],
            &[p.clone(), p],
            &mut [SeededRng::new(0), SeededRng::new(0)],
            0,
            None,
        )
        .unwrap();
    assert_eq!(alone[0].ids, batched[1].ids);
    for (a, b) in alone[0].logprobs.iter().zip(batched[1].logprobs.iter()) {
        assert!((a - b).abs() < 1e-4);
    }
    let e = m
        .generate(
            &[vec![64]],
            &[SamplingParams::greedy(1)],
            &mut [SeededRng::new(0)],
            0,
            None,
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("outside the vocabulary"), "{e}");
}

#[test]
fn hidden_states_are_what_the_head_projects() {
    let (vs, m, _) = tiny(8, true, "llama");
    let h = tch::no_grad(|| m.hidden_states(&ids()));
    assert_eq!(h.size(), [2, 7, 32]);
    assert_eq!(PolicyModel::hidden_size(&m), 32);
    let embed = &vs.variables()["model.embed_tokens.weight"];
    let logits = tch::no_grad(|| m.logits(&ids()));
    let projected = tch::no_grad(|| h.linear::<Tensor>(embed, None));
    assert!(max_diff(&projected, &logits) < 1e-5);
}

/// A Qwen3-shaped config: explicit `head_dim` (q is wider than the residual stream), no q/k/v
/// biases, per-head q/k RMSNorm, RoPE base 1e6 under transformers 5's `rope_parameters`.
const QWEN3_TINY: &str = r#"{"model_type": "qwen3", "hidden_size": 32, "intermediate_size": 48,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
    "rms_norm_eps": 1e-6, "vocab_size": 64, "max_position_embeddings": 64,
    "tie_word_embeddings": true, "hidden_act": "silu", "attention_bias": false,
    "use_sliding_window": false, "sliding_window": null,
    "layer_types": ["full_attention", "full_attention"],
    "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"}}"#;

/// Writes `tensors` and `config_json` as a single-file checkpoint in `dir`.
fn write_checkpoint(tensors: &[(String, Tensor)], config_json: &str, dir: &Path) {
    std::fs::write(dir.join("config.json"), config_json).unwrap();
    Tensor::write_safetensors(tensors, dir.join("model.safetensors")).unwrap();
}

#[test]
fn a_checkpoint_with_nan_weights_is_refused_naming_the_tensor() {
    let (vs, _) = random_llama(22, QWEN3_TINY);
    let name = "model.layers.0.self_attn.o_proj.weight";
    let tensors: Vec<(String, Tensor)> = vs
        .variables()
        .into_iter()
        .map(|(n, t)| {
            let t = t.detach().copy();
            if n == name {
                let _ = t.flatten(0, -1).get(5).fill_(f64::NAN);
            }
            (n, t)
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    write_checkpoint(&tensors, QWEN3_TINY, dir.path());
    let e = Llama::load(dir.path(), Device::Cpu)
        .unwrap_err()
        .to_string();
    assert!(e.contains(name) && e.contains("model.safetensors"), "{e}");
    assert!(e.contains("1 of") && e.contains("NaN or infinite"), "{e}");
}

#[test]
fn qwen3_q_and_k_norms_are_loaded_and_used() {
    let (vs, model) = random_llama(21, QWEN3_TINY);
    assert_eq!(model.config().rope_theta, 1e6);
    let names: Vec<String> = vs.variables().into_keys().collect();
    assert!(names.contains(&"model.layers.1.self_attn.k_norm.weight".to_string()));
    assert!(
        !names.iter().any(|n| n.ends_with("q_proj.bias")),
        "{names:?}"
    );
    let mut tensors: Vec<(String, Tensor)> = vs
        .variables()
        .into_iter()
        .map(|(n, t)| (n, t.detach().copy()))
        .collect();
    tensors.sort_by(|a, b| a.0.cmp(&b.0));
    let dir = tempfile::tempdir().unwrap();
    write_checkpoint(&tensors, QWEN3_TINY, dir.path());
    let (_vs, loaded) = Llama::load(dir.path(), Device::Cpu).unwrap();
    let original = tch::no_grad(|| loaded.logits(&ids()));
    assert!(max_diff(&original, &tch::no_grad(|| model.logits(&ids()))) < 1e-6);

    // Other q_norm weights in the file give other logits: the norm is read and applied.
    let q_norm = "model.layers.0.self_attn.q_norm.weight";
    let changed: Vec<(String, Tensor)> = tensors
        .iter()
        .map(|(n, t)| {
            let t = if n == q_norm { t * 1.5 + 0.3 } else { t.copy() };
            (n.clone(), t)
        })
        .collect();
    let other = tempfile::tempdir().unwrap();
    write_checkpoint(&changed, QWEN3_TINY, other.path());
    let (_vs, reloaded) = Llama::load(other.path(), Device::Cpu).unwrap();
    let diff = max_diff(&original, &tch::no_grad(|| reloaded.logits(&ids())));
    assert!(
        diff > 1e-3,
        "changing q_norm changed the logits by only {diff}"
    );

    // Without the tensor, the error names it.
    let missing: Vec<(String, Tensor)> = tensors
        .iter()
        .filter(|(n, _)| n != q_norm)
        .map(|(n, t)| (n.clone(), t.copy()))
        .collect();
    let broken = tempfile::tempdir().unwrap();
    write_checkpoint(&missing, QWEN3_TINY, broken.path());
    let e = Llama::load(broken.path(), Device::Cpu)
        .unwrap_err()
        .to_string();
    assert!(e.contains(q_norm), "{e}");
}

#[test]
fn masked_logprobs_equal_the_full_ones_on_the_mask_with_the_same_gradients() {
    let (vs, m, _) = tiny(9, true, "llama");
    let ids = ids();
    // Rows of six next-token positions; the second row's last two are padding.
    let mask = Tensor::from_slice(&[0f32, 0., 1., 1., 1., 1., 0., 1., 1., 0., 0., 0.]).view([2, 6]);
    for (temperature, entropy_grad) in [(1.0, false), (0.7, true)] {
        let (full_lp, full_ent) = m.token_logprobs(&ids, temperature);
        let (lp, ent) = m.masked_token_logprobs(&ids, &mask, temperature, entropy_grad);
        assert!(max_diff(&(&full_lp * &mask), &lp) < 1e-6);
        assert!(max_diff(&(&full_ent * &mask), &ent) < 1e-6);
        assert_eq!(ent.requires_grad(), entropy_grad);
        // The same loss through either path gives the same gradients.
        let grads = |loss: Tensor| gradients_of(&vs, loss);
        let weights = Tensor::from_slice(&[0.5f32, -1.0, 2.0, 0.25, 1.5, -0.75]).view([1, 6]);
        let full = grads((&full_lp * &mask * &weights).sum(Kind::Float));
        let masked = grads((&lp * &weights).sum(Kind::Float));
        for ((name, a), (_, b)) in full.iter().zip(&masked) {
            let scale = a.abs().max().double_value(&[]).max(1.0);
            assert!(
                max_diff(a, b) < 1e-5 * scale,
                "{name}: gradients differ by {} (scale {scale})",
                max_diff(a, b)
            );
        }
    }
    // No position on the mask: zeros, not an error.
    let none = Tensor::zeros([2, 6], (Kind::Float, Device::Cpu));
    let (lp, ent) = m.masked_token_logprobs(&ids, &none, 1.0, false);
    assert_eq!(lp.abs().sum(Kind::Float).double_value(&[]), 0.0);
    assert_eq!(ent.abs().sum(Kind::Float).double_value(&[]), 0.0);
}

#[test]
fn a_shared_prefix_runs_once_with_the_same_logprobs_and_gradients() {
    let (vs, m, _) = tiny(10, false, "llama");
    // Three rows sharing the prefix [1, 5, 9, 12]; the rests are right-padded to 4 ids.
    let prefix = Tensor::from_slice(&[1i64, 5, 9, 12]).view([1, 4]);
    let rest = Tensor::from_slice(&[40i64, 63, 2, 7, 3, 8, 0, 0, 11, 20, 30, 0]).view([3, 4]);
    let mask = Tensor::from_slice(&[1f32, 1., 1., 1., 0., 0., 1., 1., 0.]).view([3, 3]);
    let full = Tensor::cat(&[prefix.expand([3, 4], false), rest.shallow_clone()], 1);
    let full_mask = Tensor::cat(
        &[
            Tensor::zeros([3, 4], (Kind::Float, Device::Cpu)),
            mask.shallow_clone(),
        ],
        1,
    );
    let weights = Tensor::from_slice(&[0.5f32, -1.0, 2.0]).view([1, 3]);
    let grads = |loss: Tensor| gradients_of(&vs, loss);
    for temperature in [1.0, 0.8] {
        let (lp_full, ent_full) = m.masked_token_logprobs(&full, &full_mask, temperature, true);
        let (lp, ent) = m.prefixed_token_logprobs(&prefix, &rest, &mask, temperature, true);
        assert_eq!(lp.size(), [3, 3]);
        assert!(max_diff(&lp_full.narrow(1, 4, 3), &lp) < 1e-5);
        assert!(max_diff(&ent_full.narrow(1, 4, 3), &ent) < 1e-5);
        let want = grads((lp_full.narrow(1, 4, 3) * &weights).sum(Kind::Float));
        let got = grads((&lp * &weights).sum(Kind::Float));
        for ((name, a), (_, b)) in want.iter().zip(&got) {
            let scale = a.abs().max().double_value(&[]).max(1.0);
            assert!(max_diff(a, b) < 1e-5 * scale, "{name}: gradients differ");
        }
    }
}

/// The gradients of `loss` for every variable of `vs`, sorted by name (earlier gradients are
/// zeroed first).
fn gradients_of(vs: &nn::VarStore, loss: Tensor) -> Vec<(String, Tensor)> {
    for v in vs.trainable_variables() {
        let mut g = v.grad();
        if g.defined() {
            let _ = g.zero_();
        }
    }
    loss.backward();
    let mut all: Vec<(String, Tensor)> = vs
        .variables()
        .into_iter()
        .map(|(name, v)| (name, v.grad().copy()))
        .collect();
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all
}
