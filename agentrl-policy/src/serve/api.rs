//! The OpenAI-shaped wire types of `agentrl serve`: request bodies (unknown fields are ignored,
//! as OpenAI-compatible servers do), the error body, and the mapping of request fields to
//! [`SamplingParams`].

use agentrl_core::{Message, SamplingParams, TokenId, ToolSpec};
use axum::Json;
use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// An error answered as OpenAI does: `{"error": {"message", "type", "param", "code"}}`.
#[derive(Debug)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// What was wrong.
    pub message: String,
}

impl ApiError {
    /// A 400 invalid-request error.
    pub fn bad(message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
        }
    }

    /// A 500 server error.
    pub fn internal(message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: message.into(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let kind = if self.status.is_client_error() {
            "invalid_request_error"
        } else {
            "server_error"
        };
        let body = json!({"error": {
            "message": self.message,
            "type": kind,
            "param": Value::Null,
            "code": self.status.as_u16(),
        }});
        (self.status, Json(body)).into_response()
    }
}

/// Largest request body read whole (JSON routes), in bytes: a larger one is a 413. Uploaded
/// weights (`PUT /v1/weights/...`) are streamed and have their own cap.
pub const MAX_BODY_BYTES: usize = 2 << 20;

/// A JSON route's body, read whole up to [`MAX_BODY_BYTES`]; a larger or unreadable body is an
/// OpenAI-shaped error (413 when too large) instead of axum's plain-text rejection.
#[derive(Debug)]
pub struct RequestBody(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for RequestBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        Bytes::from_request(request, state)
            .await
            .map(RequestBody)
            .map_err(|e| ApiError {
                status: e.status(),
                message: format!(
                    "could not read the request body (at most {MAX_BODY_BYTES} bytes): {}",
                    e.body_text()
                ),
            })
    }
}

/// Parses a JSON request body; a bad body is a 400 that says what is wrong. serde_json's
/// recursion limit (128 levels) makes a deeply nested body a 400 too, not a stack overflow.
pub fn parse_body<T: DeserializeOwned>(bytes: &[u8], route: &str) -> Result<T, ApiError> {
    serde_json::from_slice(bytes)
        .map_err(|e| ApiError::bad(format!("{route}: invalid request body: {e}")))
}

/// OpenAI's prompt: a string, strings, token ids, or lists of token ids.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum PromptInput {
    /// One text prompt.
    Text(String),
    /// One token-id prompt.
    Ids(Vec<TokenId>),
    /// Several text prompts.
    Texts(Vec<String>),
    /// Several token-id prompts.
    IdLists(Vec<Vec<TokenId>>),
}

/// Most stop strings one request may give.
pub const MAX_STOP_STRINGS: usize = 16;

/// The `stop` field: absent, `null`, one string, or a list of strings.
fn stop_strings(stop: Option<&Value>) -> Result<Vec<String>, ApiError> {
    let list = match stop {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, v)| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| ApiError::bad(format!("stop[{i}]: expected a string, got {v}")))
            })
            .collect::<Result<_, _>>()?,
        Some(other) => {
            return Err(ApiError::bad(format!(
                "stop: expected a string or a list of strings, got {other}"
            )));
        }
    };
    if list.len() > MAX_STOP_STRINGS {
        return Err(ApiError::bad(format!(
            "stop: {} strings given, at most {MAX_STOP_STRINGS} are accepted",
            list.len()
        )));
    }
    if let Some(i) = list.iter().position(String::is_empty) {
        return Err(ApiError::bad(format!("stop[{i}]: empty stop string")));
    }
    Ok(list)
}

/// Sampling fields shared by the completion and chat requests.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct SamplingFields {
    /// Softmax temperature (default 1).
    pub temperature: Option<f32>,
    /// Nucleus mass (default 1).
    pub top_p: Option<f32>,
    /// Top-k (`0` or `-1`: off; vLLM's extension).
    pub top_k: Option<i64>,
    /// Seed of the sampling stream.
    pub seed: Option<u64>,
    /// Extra stop ids (vLLM's extension); the stop id is kept in the output ids.
    pub stop_token_ids: Option<Vec<TokenId>>,
    /// Stop strings: one string or a list; the text is cut before the first match.
    pub stop: Option<Value>,
    /// Answer with server-sent events as tokens are sampled (one prompt, `n = 1`).
    pub stream: Option<bool>,
    /// Choices per prompt (default 1).
    pub n: Option<usize>,
}

impl SamplingFields {
    /// Sampling params for `max_tokens`, with `format_stops` added unless `ignore_eos`.
    pub fn params(
        &self,
        max_tokens: usize,
        format_stops: Vec<TokenId>,
        ignore_eos: bool,
    ) -> Result<SamplingParams, ApiError> {
        let stop = stop_strings(self.stop.as_ref())?;
        let mut stop_ids = self.stop_token_ids.clone().unwrap_or_default();
        if !ignore_eos {
            for id in format_stops {
                if !stop_ids.contains(&id) {
                    stop_ids.push(id);
                }
            }
        }
        let params = SamplingParams {
            temperature: self.temperature.unwrap_or(1.0),
            top_p: self.top_p.unwrap_or(1.0),
            top_k: self.top_k.filter(|&k| k > 0).map_or(0, |k| k as usize),
            max_new_tokens: max_tokens,
            stop_ids,
            stop,
            seed: self.seed,
        };
        params
            .validate()
            .map_err(|e| ApiError::bad(e.to_string()))?;
        Ok(params)
    }

