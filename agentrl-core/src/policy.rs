//! The policy contract: batched, async generation over token ids.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::Result;

/// Token id type used throughout AgentRL.
pub type TokenId = u32;

/// How to sample: low temperature to decide, higher to explore.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SamplingParams {
    /// Softmax temperature; `0` means greedy.
    pub temperature: f32,
    /// Nucleus sampling mass in `(0, 1]`; `1` disables it.
    pub top_p: f32,
    /// Keep only the `top_k` most likely tokens; `0` disables it.
    pub top_k: usize,
    /// Maximum number of tokens to generate.
    pub max_new_tokens: usize,
    /// Generation stops after any of these ids (the stop id is kept in the output).
    pub stop_ids: Vec<TokenId>,
    /// Generation stops once the generated text contains any of these strings. The token that
    /// completes the match is kept in the output ids (token-exact trajectories); cutting the
    /// text at the match is the caller's choice ([`Generation::matched_stop`] names it).
    pub stop: Vec<String>,
    /// Seed for reproducible sampling; `None` draws from the backend's generator.
    pub seed: Option<u64>,
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams {
            temperature: 1.0,
            top_p: 1.0,
            top_k: 0,
            max_new_tokens: 64,
            stop_ids: Vec::new(),
            stop: Vec::new(),
            seed: None,
        }
    }
}

impl SamplingParams {
    /// Greedy decoding (temperature 0), as used for evaluation.
    pub fn greedy(max_new_tokens: usize) -> Self {
        SamplingParams {
            temperature: 0.0,
            max_new_tokens,
            ..Self::default()
        }
    }

    /// Checks that the values make sense; the error names the bad field.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(crate::Error::Config(format!("sampling params: {m}")));
        if !(self.temperature >= 0.0 && self.temperature.is_finite()) {
            return bad(format!(
                "temperature must be >= 0, got {}",
                self.temperature
            ));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return bad(format!("top_p must be in (0, 1], got {}", self.top_p));
        }
        if self.max_new_tokens == 0 {
            return bad("max_new_tokens must be at least 1".into());
        }
        if let Some(i) = self.stop.iter().position(String::is_empty) {
            return bad(format!(
                "stop string {i} is empty (it would match before any text)"
            ));
        }
        Ok(())
    }
}

/// One prompt to continue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GenerationRequest {
    /// The exact prompt token ids.
    pub prompt_ids: Vec<TokenId>,
    /// How to sample.
    pub params: SamplingParams,
    /// Which conversation (env session / episode) this turn belongs to, when known; routers keep
    /// a session's turns on one backend and cross-policy sampling draws per session turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
}

impl GenerationRequest {
    /// A request without a session id.
    pub fn new(prompt_ids: Vec<TokenId>, params: SamplingParams) -> Self {
        GenerationRequest {
            prompt_ids,
            params,
            session: None,
        }
    }

    /// The same request tagged with the session it belongs to.
    pub fn with_session(mut self, session: impl Into<String>) -> Self {
        self.session = Some(session.into());
        self
    }
}

/// Why generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FinishReason {
    /// A stop id was produced, or the text reached a stop string.
    Stop,
    /// `max_new_tokens` (or the model's context) was reached.
    Length,
}

/// What the policy produced for one request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Generation {
    /// Generated token ids (including the stop id when finish is `Stop`).
    pub ids: Vec<TokenId>,
    /// Sampling log-probability of each generated id, under the sampling distribution's model
    /// (temperature-free logits), aligned with `ids`.
    pub logprobs: Vec<f32>,
    /// Why it ended.
    pub finish: FinishReason,
    /// The stop string whose match ended generation (finish is then `Stop`); `None` when a stop
    /// id or the length limit ended it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matched_stop: Option<String>,
    /// Version of the weights that produced it.
    pub policy_version: u64,
    /// Name of the policy that produced it, when several are mixed (e.g. by cross-policy
    /// sampling); recorded as the turn's `policy_name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_name: Option<String>,
}

impl Generation {
    /// Nothing generated yet by weights `policy_version`: no ids, finish `Length` (what a
    /// prompt with no room left in the context gets).
    pub fn empty(policy_version: u64) -> Self {
        Generation {
            ids: Vec::new(),
            logprobs: Vec::new(),
            finish: FinishReason::Length,
            matched_stop: None,
            policy_version,
            policy_name: None,
        }
    }
}

/// A language model that continues token sequences, many at a time.
#[async_trait]
pub trait Policy: Send + Sync {
    /// Continues every request; the output is aligned with the input.
    async fn generate(&self, requests: Vec<GenerationRequest>) -> Result<Vec<Generation>>;

    /// The version of the weights currently used for generation.
    fn version(&self) -> u64;

    /// Tells the policy that `session` (see [`GenerationRequest::session`]) has ended, so it can
    /// free what it kept for the session's next turn. The default keeps nothing and does
    /// nothing.
    fn end_session(&self, _session: &str) {}
}
