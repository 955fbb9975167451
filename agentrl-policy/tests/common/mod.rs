//! Shared fixtures of the Llama tests: a tiny random model and a batch of ids.
#![allow(dead_code)]

use agentrl_policy::llama::{Llama, LlamaConfig};
use tch::{Device, Tensor, nn};

/// A two-layer Llama config with grouped-query attention and an untied head.
pub const TINY: &str = r#"{"model_type": "llama", "hidden_size": 32, "intermediate_size": 48,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "vocab_size": 64,
    "max_position_embeddings": 64, "tie_word_embeddings": false, "hidden_act": "silu"}"#;

/// A tiny random Llama of [`TINY`]'s shape (see [`random_llama`]).
pub fn tiny(seed: i64) -> (nn::VarStore, Llama) {
    random_llama(seed, TINY)
}

/// A random Llama of the Hugging Face `config_json` with every variable (norms and biases
/// included) randomised, deterministic for a seed. libtorch's seed is global and tests run in
/// parallel, so seeding and creation happen under one lock.
pub fn random_llama(seed: i64, config_json: &str) -> (nn::VarStore, Llama) {
    let _guard = SEED_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    tch::manual_seed(seed);
    let config = LlamaConfig::from_json_str(config_json, "tiny").unwrap();
    let vs = nn::VarStore::new(Device::Cpu);
    let m = Llama::new(&vs.root(), config).unwrap();
    // In name order: `variables()` is a hash map, and the noise must land the same way each time.
    let mut variables: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
    variables.sort_by(|a, b| a.0.cmp(&b.0));
    tch::no_grad(|| {
        for (_, mut v) in variables {
            let noise = Tensor::randn_like(&v) * 0.2;
            let _ = v.g_add_(&noise);
        }
    });
    (vs, m)
}

/// Held while seeding libtorch's global generator and creating a model from it: tests run in
/// parallel, and another test's seed in between would change the model.
pub static SEED_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Two rows of seven ids.
pub fn ids() -> Tensor {
    Tensor::from_slice(&[1i64, 5, 9, 12, 40, 63, 2, 7, 3, 3, 8, 20, 0, 11]).view([2, 7])
}

/// Writes `vs` and `config_json` as a single-file Hugging Face checkpoint in `dir`.
pub fn save_single(vs: &nn::VarStore, config_json: &str, dir: &std::path::Path) {
    std::fs::write(dir.join("config.json"), config_json).unwrap();
    vs.save(dir.join("model.safetensors")).unwrap();
}

/// The largest absolute difference between two tensors.
pub fn max_diff(a: &Tensor, b: &Tensor) -> f64 {
    (a - b).abs().max().double_value(&[])
}

/// A random TinyGpt (vocabulary 48, width 32, two layers) with a `max_seq_len` context,
/// identical for a seed.
pub fn random_gpt(seed: i64, max_seq_len: usize) -> (nn::VarStore, agentrl_policy::TinyGpt) {
    let _guard = SEED_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    tch::manual_seed(seed);
    let vs = nn::VarStore::new(Device::Cpu);
    let cfg = agentrl_policy::GptConfig {
        vocab_size: 48,
        d_model: 32,
        n_layers: 2,
        n_heads: 4,
        max_seq_len,
        ffn_mult: 2,
        rope_theta: 10_000.0,
    };
    let m = agentrl_policy::TinyGpt::new(&vs.root(), cfg).unwrap();
    (vs, m)
}
