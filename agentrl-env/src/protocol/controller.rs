//! The central controller: one `/api` front for many env servers (workers).
//!
//! Clients talk to the controller exactly as to an env server (the same six routes, so a
//! [`ProtocolClient`](super::ProtocolClient)/[`RemoteEnv`](super::RemoteEnv) pointed at it works
//! unchanged). Workers join with `POST /api/register` and stay alive with `POST /api/heartbeat`:
//!
//! | route | request | answer |
//! |---|---|---|
//! | `POST /api/register` | [`RegisterRequest`] | [`RegisterResponse`] |
//! | `POST /api/heartbeat` | [`HeartbeatRequest`] | [`HeartbeatResponse`] (404: unknown worker, register again) |
//!
//! Each new session goes to the least-loaded live worker that serves its env (load = sessions
//! it holds through this controller, bounded by its capacity); the controller hands out its own
//! session ids and forwards `interact`/`cancel` to the worker that holds the session. A worker
//! silent for longer than [`ControllerConfig::heartbeat_timeout`] is dropped: its sessions answer
//! 410 "worker lost" and are forgotten. Sessions idle for longer than
//! [`ControllerConfig::session_ttl`] expire (404, and the worker is told to cancel them). With a
//! [`ControllerConfig::token`], every request needs `Authorization: Bearer TOKEN` (401 without).
//! A new session whose chosen worker cannot be reached goes to the next least-loaded one; 502
//! when none can be reached, or when the worker of a running session cannot; no worker for an
//! env gets 503.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use agentrl_core::{Error, Result, Split};
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio::task::JoinHandle;

use super::http::{ApiError, ServiceHandle, Serving, parse_body, session_id};
use super::{
    CancelResponse, ErrorBody, IndicesQuery, SESSION_HEADER, SampleStatus, SessionInfo,
    StartSampleRequest, WorkerInfo,
};

/// How many ended session ids the controller remembers, to say why a late request fails.
const ENDED_MEMORY: usize = 65_536;

/// Controller settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ControllerConfig {
    /// When set, every request must carry `Authorization: Bearer TOKEN`.
    pub token: Option<String>,
    /// A worker silent for longer than this is taken out with its sessions.
    pub heartbeat_timeout: Duration,
    /// A session unused for this long expires.
    pub session_ttl: Duration,
    /// Longest wait for one forwarded request.
    pub request_timeout: Duration,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            token: None,
            heartbeat_timeout: Duration::from_secs(10),
            session_ttl: Duration::from_secs(600),
            request_timeout: Duration::from_secs(120),
        }
    }
}

/// Body of `POST /api/register`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegisterRequest {
    /// Base URL of the worker's env server (`http://HOST:PORT` or `HOST:PORT`).
    pub address: String,
    /// Env ids it serves.
    pub envs: Vec<String>,
    /// Most sessions the controller sends it (default: unbounded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<usize>,
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

/// Locks a std mutex, recovering the data if a holder panicked.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One registered worker.
struct Worker {
    base: String,
    envs: Vec<String>,
    capacity: usize,
    last_beat: Instant,
    /// Sessions routed to it (including starts in flight).
    load: usize,
}

/// One routed session.
struct Route {
    worker: u64,
    remote_id: String,
    env: String,
    task_id: String,
    steps: u64,
    last_used: Instant,
    /// Requests on it in flight (an in-use session never expires).
    busy: usize,
}

/// Why a session is gone.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ended {
    Finished(SampleStatus),
    Cancelled,
    Expired,
    WorkerLost(String),
}

/// The mutable part of the controller.
#[derive(Default)]
struct Tables {
    workers: HashMap<u64, Worker>,
    sessions: HashMap<u64, Route>,
    ended: HashMap<u64, Ended>,
    ended_order: VecDeque<u64>,
}

impl Tables {
    fn record(&mut self, id: u64, why: Ended) {
        if self.ended.insert(id, why).is_none() {
            self.ended_order.push_back(id);
        }
        while self.ended_order.len() > ENDED_MEMORY {
            if let Some(old) = self.ended_order.pop_front() {
                self.ended.remove(&old);
            }
        }
    }

