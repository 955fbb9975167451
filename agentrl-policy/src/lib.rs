//! # agentrl-policy
//!
//! Everything between chat messages and a language model: a byte-level [`ByteTokenizer`] with
//! special tokens for roles and tool calls, the [`ChatFormat`] trait with the compact
//! [`TinyChatFormat`] (render prompts, parse generations into assistant messages and tool calls,
//! token-exact across turns), token sampling, remote policies ([`HttpPolicy`] over
//! OpenAI-compatible servers, [`RouterPolicy`] over several of them, [`CrossPolicy`] mixing
//! policies per turn), and — with the default `tch` feature — the [`TinyGpt`] transformer and
//! [`TchPolicy`], an async [`agentrl_core::Policy`] over a continuous-batching engine that keeps
//! each session's keys and values between its turns ([`EngineOptions`], [`EngineStats`]),
//! Llama-family models ([`llama`]),
//! model loading with chat formats and AgentRL's own checkpoints ([`load`], [`checkpoint`]) and
//! the choice of device ([`device`]). The `serve` feature adds the `serve` module: `agentrl
//! serve` (an OpenAI-compatible HTTP server for a model), `agentrl chat` and `agentrl logprobs`,
//! each a clap `Args` struct and a `run` function any binary can call.
//!
//! ```
//! use agentrl_core::{Message, ToolCall};
//! use agentrl_policy::{ChatFormat, TinyChatFormat};
//!
//! let fmt = TinyChatFormat::new();
//! let prompt = fmt.render_prompt(&[Message::user("Compute 6*7")], &[]);
//! let call = ToolCall::new("c0", "calculator", &serde_json::json!({"expression": "6*7"}));
//! let action = Message::assistant_tool_calls(None, vec![call]);
//! let generated = fmt.render_assistant(&action);
//! let parsed = fmt.parse_assistant(&generated, "c");
//! assert_eq!(parsed.error, None);
//! assert_eq!(parsed.message.tool_calls[0].function.name, "calculator");
//! assert!(!prompt.is_empty());
//! ```

#![warn(missing_docs)]

pub mod chat;
pub mod cross;
mod fanout;
#[doc(hidden)]
#[cfg(feature = "hf")]
pub mod fuzzing;
pub mod gguf;
pub mod hf;
pub mod http;
pub mod llama;
pub mod router;
pub mod sampling;
pub mod tokenizer;

#[cfg(feature = "tch")]
pub mod checkpoint;
#[cfg(feature = "tch")]
pub mod decode;
#[cfg(feature = "tch")]
pub mod device;
#[cfg(feature = "tch")]
mod engine;
#[cfg(feature = "tch")]
pub mod gpt;
#[cfg(feature = "tch")]
pub mod load;
#[cfg(feature = "serve")]
pub mod serve;
#[cfg(feature = "tch")]
pub mod tch_policy;
#[cfg(feature = "tch")]
pub mod threads;
#[cfg(feature = "tch")]
mod vocab_head;

pub use chat::{ChatFormat, ParsedAction, TinyChatFormat};
pub use cross::CrossPolicy;
pub use http::{ApiFlavor, HttpPolicy, HttpPolicyConfig};
pub use router::RouterPolicy;
pub use sampling::sample_token;
pub use tokenizer::{ByteTokenizer, SPECIAL_TOKENS, SpecialIds};

#[cfg(feature = "tch")]
pub use decode::{Detokenizer, PolicyModel};
#[cfg(feature = "tch")]
pub use gpt::{GptConfig, TinyGpt};
#[cfg(feature = "tch")]
pub use tch_policy::{
    EngineOptions, EngineStats, GenerationStream, NamedWeights, StreamedToken, TchPolicy,
    WeightsQueued, snapshot_weights,
};
#[cfg(feature = "tch")]
pub use threads::{set_torch_threads, with_torch_threads};
