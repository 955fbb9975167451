//! vLLM's and SGLang's weight-update routes on `agentrl serve`, so a trainer that pushes
//! weights to those servers can push to this one the same way (and be tested against it):
//!
//! - vLLM: `POST /v1/load_lora_adapter {"lora_name", "lora_path"}` and
//!   `POST /v1/unload_lora_adapter {"lora_name"}`, answered with vLLM's plain-text
//!   `Success: ...` line (errors are OpenAI-shaped JSON, 400/404).
//! - SGLang: `POST /update_weights_from_disk {"model_path", "weight_version"?}` answered with
//!   `{"success", "message"}`, and `POST /load_lora_adapter` / `POST /unload_lora_adapter`
//!   answered with `{"success", "error_message", "loaded_adapters"}` (HTTP 400 with
//!   `success: false` on failure).
//!
//! `agentrl serve` merges an adapter into the base weights it started with, so one adapter is
//! active at a time: loading one replaces the previous, unloading a name that is not active is
//! a no-op, and unloading the active one is refused (load the next one instead). A name ending
//! in `-v{N}` (e.g. `agentrl-v7`) sets the policy version to N.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::Shared;
use super::admin::load_path;
use super::api::{ApiError, LoraAdapterRequest, RequestBody, UpdateFromDiskRequest, parse_body};

/// The version a name such as `agentrl-v7` announces.
pub fn version_in_name(name: &str) -> Option<u64> {
    let (_, tail) = name.rsplit_once("-v")?;
    tail.parse().ok()
}

/// The name of the adapter now merged in, if any.
fn active_adapter(s: &Shared) -> Option<String> {
    s.adapter.lock().map_or(None, |a| a.clone())
}

/// Records `name` as the adapter now merged in.
fn set_active_adapter(s: &Shared, name: Option<String>) {
    if let Ok(mut active) = s.adapter.lock() {
        *active = name;
    }
}

/// Loads the adapter `req` names; the error says why not.
async fn load_adapter(s: &Shared, req: &LoraAdapterRequest) -> Result<u64, ApiError> {
    let path = req
        .lora_path
        .clone()
        .ok_or_else(|| ApiError::bad("missing `lora_path`"))?;
    if active_adapter(s).as_deref() == Some(req.lora_name.as_str()) {
        return Err(ApiError::bad(format!(
            "the LoRA adapter '{}' has already been loaded",
            req.lora_name
        )));
    }
    let version = load_path(s, path, version_in_name(&req.lora_name)).await?;
    set_active_adapter(s, Some(req.lora_name.clone()));
    Ok(version)
}

/// Forgets the adapter `req` names (see the module docs); the error says why not.
fn unload_adapter(s: &Shared, req: &LoraAdapterRequest) -> Result<(), ApiError> {
    if active_adapter(s).as_deref() == Some(req.lora_name.as_str()) {
        return Err(ApiError::bad(format!(
            "the LoRA adapter '{}' is merged into the served weights; load another adapter to \
             replace it",
            req.lora_name
        )));
    }
    Ok(())
}

/// `POST /v1/load_lora_adapter` (vLLM).
pub async fn vllm_load_lora(
    State(s): State<Shared>,
    RequestBody(body): RequestBody,
) -> Result<String, ApiError> {
    let req: LoraAdapterRequest = parse_body(&body, "/v1/load_lora_adapter")?;
    load_adapter(&s, &req).await?;
    Ok(format!(
        "Success: LoRA adapter '{}' added successfully.",
        req.lora_name
    ))
}

/// `POST /v1/unload_lora_adapter` (vLLM).
pub async fn vllm_unload_lora(
    State(s): State<Shared>,
    RequestBody(body): RequestBody,
) -> Result<String, ApiError> {
    let req: LoraAdapterRequest = parse_body(&body, "/v1/unload_lora_adapter")?;
    unload_adapter(&s, &req)?;
    Ok(format!(
        "Success: LoRA adapter '{}' removed successfully.",
        req.lora_name
    ))
}

/// SGLang's answer: 200 with `body` on success, 400 with it otherwise.
fn sglang_answer(success: bool, body: Value) -> Response {
    let status = if success {
        StatusCode::OK
    } else {
        StatusCode::BAD_REQUEST
    };
    (status, Json(body)).into_response()
}

/// `POST /update_weights_from_disk` (SGLang).
pub async fn sglang_update_from_disk(
    State(s): State<Shared>,
    RequestBody(body): RequestBody,
) -> Response {
    let req: UpdateFromDiskRequest = match parse_body(&body, "/update_weights_from_disk") {
        Ok(req) => req,
        Err(e) => return sglang_answer(false, json!({"success": false, "message": e.message})),
    };
    let version = req.weight_version.as_deref().and_then(|v| v.parse().ok());
    match load_path(&s, req.model_path.clone(), version).await {
        Ok(version) => {
            set_active_adapter(&s, None);
            sglang_answer(
                true,
                json!({"success": true, "num_paused_requests": 0, "policy_version": version,
                       "message": "Succeeded to update model weights."}),
            )
        }
        Err(e) => sglang_answer(false, json!({"success": false, "message": e.message})),
    }
}

/// The adapters SGLang would list: the active one (with its path when known).
fn loaded_adapters(s: &Shared, path: Option<&std::path::Path>) -> Value {
    let mut listed = serde_json::Map::new();
    if let Some(name) = active_adapter(s) {
        listed.insert(name, json!(path));
    }
    Value::Object(listed)
}

/// `POST /load_lora_adapter` (SGLang).
pub async fn sglang_load_lora(State(s): State<Shared>, RequestBody(body): RequestBody) -> Response {
    let req: LoraAdapterRequest = match parse_body(&body, "/load_lora_adapter") {
        Ok(req) => req,
        Err(e) => {
            return sglang_answer(false, json!({"success": false, "error_message": e.message}));
        }
    };
    match load_adapter(&s, &req).await {
        Ok(_) => sglang_answer(
            true,
            json!({"success": true, "error_message": null,
                   "loaded_adapters": loaded_adapters(&s, req.lora_path.as_deref())}),
        ),
        Err(e) => sglang_answer(false, json!({"success": false, "error_message": e.message})),
    }
}

/// `POST /unload_lora_adapter` (SGLang).
pub async fn sglang_unload_lora(
    State(s): State<Shared>,
    RequestBody(body): RequestBody,
) -> Response {
    let req: LoraAdapterRequest = match parse_body(&body, "/unload_lora_adapter") {
        Ok(req) => req,
        Err(e) => {
            return sglang_answer(false, json!({"success": false, "error_message": e.message}));
        }
    };
    match unload_adapter(&s, &req) {
        Ok(()) => sglang_answer(
            true,
            json!({"success": true, "error_message": null,
                   "loaded_adapters": loaded_adapters(&s, None)}),
        ),
        Err(e) => sglang_answer(false, json!({"success": false, "error_message": e.message})),
    }
}