    /// Forgets session `id` (if routed), releasing its worker's load.
    fn end(&mut self, id: u64, why: Ended) -> Option<Route> {
        let route = self.sessions.remove(&id)?;
        if let Some(w) = self.workers.get_mut(&route.worker) {
            w.load = w.load.saturating_sub(1);
        }
        self.record(id, why);
        Some(route)
    }

    /// Removes worker `wid` and every session it held.
    fn drop_worker(&mut self, wid: u64, why: &str) {
        let Some(worker) = self.workers.remove(&wid) else {
            return;
        };
        let lost: Vec<u64> = self
            .sessions
            .iter()
            .filter(|(_, r)| r.worker == wid)
            .map(|(id, _)| *id)
            .collect();
        let reason = format!("worker-{wid} at {} {why}", worker.base);
        tracing::warn!(worker = wid, base = %worker.base, sessions = lost.len(), "{why}");
        for id in lost {
            self.sessions.remove(&id);
            self.record(id, Ended::WorkerLost(reason.clone()));
        }
    }
}

/// State shared by all handlers.
struct Shared {
    config: ControllerConfig,
    http: reqwest::Client,
    tables: Mutex<Tables>,
    next_session: AtomicU64,
    next_worker: AtomicU64,
}

impl Shared {
    /// Drops silent workers and expires idle sessions; returns the expired sessions' routes
    /// (with the worker base to cancel them on).
    fn sweep(&self) -> Vec<(String, String)> {
        let mut t = lock(&self.tables);
        let timeout = self.config.heartbeat_timeout;
        let dead: Vec<u64> = t
            .workers
            .iter()
            .filter(|(_, w)| w.last_beat.elapsed() > timeout)
            .map(|(id, _)| *id)
            .collect();
        for wid in dead {
            t.drop_worker(wid, "stopped heartbeating (worker lost)");
        }
        let ttl = self.config.session_ttl;
        let stale: Vec<u64> = t
            .sessions
            .iter()
            .filter(|(_, r)| r.busy == 0 && r.last_used.elapsed() > ttl)
            .map(|(id, _)| *id)
            .collect();
        let mut cancels = Vec::new();
        for id in stale {
            if let Some(route) = t.end(id, Ended::Expired)
                && let Some(w) = t.workers.get(&route.worker)
            {
                cancels.push((w.base.clone(), route.remote_id));
            }
        }
        cancels
    }

    /// Sweeps, then tells the workers to cancel the expired sessions (in the background).
    fn sweep_and_cancel(self: &Arc<Self>) {
        for (base, remote) in self.sweep() {
            let http = self.http.clone();
            tokio::spawn(async move {
                let url = format!("{base}/api/cancel");
                if let Err(e) = http.post(url).header(SESSION_HEADER, remote).send().await {
                    tracing::debug!("cancelling an expired session on {base}: {e}");
                }
            });
        }
    }

    /// The error for a request on session `id`, which is not routed.
    fn gone(&self, id: u64) -> ApiError {
        let why = lock(&self.tables).ended.get(&id).cloned();
        match why {
            Some(Ended::Finished(status)) => ApiError::new(
                StatusCode::CONFLICT,
                format!("session {id} already finished ({status}); start a new sample"),
            ),
            Some(Ended::Cancelled) => {
                ApiError::new(StatusCode::NOT_FOUND, format!("session {id} was cancelled"))
            }
            Some(Ended::Expired) => ApiError::new(
                StatusCode::NOT_FOUND,
                format!(
                    "session {id} expired after {:.1} s idle",
                    self.config.session_ttl.as_secs_f64()
                ),
            ),
            Some(Ended::WorkerLost(reason)) => ApiError::new(
                StatusCode::GONE,
                format!("session {id} is gone: worker lost ({reason}); start a new sample"),
            ),
            None => ApiError::new(StatusCode::NOT_FOUND, format!("unknown session id {id}")),
        }
    }

