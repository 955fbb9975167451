//! Serving models (feature `serve`): `agentrl serve`, an OpenAI-compatible HTTP server (axum)
//! for a tch model, so remote [`crate::HttpPolicy`] clients, stock OpenAI clients and trainers
//! can use it; and the one-shot model commands `agentrl chat` ([`chat`]) and `agentrl logprobs`
//! ([`logprobs`]). Each command is a clap `Args` struct and a `run` function, so any binary can
//! offer it.
//!
//! Routes: `GET /v1/models`, `POST /v1/completions` (text or token-id prompts, `logprobs`,
//! generated ids in each choice's `token_ids`, vLLM's `return_tokens_as_token_ids`,
//! `stop_token_ids` and `ignore_eos`), `POST /v1/chat/completions` (tools rendered by the model's
//! chat format, tool calls returned in OpenAI's `tool_calls`), SGLang's `POST /generate`,
//! `POST /v1/load_weights {"path", "version"?}` (new weights into the running model: a
//! checkpoint, or a PEFT LoRA adapter directory merged into the base the server started with) and
//! `GET /health`; weights uploaded over HTTP (`PUT /v1/weights/{version}/{file}` with an
//! `x-content-sha256` header, then `POST /v1/load_weights {"upload": version}`, see [`upload`]);
//! and vLLM's and SGLang's weight-update routes (`/v1/load_lora_adapter`,
//! `/v1/unload_lora_adapter`, `/update_weights_from_disk`, `/load_lora_adapter`,
//! `/unload_lora_adapter`, see [`fleet`]). Every answer carries the extension field `policy_version`. Concurrent requests
//! share forward batches on the model thread ([`crate::TchPolicy`]). Any `model` name
//! in a request is accepted: one model is served. Errors are OpenAI-shaped JSON; bad input is a
//! 400 that says what is wrong. Stop strings (`stop`) end generation once the text contains one:
//! the text is cut before it, `token_ids` keep the token that completed it, and `stop_reason`
//! names it. `stream: true` on completions and chat answers with server-sent events as tokens
//! are sampled (`stream.rs`; one prompt, `n = 1`; not on SGLang's `/generate`). With
//! `--api-key KEY` every route but `/health` needs `Authorization: Bearer KEY` (401 otherwise);
//! without one, anyone who can reach the port can generate and load weights from any path the
//! process can read, so keep such a server on 127.0.0.1 or a trusted network.

pub mod admin;
mod answer;
pub mod api;
pub mod chat;
pub mod fleet;
pub mod handlers;
pub mod logprobs;
pub mod model;
pub mod stream;
pub mod upload;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use agentrl_core::{Error, Result, same_secret};
use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::StatusCode;
use axum::http::header::AUTHORIZATION;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use clap::Args;

use crate::llama::Dtype;

pub use model::{Codec, ServedModel};
pub use upload::UploadStore;

/// Arguments of `agentrl serve`.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Model: a .gguf file, a Hugging Face directory, or an AgentRL run directory / checkpoint
    /// (.safetensors inside a run, or with --config).
    #[arg(long)]
    pub model: PathBuf,
    /// Run config (TOML) giving the shape of a bare AgentRL checkpoint.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Port to listen on (0 picks a free one; the bound address is printed).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Name listed by /v1/models (default: the model path's file name).
    #[arg(long)]
    pub served_model_name: Option<String>,
    /// Most rows in one forward batch.
    #[arg(long, default_value_t = 64)]
    pub max_batch: usize,
    /// Seed of the sampling streams of requests without a seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Weights' type of a Llama-family model: `f32` or `bf16` (AgentRL's tiny models are f32).
    #[arg(long, default_value = "f32")]
    pub dtype: Dtype,
    /// Require `Authorization: Bearer KEY` on every route but /health.
    #[arg(long)]
    pub api_key: Option<String>,
    /// Directory for weights uploaded over HTTP (default: a fresh temporary directory, removed
    /// when the server stops).
    #[arg(long)]
    pub upload_dir: Option<PathBuf>,
    /// Largest weights file accepted by upload, in MiB.
    #[arg(long, default_value_t = upload::DEFAULT_MAX_FILE_BYTES >> 20)]
    pub max_upload_mib: u64,
}

/// The state the route handlers receive.
pub type Shared = Arc<ServeState>;

/// Shared state of the server.
pub struct ServeState {
    /// The served model.
    pub model: ServedModel,
    /// Next response id.
    pub next_id: AtomicU64,
    /// Serialises weight reloads.
    pub loading: tokio::sync::Mutex<()>,
    /// The bearer token every route but `/health` requires, when set.
    pub api_key: Option<String>,
    /// Weights uploaded over HTTP.
    pub uploads: UploadStore,
    /// The LoRA adapter merged in by the vLLM/SGLang-style routes, by name.
    pub adapter: std::sync::Mutex<Option<String>>,
}

impl ServeState {
    /// State serving `model` to anyone.
    pub fn new(model: ServedModel) -> Arc<Self> {
        Self::with_api_key(model, None)
    }

