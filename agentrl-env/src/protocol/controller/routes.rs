//! The client-facing handlers of the controller (`get_indices`, `start_sample`, `interact`,
//! `cancel`, `list_workers`, `list_sessions`) and the forwarding of a request to a worker.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use agentrl_core::Split;
use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::tables::{Route, Shared, WorkerAddr, pick, unreserve};
use crate::locking::lock;
use crate::protocol::ended::Ended;
use crate::protocol::http::{ApiError, body_bytes, indices_query, session_id};
use crate::protocol::server::parse_start_sample_body;
use crate::protocol::{
    CancelResponse, ErrorBody, IndicesQuery, SESSION_HEADER, SampleStatus, SessionInfo, WorkerInfo,
    indices_route,
};

/// A worker's answer, passed on to the client as is.
struct Forwarded {
    status: StatusCode,
    headers: reqwest::header::HeaderMap,
    body: Bytes,
}

impl Forwarded {
    fn respond(self, session: Option<u64>) -> Response {
        let mut response = (self.status, self.body).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Some(id) = session {
            response
                .headers_mut()
                .insert(SESSION_HEADER, HeaderValue::from(id));
        }
        response
    }
}

/// Sends one request for `route` to `worker`, with the token it registered; a transport
/// failure is a 502, and so is a 401 from the worker (its registered `worker_token` does not
/// open it), so that the client never mistakes it for a problem with its own token.
async fn forward(
    shared: &Shared,
    method: reqwest::Method,
    worker: &WorkerAddr,
    route: &str,
    session: Option<&str>,
    body: Option<Bytes>,
) -> Result<Forwarded, ApiError> {
    let mut request = worker.request(&shared.http, method.clone(), route);
    if let Some(s) = session {
        request = request.header(SESSION_HEADER, s);
    }
    if let Some(b) = body {
        request = request
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(b.to_vec());
    }
    let base = &worker.base;
    let bad_gateway = |e: reqwest::Error| {
        ApiError::new(
            StatusCode::BAD_GATEWAY,
            format!("worker request {method} {base}{route} failed: {e}"),
        )
    };
    let response = request.send().await.map_err(bad_gateway)?;
    let status =
        StatusCode::from_u16(response.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let headers = response.headers().clone();
    let body = Bytes::from(
        crate::protocol::answer::read_capped(response)
            .await
            .map_err(|e| {
                ApiError::new(
                    StatusCode::BAD_GATEWAY,
                    format!("worker answer to {method} {base}{route}: {e}"),
                )
            })?,
    );
    if status == StatusCode::UNAUTHORIZED {
        let why = ErrorBody::message_of(&body);
        return Err(ApiError::new(
            StatusCode::BAD_GATEWAY,
            format!(
                "worker {base} refused the controller's {method} {route} (HTTP 401: {why}); \
                 the worker must register with the token its env server requires \
                 (`worker_token`, set by the worker's --token)"
            ),
        ));
    }
    Ok(Forwarded {
        status,
        headers,
        body,
    })
}

pub(super) async fn get_indices(
    State(shared): State<Arc<Shared>>,
    query: std::result::Result<Query<IndicesQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let query = indices_query(query)?;
    let (wid, worker) = pick(&shared, &query.name, &[])?;
    unreserve(&shared, wid);
    let split = query.split.unwrap_or(Split::Test);
    let route = indices_route(&query.name, split);
    Ok(
        forward(&shared, reqwest::Method::GET, &worker, &route, None, None)
            .await?
            .respond(None),
    )
}

pub(super) async fn start_sample(
    State(shared): State<Arc<Shared>>,
    body: std::result::Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let request = parse_start_sample_body(body_bytes(&body, "start_sample")?)?;
    let raw = body.unwrap_or_default();
    // A worker that cannot be reached (it died since its last heartbeat, or refuses the
    // controller's token) is skipped and the next least-loaded one tried; its heartbeat
    // timeout removes a dead one for good.
    let mut unreachable = Vec::new();
    let mut last_failure = String::new();
    let (wid, base, answer) = loop {
        let (wid, worker) = match pick(&shared, &request.name, &unreachable) {
            Ok(picked) => picked,
            Err(e) if unreachable.is_empty() => return Err(e),
            Err(e) => {
                return Err(ApiError::new(
                    StatusCode::BAD_GATEWAY,
                    format!(
                        "{} worker(s) for env `{}` could not be reached and no other is left \
                         ({}); the last failure: {last_failure}",
                        unreachable.len(),
                        request.name,
                        e.message
                    ),
                ));
            }
        };
        let answer = forward(
            &shared,
            reqwest::Method::POST,
            &worker,
            "/api/start_sample",
            None,
            Some(raw.clone()),
        )
        .await;
        match answer {
            Ok(a) if a.status.is_success() => break (wid, worker.base, a),
            Ok(a) => {
                unreserve(&shared, wid);
                return Ok(a.respond(None));
            }
            Err(e) => {
                unreserve(&shared, wid);
                tracing::warn!(
                    worker = wid,
                    "start_sample failed, trying another worker: {}",
                    e.message
                );
                unreachable.push(wid);
                last_failure = e.message;
            }
        }
    };
    let Some(remote_id) = answer
        .headers
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
    else {
        unreserve(&shared, wid);
        return Err(ApiError::new(
            StatusCode::BAD_GATEWAY,
            format!("worker {base} answered start_sample without a `{SESSION_HEADER}` header"),
        ));
    };
    let task_id = match (&request.custom_task, request.index) {
        (Some(task), _) => task.id.clone(),
        (None, Some(index)) => format!("{}:{index}", request.split.unwrap_or(Split::Test)),
        (None, None) => String::new(),
    };
    let id = shared.next_session.fetch_add(1, Ordering::Relaxed);
    {
        let mut t = lock(&shared.tables);
        if !t.workers.contains_key(&wid) {
            drop(t);
            return Err(ApiError::new(
                StatusCode::BAD_GATEWAY,
                format!("worker {base} was lost while the session started"),
            ));
        }
        t.sessions.insert(
            id,
            Route {
                worker: wid,
                remote_id,
                env: request.name,
                task_id,
                steps: 0,
                last_used: Instant::now(),
                busy: 0,
            },
        );
    }
    Ok(answer.respond(Some(id)))
}

pub(super) async fn interact(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: std::result::Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let id = session_id(&headers)?;
    let raw = body.map_err(|e| {
        ApiError::new(
            e.status(),
            format!("could not read the interact body: {}", e.body_text()),
        )
    })?;
    let (worker, remote) = shared.checkout(id)?;
    let answer = forward(
        &shared,
        reqwest::Method::POST,
        &worker,
        "/api/interact",
        Some(&remote),
        Some(raw),
    )
    .await;
    let answer = match answer {
        Ok(a) => a,
        Err(e) => {
            shared.checkin(id, false);
            return Err(e);
        }
    };
    shared.checkin(id, answer.status.is_success());
    if answer.status.is_success() {
        let finished: Option<SampleStatus> =
            serde_json::from_slice::<serde_json::Value>(&answer.body)
                .ok()
                .filter(|v| v.get("finish").and_then(serde_json::Value::as_bool) == Some(true))
                .map(|v| {
                    v.get("status")
                        .cloned()
                        .and_then(|s| serde_json::from_value(s).ok())
                        .unwrap_or(SampleStatus::Completed)
                });
        if let Some(status) = finished {
            lock(&shared.tables).end(id, Ended::Finished(status));
        }
    } else if matches!(answer.status, StatusCode::NOT_FOUND | StatusCode::CONFLICT) {
        // The worker no longer holds the session (expired or finished there).
        lock(&shared.tables).end(id, Ended::Expired);
    }
    Ok(answer.respond(None))
}

pub(super) async fn cancel(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
) -> Result<Json<CancelResponse>, ApiError> {
    let id = session_id(&headers)?;
    let (worker, remote) = shared.checkout(id)?;
    let removed = lock(&shared.tables).end(id, Ended::Cancelled);
    if removed.is_none() {
        return Err(shared.gone(id));
    }
    match forward(
        &shared,
        reqwest::Method::POST,
        &worker,
        "/api/cancel",
        Some(&remote),
        None,
    )
    .await
    {
        Ok(a) if !a.status.is_success() => {
            tracing::debug!(status = %a.status, "worker refused to cancel session {id}");
        }
        Ok(_) => {}
        Err(e) => tracing::debug!("cancelling session {id} on its worker: {}", e.message),
    }
    Ok(Json(CancelResponse {
        session_id: id.to_string(),
        status: SampleStatus::Cancelled,
    }))
}

pub(super) async fn list_workers(State(shared): State<Arc<Shared>>) -> Json<Vec<WorkerInfo>> {
    let t = lock(&shared.tables);
    let mut list: Vec<(u64, WorkerInfo)> = t
        .workers
        .iter()
        .map(|(id, w)| {
            (
                *id,
                WorkerInfo {
                    id: format!("worker-{id}@{}", w.base),
                    envs: w.envs.clone(),
                    sessions: w.load,
                    max_sessions: w.capacity,
                    session_ttl_secs: shared.config.session_ttl.as_secs_f64(),
                },
            )
        })
        .collect();
    list.sort_by_key(|(id, _)| *id);
    Json(list.into_iter().map(|(_, w)| w).collect())
}

pub(super) async fn list_sessions(State(shared): State<Arc<Shared>>) -> Json<Vec<SessionInfo>> {
    let t = lock(&shared.tables);
    let mut list: Vec<(u64, SessionInfo)> = t
        .sessions
        .iter()
        .map(|(id, r)| {
            (
                *id,
                SessionInfo {
                    session_id: id.to_string(),
                    env: r.env.clone(),
                    task_id: r.task_id.clone(),
                    steps: r.steps,
                    idle_secs: r.last_used.elapsed().as_secs_f64(),
                },
            )
        })
        .collect();
    list.sort_by_key(|(id, _)| *id);
    Json(list.into_iter().map(|(_, s)| s).collect())
}