    /// Marks session `id` busy and returns its worker base and remote id.
    fn checkout(&self, id: u64) -> Result<(String, String), ApiError> {
        let timeout = self.config.heartbeat_timeout;
        let mut t = lock(&self.tables);
        let Some(route) = t.sessions.get(&id) else {
            drop(t);
            return Err(self.gone(id));
        };
        let wid = route.worker;
        let alive = t
            .workers
            .get(&wid)
            .is_some_and(|w| w.last_beat.elapsed() <= timeout);
        if !alive {
            t.drop_worker(wid, "stopped heartbeating (worker lost)");
            drop(t);
            return Err(self.gone(id));
        }
        let base = t
            .workers
            .get(&wid)
            .map(|w| w.base.clone())
            .unwrap_or_default();
        let Some(route) = t.sessions.get_mut(&id) else {
            drop(t);
            return Err(self.gone(id));
        };
        route.busy += 1;
        route.last_used = Instant::now();
        Ok((base, route.remote_id.clone()))
    }

    /// Undoes [`Shared::checkout`] (if the session is still routed).
    fn checkin(&self, id: u64, stepped: bool) {
        let mut t = lock(&self.tables);
        if let Some(route) = t.sessions.get_mut(&id) {
            route.busy = route.busy.saturating_sub(1);
            route.last_used = Instant::now();
            if stepped {
                route.steps += 1;
            }
        }
    }
}

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

/// Sends one request to a worker; a transport failure is a 502.
async fn forward(
    shared: &Shared,
    method: reqwest::Method,
    url: String,
    session: Option<&str>,
    body: Option<Bytes>,
) -> Result<Forwarded, ApiError> {
    let mut request = shared.http.request(method.clone(), &url);
    if let Some(s) = session {
        request = request.header(SESSION_HEADER, s);
    }
    if let Some(b) = body {
        request = request
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(b.to_vec());
    }
    let bad_gateway = |e: reqwest::Error| {
        ApiError::new(
            StatusCode::BAD_GATEWAY,
            format!("worker request {method} {url} failed: {e}"),
        )
    };
    let response = request.send().await.map_err(bad_gateway)?;
    let status =
        StatusCode::from_u16(response.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let headers = response.headers().clone();
    let body = response.bytes().await.map_err(bad_gateway)?;
    Ok(Forwarded {
        status,
        headers,
        body,
    })
}

/// A configured controller.
#[derive(Clone)]
pub struct Controller {
    shared: Arc<Shared>,
}

impl Controller {
    /// A controller with no workers yet.
    pub fn new(config: ControllerConfig) -> Result<Self> {
        if config.heartbeat_timeout.is_zero() || config.session_ttl.is_zero() {
            return Err(Error::Config(
                "heartbeat_timeout and session_ttl must be positive".into(),
            ));
        }
        if config.token.as_deref().is_some_and(|t| t.trim().is_empty()) {
            return Err(Error::Config("the controller token is empty".into()));
        }
        let http = reqwest::Client::builder()
            .timeout(config.request_timeout)
            .connect_timeout(Duration::from_secs(5))
            .no_proxy()
            .build()
            .map_err(|e| Error::Config(format!("cannot build an HTTP client: {e}")))?;
        Ok(Controller {
            shared: Arc::new(Shared {
                config,
                http,
                tables: Mutex::new(Tables::default()),
                next_session: AtomicU64::new(1),
                next_worker: AtomicU64::new(1),
            }),
        })
    }

    /// The HTTP routes (all under `/api`), behind the token check when a token is set.
    pub fn router(&self) -> Router {
        Router::new()
            .route("/api/get_indices", get(get_indices))
            .route("/api/start_sample", post(start_sample))
            .route("/api/interact", post(interact))
            .route("/api/cancel", post(cancel))
            .route("/api/list_workers", get(list_workers))
            .route("/api/list_sessions", get(list_sessions))
            .route("/api/register", post(register))
            .route("/api/heartbeat", post(heartbeat))
            .fallback(not_found)
            .layer(middleware::from_fn_with_state(
                self.shared.clone(),
                check_token,
            ))
            .with_state(self.shared.clone())
    }

    /// Drops silent workers and expires idle sessions now.
    pub fn sweep(&self) {
        self.shared.sweep_and_cancel();
    }

    /// Number of routed sessions.
    pub fn session_count(&self) -> usize {
        lock(&self.shared.tables).sessions.len()
    }

    /// Number of live workers.
    pub fn worker_count(&self) -> usize {
        lock(&self.shared.tables).workers.len()
    }

    /// Sessions routed to each worker, by worker id.
    pub fn loads(&self) -> HashMap<String, usize> {
        lock(&self.shared.tables)
            .workers
            .iter()
            .map(|(id, w)| (format!("worker-{id}"), w.load))
            .collect()
    }

    fn spawn_sweeper(&self) -> JoinHandle<()> {
        let c = &self.shared.config;
        let period = (c.heartbeat_timeout.min(c.session_ttl) / 4)
            .clamp(Duration::from_millis(10), Duration::from_secs(1));
        super::periodic::spawn_sweeper(&self.shared, period, |shared| {
            shared.sweep_and_cancel();
        })
    }
}

/// A running controller: stop it with [`ServiceHandle::shutdown`].
pub type ControllerHandle = ServiceHandle<Controller>;

impl ControllerHandle {
    /// The controller's state (counts, manual sweeps).
    pub fn controller(&self) -> &Controller {
        &self.state
    }
}

/// Binds `addr` (port 0 picks a free port), serves a controller on it and returns the bound
/// address.
pub async fn serve_controller(
    addr: SocketAddr,
    config: ControllerConfig,
) -> Result<(SocketAddr, ControllerHandle)> {
    let controller = Controller::new(config)?;
    let sweeper = controller.spawn_sweeper();
    let (bound, serving) = Serving::start("controller", addr, controller.router(), sweeper).await?;
    let state = controller;
    Ok((bound, ServiceHandle { serving, state }))
}

/// Compares without an early exit, so the answer time does not leak the token.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn check_token(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    if let Some(token) = &shared.config.token {
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        let ok = given.is_some_and(|g| same_secret(g.as_bytes(), token.as_bytes()));
        if !ok {
            let why = if given.is_some() {
                "wrong bearer token"
            } else {
                "missing `Authorization: Bearer TOKEN` header"
            };
            let mut response = ApiError::new(StatusCode::UNAUTHORIZED, why).into_response();
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return response;
        }
    }
    next.run(request).await
}

