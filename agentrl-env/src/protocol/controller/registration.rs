//! How workers join the controller: the `register`/`heartbeat` handlers and their wire types,
//! and the worker side, [`register_worker`], which registers and then keeps heartbeating.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentrl_core::{Error, Result};
use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio::task::JoinHandle;

use super::tables::{Shared, Worker};
use crate::locking::lock;
use crate::protocol::ErrorBody;
use crate::protocol::http::{ApiError, body_bytes, parse_json};

/// Body of `POST /api/register`.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct RegisterRequest {
    /// Base URL of the worker's env server (`http://HOST:PORT` or `HOST:PORT`).
    pub address: String,
    /// Env ids it serves.
    pub envs: Vec<String>,
    /// Most sessions the controller sends it (default: unbounded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<usize>,
    /// The bearer token the worker's env server requires: the controller sends it on every
    /// request it makes to this worker (none: the worker needs no token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_token: Option<String>,
}

/// Shows whether a token is set, never the token.
fn redacted(token: &Option<String>) -> Option<&'static str> {
    token.as_ref().map(|_| "<redacted>")
}

impl std::fmt::Debug for RegisterRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegisterRequest")
            .field("address", &self.address)
            .field("envs", &self.envs)
            .field("capacity", &self.capacity)
            .field("worker_token", &redacted(&self.worker_token))
            .finish()
    }
}

/// Answer of `POST /api/register`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegisterResponse {
    /// The id to send heartbeats with.
    pub worker_id: String,
    /// The longest silence the controller tolerates, in seconds.
    pub heartbeat_timeout_secs: f64,
}

/// Body of `POST /api/heartbeat`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeartbeatRequest {
    /// The id `register` gave.
    pub worker_id: String,
    /// Sessions the worker holds (informational).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<usize>,
}

/// Answer of `POST /api/heartbeat`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeartbeatResponse {
    /// The worker's id.
    pub worker_id: String,
    /// Sessions the controller routes to it.
    pub sessions: usize,
}

/// `http://HOST:PORT` for `address`, without a trailing slash.
fn normalize(address: &str) -> String {
    let trimmed = address.trim().trim_end_matches('/');
    if trimmed.contains("://") {
        trimmed.to_string()
    } else {
        format!("http://{trimmed}")
    }
}

/// Parses and checks a `register` body: the request and its trimmed, non-empty env ids; 400
/// when it is not JSON, 422 when fields are missing, mistyped or invalid.
pub(crate) fn parse_register_body(
    bytes: &[u8],
) -> Result<(RegisterRequest, Vec<String>), ApiError> {
    let request: RegisterRequest = parse_json(bytes, "register")?;
    if request.address.trim().is_empty() {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "register needs a non-empty `address`",
        ));
    }
    let envs: Vec<String> = request
        .envs
        .iter()
        .map(|e| e.trim().to_string())
        .filter(|e| !e.is_empty())
        .collect();
    if envs.is_empty() {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "register needs at least one env id in `envs`",
        ));
    }
    if request.capacity == Some(0) {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "`capacity` must be at least 1",
        ));
    }
    if request
        .worker_token
        .as_deref()
        .is_some_and(|t| t.trim().is_empty())
    {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "`worker_token` must not be empty (leave it out when the worker needs no token)",
        ));
    }
    Ok((request, envs))
}

pub(super) async fn register(
    State(shared): State<Arc<Shared>>,
    body: std::result::Result<Bytes, BytesRejection>,
) -> Result<Json<RegisterResponse>, ApiError> {
    let (request, envs) = parse_register_body(body_bytes(&body, "register")?)?;
    let base = normalize(&request.address);
    let wid = shared.next_worker.fetch_add(1, Ordering::Relaxed);
    {
        let mut t = lock(&shared.tables);
        // A worker that registers again at the same address restarted: its sessions are gone.
        let old: Vec<u64> = t
            .workers
            .iter()
            .filter(|(_, w)| w.base == base)
            .map(|(id, _)| *id)
            .collect();
        for o in old {
            t.drop_worker(o, "registered again (worker restarted)");
        }
        t.workers.insert(
            wid,
            Worker {
                base: base.clone(),
                envs: envs.clone(),
                capacity: request.capacity.unwrap_or(usize::MAX),
                token: request.worker_token.clone(),
                last_beat: Instant::now(),
                load: 0,
            },
        );
    }
    tracing::info!(worker = wid, %base, envs = %envs.join(","), "worker registered");
    Ok(Json(RegisterResponse {
        worker_id: format!("worker-{wid}"),
        heartbeat_timeout_secs: shared.config.heartbeat_timeout.as_secs_f64(),
    }))
}

/// The answer to a heartbeat from a worker the controller does not know (404).
fn unknown_worker(worker_id: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        format!("unknown worker `{worker_id}`; register again"),
    )
}

/// Parses a `heartbeat` body: the request and the number of its `worker-N` id; 400 when it is
/// not JSON, 422 when fields are missing or mistyped, 404 when the id is not one `register`
/// gives.
pub(crate) fn parse_heartbeat_body(bytes: &[u8]) -> Result<(HeartbeatRequest, u64), ApiError> {
    let request: HeartbeatRequest = parse_json(bytes, "heartbeat")?;
    let wid: u64 = request
        .worker_id
        .strip_prefix("worker-")
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| unknown_worker(&request.worker_id))?;
    Ok((request, wid))
}

