//! Settings of an [`super::HttpPolicy`]: which API it speaks, timeouts, retries, concurrency.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Which API the server speaks for token-level generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApiFlavor {
    /// `POST /v1/completions` with token-id prompts, `logprobs` and vLLM's
    /// `return_tokens_as_token_ids` (vLLM, `agentrl serve`).
    #[default]
    OpenAiCompletions,
    /// SGLang's native `POST /generate` with `input_ids` and `return_logprob`.
    SglangGenerate,
}

/// Settings of an [`super::HttpPolicy`].
#[derive(Debug, Clone, PartialEq)]
pub struct HttpPolicyConfig {
    /// Server root, e.g. `http://127.0.0.1:8000` (a trailing `/v1` is accepted and dropped).
    pub base_url: String,
    /// Model name sent in every request.
    pub model: String,
    /// Which generation API to use.
    pub flavor: ApiFlavor,
    /// Longest wait for one HTTP request (connect, generation, answer).
    pub request_timeout: Duration,
    /// Longest wait for a connection.
    pub connect_timeout: Duration,
    /// Retries after the first attempt on connect errors, HTTP 5xx and 429 (never on other 4xx,
    /// nor after a request timed out: the server may still be generating it).
    pub max_retries: u32,
    /// Wait before the first retry; doubled after each retry.
    pub initial_backoff: Duration,
    /// Cap of the wait between retries.
    pub max_backoff: Duration,
    /// Most HTTP requests in flight at once from this policy.
    pub max_concurrency: usize,
    /// Ask the server not to stop at the model's end-of-sequence id, so generation stops only
    /// at the request's stop ids, as the [`agentrl_core::Policy`] contract says.
    pub ignore_eos: bool,
    /// Sent as `Authorization: Bearer KEY` when set.
    pub api_key: Option<String>,
    /// Name recorded on every generation (`Generation::policy_name`), when set.
    pub name: Option<String>,
    /// Tell the server when a session's conversation is over (`DELETE /v1/sessions/{id}`), so
    /// it frees the keys and values it kept for the session's next turn. `agentrl serve`
    /// answers it; vLLM and SGLang do not, so it is off by default.
    pub end_sessions: bool,
}

impl HttpPolicyConfig {
    /// Defaults for a server at `base_url` serving `model`: OpenAI completions, 300 s request
    /// and 5 s connect timeouts, 4 retries from 200 ms up to 5 s, 64 requests in flight.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        HttpPolicyConfig {
            base_url: base_url.into(),
            model: model.into(),
            flavor: ApiFlavor::OpenAiCompletions,
            request_timeout: Duration::from_secs(300),
            connect_timeout: Duration::from_secs(5),
            max_retries: 4,
            initial_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(5),
            max_concurrency: 64,
            ignore_eos: true,
            api_key: None,
            name: None,
            end_sessions: false,
        }
    }
}