async fn not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "no such route; the controller serves /api/get_indices, /api/start_sample, \
         /api/interact, /api/cancel, /api/list_workers, /api/list_sessions, /api/register \
         and /api/heartbeat",
    )
}

/// The least-loaded live worker serving `env` below its capacity, other than those in `skip`;
/// reserves one session on it.
fn pick(shared: &Shared, env: &str, skip: &[u64]) -> Result<(u64, String), ApiError> {
    let timeout = shared.config.heartbeat_timeout;
    let mut t = lock(&shared.tables);
    let mut serving = 0;
    let mut best: Option<(u64, usize)> = None;
    for (id, w) in &t.workers {
        if w.last_beat.elapsed() > timeout || !w.envs.iter().any(|e| e == env) {
            continue;
        }
        if skip.contains(id) {
            continue;
        }
        serving += 1;
        if w.load >= w.capacity {
            continue;
        }
        if best.is_none_or(|(bid, bload)| (w.load, *id) < (bload, bid)) {
            best = Some((*id, w.load));
        }
    }
    let Some((wid, _)) = best else {
        let message = if serving == 0 {
            let mut served: Vec<&str> = t
                .workers
                .values()
                .flat_map(|w| w.envs.iter().map(String::as_str))
                .collect();
            served.sort_unstable();
            served.dedup();
            format!(
                "no live worker serves env `{env}` (live workers serve: {})",
                served.join(", ")
            )
        } else {
            format!("every worker serving env `{env}` is at capacity; try again later")
        };
        return Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, message));
    };
    let Some(w) = t.workers.get_mut(&wid) else {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the chosen worker vanished",
        ));
    };
    w.load += 1;
    Ok((wid, w.base.clone()))
}

/// Releases a reservation made by [`pick`] for a start that failed.
fn unreserve(shared: &Shared, wid: u64) {
    if let Some(w) = lock(&shared.tables).workers.get_mut(&wid) {
        w.load = w.load.saturating_sub(1);
    }
}