pub(super) async fn heartbeat(
    State(shared): State<Arc<Shared>>,
    body: std::result::Result<Bytes, BytesRejection>,
) -> Result<Json<HeartbeatResponse>, ApiError> {
    let (request, wid) = parse_heartbeat_body(body_bytes(&body, "heartbeat")?)?;
    let unknown = || unknown_worker(&request.worker_id);
    let mut t = lock(&shared.tables);
    let timeout = shared.config.heartbeat_timeout;
    let late = t
        .workers
        .get(&wid)
        .is_some_and(|w| w.last_beat.elapsed() > timeout);
    if late {
        t.drop_worker(wid, "stopped heartbeating (worker lost)");
    }
    let Some(w) = t.workers.get_mut(&wid) else {
        drop(t);
        return Err(unknown());
    };
    w.last_beat = Instant::now();
    Ok(Json(HeartbeatResponse {
        worker_id: request.worker_id.clone(),
        sessions: w.load,
    }))
}

/// How a worker joins a controller (see [`register_worker`]).
#[derive(Clone, PartialEq)]
pub struct WorkerRegistration {
    /// The controller's base URL.
    pub controller: String,
    /// This worker's env server address, as the controller should reach it.
    pub address: String,
    /// Env ids it serves.
    pub envs: Vec<String>,
    /// Most sessions the controller may send it.
    pub capacity: Option<usize>,
    /// Bearer token of the controller, if it has one.
    pub token: Option<String>,
    /// Bearer token of this worker's env server, if it has one: sent in the registration so
    /// the controller can reach the worker.
    pub worker_token: Option<String>,
    /// Time between heartbeats.
    pub interval: Duration,
}

impl std::fmt::Debug for WorkerRegistration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerRegistration")
            .field("controller", &self.controller)
            .field("address", &self.address)
            .field("envs", &self.envs)
            .field("capacity", &self.capacity)
            .field("token", &redacted(&self.token))
            .field("worker_token", &redacted(&self.worker_token))
            .field("interval", &self.interval)
            .finish()
    }
}

/// A worker's registration, kept alive by a heartbeat task; dropping it stops the heartbeats.
pub struct RegistrationHandle {
    worker_id: Arc<Mutex<String>>,
    task: JoinHandle<()>,
}

impl RegistrationHandle {
    /// The id the controller gave (changes if the worker had to register again).
    pub fn worker_id(&self) -> String {
        lock(&self.worker_id).clone()
    }

    /// Stops heartbeating (the controller drops the worker after its timeout).
    pub fn stop(self) {
        self.task.abort();
    }
}

impl Drop for RegistrationHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One JSON POST to the controller; an error answer or transport failure is an `Err` message
/// (with the status, if one came back).
async fn post_json<B: Serialize, T: DeserializeOwned>(
    http: &reqwest::Client,
    reg: &WorkerRegistration,
    route: &str,
    body: &B,
) -> std::result::Result<T, (Option<u16>, String)> {
    let url = format!("{}{route}", normalize(&reg.controller));
    let mut request = http.post(&url).json(body);
    if let Some(t) = &reg.token {
        request = request.bearer_auth(t);
    }
    let response = request
        .send()
        .await
        .map_err(|e| (None, format!("POST {url}: {e}")))?;
    let status = response.status();
    let bytes = response
        .bytes()
        .await
        .map_err(|e| (None, format!("POST {url}: reading the answer: {e}")))?;
    if !status.is_success() {
        let message = ErrorBody::message_of(&bytes);
        return Err((
            Some(status.as_u16()),
            format!("POST {url}: HTTP {status}: {message}"),
        ));
    }
    serde_json::from_slice(&bytes).map_err(|e| {
        (
            None,
            format!("POST {url}: the answer is not the expected JSON: {e}"),
        )
    })
}

/// Registers a worker with its controller (an error if that fails), then heartbeats every
/// `reg.interval` on a tokio task, registering again when the controller forgot it. `load`, when
/// given, reports the worker's session count with each heartbeat.
pub async fn register_worker(
    reg: WorkerRegistration,
    load: Option<Arc<dyn Fn() -> usize + Send + Sync>>,
) -> Result<RegistrationHandle> {
    if reg.interval.is_zero() {
        return Err(Error::Config(
            "the heartbeat interval must be positive".into(),
        ));
    }
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .no_proxy()
        .build()
        .map_err(|e| Error::Config(format!("cannot build an HTTP client: {e}")))?;
    let request = RegisterRequest {
        address: reg.address.clone(),
        envs: reg.envs.clone(),
        capacity: reg.capacity,
        worker_token: reg.worker_token.clone(),
    };
    let first: RegisterResponse = post_json(&http, &reg, "/api/register", &request)
        .await
        .map_err(|(_, e)| Error::Config(format!("cannot register with the controller: {e}")))?;
    let worker_id = Arc::new(Mutex::new(first.worker_id));
    let shared_id = worker_id.clone();
    let task = tokio::spawn(async move {
        let mut tick = tokio::time::interval(reg.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            let beat = HeartbeatRequest {
                worker_id: lock(&shared_id).clone(),
                load: load.as_ref().map(|f| f()),
            };
            match post_json::<_, HeartbeatResponse>(&http, &reg, "/api/heartbeat", &beat).await {
                Ok(_) => {}
                Err((Some(404), _)) => {
                    match post_json::<_, RegisterResponse>(&http, &reg, "/api/register", &request)
                        .await
                    {
                        Ok(again) => {
                            tracing::info!(worker = %again.worker_id, "registered again");
                            *lock(&shared_id) = again.worker_id;
                        }
                        Err((_, e)) => tracing::warn!("registering again failed: {e}"),
                    }
                }
                Err((_, e)) => tracing::warn!("heartbeat failed: {e}"),
            }
        }
    });
    Ok(RegistrationHandle { worker_id, task })
}
