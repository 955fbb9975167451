//! The management routes of `agentrl serve`: the model list, health, the end of a session, and
//! weight reloads (from a path the server can read, or from a version uploaded over HTTP, see
//! [`super::upload`]).

use std::path::PathBuf;

use agentrl_core::Policy;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::Shared;
use super::api::{ApiError, LoadWeightsRequest, RequestBody, parse_body};

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

/// `DELETE /v1/sessions/{session}`: the session's conversation is over; the engine frees the
/// keys and values it kept for the session's next turn (nothing happens for an unknown
/// session). 204 No Content.
pub async fn end_session(
    State(s): State<Shared>,
    Path(session): Path<String>,
) -> Result<StatusCode, ApiError> {
    super::handlers::check_session_id(&session)
        .map_err(|why| ApiError::bad(format!("/v1/sessions/{{session}}: {why}")))?;
    s.model.policy.end_session(&session);
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /v1/load_weights {"path": ..., "version": N?}` or `{"upload": N}`: loads a checkpoint
/// (or an uploaded version) into the running model (between batches) and sets the policy
/// version (default: the uploaded version, else current + 1). Loading an upload removes the
/// uploads of older versions.
pub async fn load_weights(
    State(s): State<Shared>,
    RequestBody(body): RequestBody,
) -> Result<Json<Value>, ApiError> {
    let req: LoadWeightsRequest = parse_body(&body, "/v1/load_weights")?;
    let path = match (&req.path, req.upload) {
        (Some(path), None) => path.clone(),
        (None, Some(upload)) => s.uploads.resolve(upload)?,
        _ => {
            return Err(ApiError::bad(
                "/v1/load_weights: send exactly one of `path` and `upload`",
            ));
        }
    };
    let version = load_path(&s, path.clone(), req.version.or(req.upload)).await?;
    if let Some(upload) = req.upload {
        s.uploads.prune_below(upload);
    }
    Ok(Json(json!({"path": path, "policy_version": version})))
}

/// Loads the weights at `path` into the running model as `version` (default: current + 1),
/// one load at a time; returns the version set.
pub async fn load_path(s: &Shared, path: PathBuf, version: Option<u64>) -> Result<u64, ApiError> {
    let _one_at_a_time = s.loading.lock().await;
    let state = s.clone();
    let from = path.clone();
    let weights = tokio::task::spawn_blocking(move || (state.model.loader)(&from))
        .await
        .map_err(|e| ApiError::internal(format!("weight loading task failed: {e}")))?
        .map_err(|e| ApiError::bad(format!("loading weights from {}: {e}", path.display())))?;
    let version = version.unwrap_or(s.model.policy.version() + 1);
    s.model
        .policy
        .set_weights(weights, version)
        .await
        .map_err(|e| ApiError::bad(format!("applying weights from {}: {e}", path.display())))?;
    tracing::info!(
        "loaded weights from {} as version {version}",
        path.display()
    );
    Ok(version)
}