async fn get_indices(
    State(shared): State<Arc<Shared>>,
    query: std::result::Result<Query<IndicesQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(query) = query.map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!(
                "invalid query ({}); expected ?name=ENV[&split=train|test]",
                e.body_text()
            ),
        )
    })?;
    let (wid, base) = pick(&shared, &query.name, &[])?;
    unreserve(&shared, wid);
    let split = query.split.unwrap_or(Split::Test);
    let url = format!(
        "{base}/api/get_indices?name={}&split={split}",
        encode(&query.name)
    );
    Ok(forward(&shared, reqwest::Method::GET, url, None, None)
        .await?
        .respond(None))
}

/// Percent-encodes a query value.
fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

async fn start_sample(
    State(shared): State<Arc<Shared>>,
    body: std::result::Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let request: StartSampleRequest = parse_body(&body, "start_sample")?;
    let raw = body.unwrap_or_default();
    // A worker that cannot be reached (it died since its last heartbeat) is skipped and the
    // next least-loaded one tried; its heartbeat timeout removes it for good.
    let mut unreachable = Vec::new();
    let (wid, base, answer) = loop {
        let (wid, base) = match pick(&shared, &request.name, &unreachable) {
            Ok(picked) => picked,
            Err(e) if unreachable.is_empty() => return Err(e),
            Err(e) => {
                return Err(ApiError::new(
                    StatusCode::BAD_GATEWAY,
                    format!(
                        "{} worker(s) for env `{}` could not be reached and no other is left ({})",
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
            format!("{base}/api/start_sample"),
            None,
            Some(raw.clone()),
        )
        .await;
        match answer {
            Ok(a) if a.status.is_success() => break (wid, base, a),
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

async fn interact(
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
    let (base, remote) = shared.checkout(id)?;
    let answer = forward(
        &shared,
        reqwest::Method::POST,
        format!("{base}/api/interact"),
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

async fn cancel(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
) -> Result<Json<CancelResponse>, ApiError> {
    let id = session_id(&headers)?;
    let (base, remote) = shared.checkout(id)?;
    let removed = lock(&shared.tables).end(id, Ended::Cancelled);
    if removed.is_none() {
        return Err(shared.gone(id));
    }
    match forward(
        &shared,
        reqwest::Method::POST,
        format!("{base}/api/cancel"),
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

async fn list_workers(State(shared): State<Arc<Shared>>) -> Json<Vec<WorkerInfo>> {
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

async fn list_sessions(State(shared): State<Arc<Shared>>) -> Json<Vec<SessionInfo>> {
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

/// `http://HOST:PORT` for `address`, without a trailing slash.
fn normalize(address: &str) -> String {
    let trimmed = address.trim().trim_end_matches('/');
    if trimmed.contains("://") {
        trimmed.to_string()
    } else {
        format!("http://{trimmed}")
    }
}

async fn register(
    State(shared): State<Arc<Shared>>,
    body: std::result::Result<Bytes, BytesRejection>,
) -> Result<Json<RegisterResponse>, ApiError> {
    let request: RegisterRequest = parse_body(&body, "register")?;
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

async fn heartbeat(
    State(shared): State<Arc<Shared>>,
    body: std::result::Result<Bytes, BytesRejection>,
) -> Result<Json<HeartbeatResponse>, ApiError> {
    let request: HeartbeatRequest = parse_body(&body, "heartbeat")?;
    let unknown = || {
        ApiError::new(
            StatusCode::NOT_FOUND,
            format!("unknown worker `{}`; register again", request.worker_id),
        )
    };
    let wid: u64 = request
        .worker_id
        .strip_prefix("worker-")
        .and_then(|n| n.parse().ok())
        .ok_or_else(unknown)?;
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
#[derive(Debug, Clone, PartialEq)]
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
    /// Time between heartbeats.
    pub interval: Duration,
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
        let message = serde_json::from_slice::<ErrorBody>(&bytes)
            .map(|b| b.error)
            .unwrap_or_else(|_| String::from_utf8_lossy(&bytes).into_owned());
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
