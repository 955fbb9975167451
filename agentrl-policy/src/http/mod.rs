//! Policies behind HTTP: [`HttpPolicy`] drives an OpenAI-compatible server (vLLM's
//! `/v1/completions`, SGLang's `/generate`, or `agentrl serve`) token in / token out, with
//! timeouts, retries with exponential backoff and a concurrency limit, plus a chat-completions
//! helper ([`HttpPolicy::chat`]) for callers that do not need token-exactness.
//!
//! Plain `http://` works out of the box; `https://` needs reqwest's TLS, which any crate in the
//! build can switch on (`reqwest = { version = "0.13", features = ["rustls"] }`).

mod chat;
mod client;
mod config;
mod wire;

pub use chat::ChatReply;

/// The HTTP header that carries [`agentrl_core::GenerationRequest::session`]: servers that know
/// it (`agentrl serve`) keep the session's keys and values between its turns; others ignore it.
pub const SESSION_HEADER: &str = "x-session-id";
pub use client::HttpPolicy;
pub use config::{ApiFlavor, HttpPolicyConfig};
