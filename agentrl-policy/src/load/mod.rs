//! Loading models to run, train or serve: Llama-family models with their chat format from a
//! llama.cpp `.gguf` file or a Hugging Face directory ([`pretrained`]), and AgentRL's own
//! `TinyGpt` checkpoints, whose shape comes from the run's `config.toml` ([`tiny`]).

pub mod pretrained;
pub mod tiny;

pub use pretrained::{is_gguf, load_llama, model_name};
#[cfg(feature = "hf")]
pub use pretrained::{load_chat_format, load_llama_chat};
pub use tiny::{
    is_agentrl_checkpoint, load_tiny, read_tiny_shape, tiny_shape_from_toml, tiny_weights_file,
};
