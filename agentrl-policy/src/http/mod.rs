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
pub use client::HttpPolicy;
pub use config::{ApiFlavor, HttpPolicyConfig};

/// The HTTP header that carries [`agentrl_core::GenerationRequest::session`]: servers that know
/// it (`agentrl serve`) keep the session's keys and values between its turns; others ignore it.
pub const SESSION_HEADER: &str = "x-session-id";

/// The request header carrying a weight file's SHA-256 (64 lowercase or uppercase hex digits)
/// when a trainer uploads it to `agentrl serve`.
pub const CHECKSUM_HEADER: &str = "x-content-sha256";

/// Lowercase hex of `bytes` (a [`CHECKSUM_HEADER`] value from a digest).
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
