//! Hugging Face chat stacks: a `tokenizer.json` tokenizer ([`HfTokenizer`]), Jinja chat templates
//! from `tokenizer_config.json` ([`ChatTemplate`]), Hermes/Qwen and Llama 3 tool-call parsers
//! ([`parse_tool_calls`]) and [`HfChatFormat`], a [`crate::ChatFormat`] built on top of them.
//! Tokenizer and template can also be rebuilt from a GGUF file's metadata
//! ([`HfTokenizer::from_gguf`], [`ChatTemplate::from_gguf`]). Tokenizer, templates and
//! `HfChatFormat` need the `hf` feature (on by default); the parsers do not.

#[cfg(feature = "hf")]
mod format;
mod generation;
#[cfg(feature = "hf")]
mod gguf_spm;
#[cfg(feature = "hf")]
mod gguf_tokenizer;
#[cfg(feature = "hf")]
mod template;
#[cfg(feature = "hf")]
mod tokenizer;
mod tool_parse;

#[cfg(feature = "hf")]
pub use format::HfChatFormat;
pub use generation::{GENERATION_CONFIG_FILE, GenerationDefaults};
#[cfg(feature = "hf")]
pub use gguf_tokenizer::GGUF_PRE_TOKENIZERS;
#[cfg(feature = "hf")]
pub use template::{ChatTemplate, TEMPLATE_JINJA_FILE, TEMPLATE_JSON_FILE, TOKENIZER_CONFIG_FILE};
#[cfg(feature = "hf")]
pub use tokenizer::HfTokenizer;
pub use tool_parse::{
    PYTHON_TAG, ParsedToolCalls, TOOL_CALL_CLOSE, TOOL_CALL_OPEN, parse_hermes_tool_calls,
    parse_llama3_tool_calls, parse_tool_calls,
};

/// What can go wrong while loading or using a Hugging Face tokenizer or chat template.
#[derive(Debug, thiserror::Error)]
pub enum HfError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// `tokenizer.json` could not be parsed or the tokenizer failed.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// `tokenizer_config.json` is not valid or lacks a chat template.
    #[error("tokenizer config: {0}")]
    Config(String),
    /// The chat template failed to compile or to render.
    #[error("chat template: {0}")]
    Template(String),
    /// The template does not behave as the chat format needs (e.g. renders are not prefixes).
    #[error("chat format: {0}")]
    Format(String),
}
