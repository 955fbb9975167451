//! The management routes of `agentrl serve`: the model list, health, and weight reloads.

use agentrl_core::Policy;
use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use serde_json::{Value, json};

use super::Shared;
use super::api::{ApiError, LoadWeightsRequest, parse_body};

/// `GET /v1/models`.
pub async fn models(State(s): State<Shared>) -> Json<Value> {
    Json(json!({"object": "list", "data": [{
        "id": s.model.name, "object": "model", "created": 0, "owned_by": "agentrl",
        "max_model_len": s.model.context_len,
    }]}))
}

/// `GET /health`: status, policy version and the engine's stats (ids prefilled, reused and
/// generated; the session cache).
pub async fn health(State(s): State<Shared>) -> Json<Value> {
    Json(json!({
        "status": "ok", "policy_version": s.model.policy.version(),
        "engine": s.model.policy.stats(),
    }))
}

/// `POST /v1/load_weights {"path": ..., "version": N?}`: loads a checkpoint into the running
/// model (between batches) and sets the policy version (default: current + 1).
pub async fn load_weights(State(s): State<Shared>, body: Bytes) -> Result<Json<Value>, ApiError> {
    let req: LoadWeightsRequest = parse_body(&body, "/v1/load_weights")?;
    let _one_at_a_time = s.loading.lock().await;
    let state = s.clone();
    let path = req.path.clone();
    let weights = tokio::task::spawn_blocking(move || (state.model.loader)(&path))
        .await
        .map_err(|e| ApiError::internal(format!("weight loading task failed: {e}")))?
        .map_err(|e| ApiError::bad(format!("loading weights from {}: {e}", req.path.display())))?;
    let version = req.version.unwrap_or(s.model.policy.version() + 1);
    s.model
        .policy
        .set_weights(weights, version)
        .await
        .map_err(|e| ApiError::bad(format!("applying weights from {}: {e}", req.path.display())))?;
    tracing::info!(
        "loaded weights from {} as version {version}",
        req.path.display()
    );
    Ok(Json(json!({"path": req.path, "policy_version": version})))
}
