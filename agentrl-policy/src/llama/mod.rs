//! Llama-family decoders (Llama 2/3, Qwen2, SmolLM2, ...) loaded from Hugging Face checkpoints.
//!
//! [`LlamaConfig`] reads a `config.json`; with the `tch` feature, [`Llama`] builds the decoder
//! with variables named exactly like the checkpoint's tensors, [`Llama::load`] fills them from
//! `model.safetensors` or sharded weights ([`Llama::load_gguf`] from llama.cpp GGUF files, and
//! [`Llama::save_gguf`] writes them back), and the model offers training logits, token
//! log-probabilities and batched KV-cache generation like `TinyGpt`, in f32 or bf16
//! ([`Dtype`], [`Llama::set_dtype`]).

#[cfg(feature = "tch")]
pub mod adapters;
pub mod config;
pub mod dtype;
pub mod gguf_load;
#[cfg(feature = "tch")]
pub mod gguf_save;
#[cfg(feature = "tch")]
pub mod load;
#[cfg(feature = "tch")]
pub mod lora;
#[cfg(feature = "tch")]
pub mod model;
#[cfg(feature = "tch")]
pub mod peft;
pub mod rope;

pub use config::LlamaConfig;
pub use dtype::Dtype;
pub use gguf_load::gguf_config;
#[cfg(feature = "tch")]
pub use gguf_save::{GgufPrecision, gguf_metadata, tokenizer_metadata};
#[cfg(feature = "tch")]
pub use load::{CheckpointPaths, load_weights};
#[cfg(feature = "tch")]
pub use lora::{LoraConfig, TARGET_MODULES, is_adapter_name};
#[cfg(feature = "tch")]
pub use model::Llama;
#[cfg(feature = "tch")]
pub use peft::{
    ADAPTER_CONFIG_FILE, ADAPTER_WEIGHTS_FILE, adapter_weights, load_adapter_weights,
    read_peft_config, save_adapters,
};
pub use rope::{RopeFrequencies, RopeScaling, rope_frequencies};