    /// Choices per prompt, at least 1 and at most 64.
    pub fn choices(&self) -> Result<usize, ApiError> {
        match self.n.unwrap_or(1) {
            n @ 1..=64 => Ok(n),
            n => Err(ApiError::bad(format!("n must be in 1..=64, got {n}"))),
        }
    }
}

/// `POST /v1/completions`.
#[derive(Debug, Clone, Deserialize)]
pub struct CompletionRequest {
    /// Model name (any name is accepted).
    pub model: Option<String>,
    /// The prompt(s).
    pub prompt: PromptInput,
    /// Tokens to generate (default 16, as OpenAI).
    pub max_tokens: Option<usize>,
    /// Sampling.
    #[serde(flatten)]
    pub sampling: SamplingFields,
    /// Return per-token log-probabilities (any value >= 0; alternatives are not returned).
    pub logprobs: Option<u32>,
    /// Write tokens as `token_id:N` (vLLM's extension).
    #[serde(default)]
    pub return_tokens_as_token_ids: bool,
    /// Do not stop at the chat format's end-of-turn ids (vLLM's extension).
    #[serde(default)]
    pub ignore_eos: bool,
    /// Echoing the prompt is not supported.
    #[serde(default)]
    pub echo: bool,
}

/// `POST /v1/chat/completions`.
#[derive(Debug, Clone, Deserialize)]
pub struct ChatRequest {
    /// Model name (any name is accepted).
    pub model: Option<String>,
    /// The conversation.
    pub messages: Vec<Message>,
    /// Tools the model may call.
    #[serde(default)]
    pub tools: Option<Vec<ToolSpec>>,
    /// `"none"` hides the tools; anything else lets the model decide.
    #[serde(default)]
    pub tool_choice: Option<Value>,
    /// Tokens to generate.
    pub max_tokens: Option<usize>,
    /// Newer name of `max_tokens`.
    pub max_completion_tokens: Option<usize>,
    /// Sampling.
    #[serde(flatten)]
    pub sampling: SamplingFields,
    /// Return per-token log-probabilities.
    #[serde(default)]
    pub logprobs: bool,
}

/// SGLang's `POST /generate`.
#[derive(Debug, Clone, Deserialize)]
pub struct GenerateRequest {
    /// Prompt ids.
    pub input_ids: Option<Vec<TokenId>>,
    /// Prompt text (when no ids are given).
    pub text: Option<String>,
    /// Sampling.
    #[serde(default)]
    pub sampling_params: GenerateSampling,
    /// Streaming is not supported.
    #[serde(default)]
    pub stream: bool,
}

/// SGLang's `sampling_params`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct GenerateSampling {
    /// Tokens to generate (default 128, as SGLang).
    pub max_new_tokens: Option<usize>,
    /// Softmax temperature.
    pub temperature: Option<f32>,
    /// Nucleus mass.
    pub top_p: Option<f32>,
    /// Top-k (`-1`: off).
    pub top_k: Option<i64>,
    /// Stop ids.
    pub stop_token_ids: Option<Vec<TokenId>>,
    /// Stop strings: one string or a list.
    pub stop: Option<Value>,
    /// Do not stop at the chat format's end-of-turn ids.
    #[serde(default)]
    pub ignore_eos: bool,
    /// Seed of the sampling stream.
    pub sampling_seed: Option<u64>,
}

impl GenerateSampling {
    /// The same fields in the completion shape.
    pub fn fields(&self) -> SamplingFields {
        SamplingFields {
            temperature: self.temperature,
            top_p: self.top_p,
            top_k: self.top_k,
            seed: self.sampling_seed,
            stop_token_ids: self.stop_token_ids.clone(),
            stop: self.stop.clone(),
            ..SamplingFields::default()
        }
    }
}

/// `POST /v1/load_weights`: exactly one of `path` and `upload`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadWeightsRequest {
    /// Checkpoint to load (a safetensors file, an AgentRL run directory, a Hugging Face
    /// directory or a `.gguf` file, matching the served model), or a PEFT LoRA adapter
    /// directory, merged into the base model the server started with.
    #[serde(default)]
    pub path: Option<std::path::PathBuf>,
    /// A version uploaded with `PUT /v1/weights/{version}/{file}` (see [`super::upload`]).
    #[serde(default)]
    pub upload: Option<u64>,
    /// The new policy version (default: the uploaded version, else the current one plus 1).
    pub version: Option<u64>,
}

/// The body of vLLM's `/v1/load_lora_adapter` and SGLang's `/load_lora_adapter`.
#[derive(Debug, Clone, Deserialize)]
pub struct LoraAdapterRequest {
    /// The adapter's name; a name ending in `-v{N}` sets the policy version to N.
    pub lora_name: String,
    /// The PEFT adapter directory (absent in unload requests).
    #[serde(default)]
    pub lora_path: Option<std::path::PathBuf>,
}

/// The body of SGLang's `/update_weights_from_disk`.
#[derive(Debug, Clone, Deserialize)]
pub struct UpdateFromDiskRequest {
    /// The weights to load (a checkpoint file or directory).
    pub model_path: std::path::PathBuf,
    /// SGLang's weight version label; a number sets the policy version.
    #[serde(default)]
    pub weight_version: Option<String>,
}