    /// State serving `model` to callers that send `Authorization: Bearer KEY`.
    pub fn with_api_key(model: ServedModel, api_key: Option<String>) -> Arc<Self> {
        let uploads = UploadStore::new(None, upload::DEFAULT_MAX_FILE_BYTES);
        Self::with_options(model, api_key, uploads)
    }

    /// State serving `model` (behind `api_key` when set), keeping uploads in `uploads`.
    pub fn with_options(
        model: ServedModel,
        api_key: Option<String>,
        uploads: UploadStore,
    ) -> Arc<Self> {
        Arc::new(ServeState {
            model,
            next_id: AtomicU64::new(0),
            loading: tokio::sync::Mutex::new(()),
            api_key,
            uploads,
            adapter: std::sync::Mutex::new(None),
        })
    }
}

/// Rejects requests without the server's API key (when it has one); `/health` stays open.
async fn require_key(
    State(state): State<Arc<ServeState>>,
    request: Request,
    next: Next,
) -> Response {
    let Some(key) = &state.api_key else {
        return next.run(request).await;
    };
    if request.uri().path() == "/health" {
        return next.run(request).await;
    }
    let sent = request
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    // Compared in constant time, so the answer time does not leak the key.
    if sent.is_some_and(|sent| same_secret(sent.as_bytes(), key.as_bytes())) {
        return next.run(request).await;
    }
    api::ApiError {
        status: StatusCode::UNAUTHORIZED,
        message: "missing or wrong API key: send `Authorization: Bearer KEY`".into(),
    }
    .into_response()
}

/// The axum app over `state`.
pub fn app(state: Arc<ServeState>) -> Router {
    Router::new()
        .route("/v1/models", get(admin::models))
        .route("/v1/completions", post(handlers::completions))
        .route("/v1/chat/completions", post(handlers::chat))
        .route("/generate", post(handlers::generate))
        .route("/v1/load_weights", post(admin::load_weights))
        .route("/v1/weights/{version}/{file}", put(upload::put_weights))
        .route("/v1/load_lora_adapter", post(fleet::vllm_load_lora))
        .route("/v1/unload_lora_adapter", post(fleet::vllm_unload_lora))
        .route(
            "/update_weights_from_disk",
            post(fleet::sglang_update_from_disk),
        )
        .route("/load_lora_adapter", post(fleet::sglang_load_lora))
        .route("/unload_lora_adapter", post(fleet::sglang_unload_lora))
        .route("/v1/sessions/{session}", delete(admin::end_session))
        .route("/health", get(admin::health))
        .layer(DefaultBodyLimit::max(api::MAX_BODY_BYTES))
        .layer(middleware::from_fn_with_state(state.clone(), require_key))
        .with_state(state)
}

/// Loads the model, serves it until Ctrl-C, then lets requests in flight finish.
pub async fn run(args: ServeArgs) -> Result<()> {
    if args.api_key.as_deref().is_some_and(|k| k.trim().is_empty()) {
        return Err(Error::Config(
            "--api-key is empty: give a key, or leave the option out".into(),
        ));
    }
    let device = crate::device::default_device();
    let load_args = args.clone();
    let model = tokio::task::spawn_blocking(move || {
        ServedModel::load(
            &load_args.model,
            load_args.config.as_deref(),
            load_args.served_model_name,
            device,
            load_args.dtype,
            load_args.max_batch,
            load_args.seed,
        )
    })
    .await
    .map_err(|e| Error::Policy(format!("model loading task failed: {e}")))??;
    let listener = tokio::net::TcpListener::bind((args.host.as_str(), args.port))
        .await
        .map_err(|e| {
            Error::Config(format!(
                "cannot listen on {}:{} (--host/--port): {e}",
                args.host, args.port
            ))
        })?;
    let bound = listener
        .local_addr()
        .map_err(|e| Error::Config(format!("listening address: {e}")))?;
    println!(
        "serving `{}` (context {} tokens) on http://{bound}/v1 (Ctrl-C stops it)",
        model.name, model.context_len
    );
    if !bound.ip().is_loopback() && args.api_key.is_none() {
        tracing::warn!(
            "agentrl serve listens on {bound}, reachable from other machines, without an API \
             key: anyone who can reach that port can use the model and push weights (set \
             --api-key, or bind 127.0.0.1)"
        );
    }
    let uploads = UploadStore::new(
        args.upload_dir.clone(),
        args.max_upload_mib.saturating_mul(1 << 20),
    );
    let state = ServeState::with_options(model, args.api_key, uploads);
    axum::serve(listener, app(state))
        .with_graceful_shutdown(async {
            if let Err(e) = tokio::signal::ctrl_c().await {
                tracing::warn!("cannot listen for Ctrl-C ({e}); serving until killed");
                std::future::pending::<()>().await;
            }
        })
        .await
        .map_err(|e| Error::Policy(format!("server failed: {e}")))?;
    println!("server stopped");
    Ok(())
}
