//! Tiny random Llama models saved as GGUF with a GPT-2 style vocabulary and a ChatML template
//! in their metadata, for the `agentrl chat` and `agentrl serve` tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use agentrl_policy::llama::{GgufPrecision, Llama, LlamaConfig};
use tch::{Device, nn};

#[path = "seeded_init.rs"]
mod seeded_init;
#[path = "tiny_vocab.rs"]
pub mod tiny_vocab;

/// Writes a one-layer random Llama with the tiny vocabulary as `tiny-chat.gguf`; returns its path.
pub fn write_tiny_model(dir: &Path) -> PathBuf {
    write_tiny_model_named(dir, "tiny-chat.gguf", 17)
}

/// Writes a one-layer random Llama (initialised from `seed`) as `dir/name`; returns its path.
pub fn write_tiny_model_named(dir: &Path, name: &str, seed: u64) -> PathBuf {
    let config = LlamaConfig::from_json_str(
        &format!(
            r#"{{"model_type": "llama", "hidden_size": 32, "intermediate_size": 48,
            "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
            "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "vocab_size": {},
            "max_position_embeddings": 128, "tie_word_embeddings": false}}"#,
            tiny_vocab::tiny_vocab().0.len()
        ),
        name,
    )
    .expect("the tiny config is valid");
    let vs = nn::VarStore::new(Device::Cpu);
    let model = Llama::new(&vs.root(), config).expect("the tiny model builds");
    seeded_init::fill_from_seed(&vs, seed);
    let path = dir.join(name);
    model
        .save_gguf(
            &vs,
            &path,
            GgufPrecision::F32,
            &tiny_vocab::tokenizer_meta(),
        )
        .expect("the tiny model saves");
    path
}
