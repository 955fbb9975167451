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
//! A worker whose env server requires its own token registers it
//! ([`RegisterRequest::worker_token`]); the controller keeps it per worker, never lists or logs
//! it, and sends it on every request it makes to that worker. A 401 from a worker (it
//! registered a token it does not accept) reaches the client as a 502 that names the worker.
//! A new session whose chosen worker cannot be reached goes to the next least-loaded one; 502
//! when none can be reached, or when the worker of a running session cannot; no worker for an
//! env gets 503.
//!
//! The code is split by concern: this file has the public front ([`Controller`], its config,
//! router and token check, [`serve_controller`]); `tables` keeps the worker and session
//! bookkeeping; `routes` has the client-facing handlers that forward to workers; `registration`
//! has the `register`/`heartbeat` handlers and the worker side ([`register_worker`]).

mod registration;
mod routes;
mod tables;

pub(crate) use registration::{parse_heartbeat_body, parse_register_body};

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentrl_core::{Error, Result};
use axum::Router;
use axum::http::StatusCode;
use axum::routing::{get, post};
use tokio::task::JoinHandle;

use super::http::{ApiError, ServiceHandle, Serving, check_token_config, with_token};
use crate::locking::lock;
use tables::{Shared, Tables};

pub use registration::{
    HeartbeatRequest, HeartbeatResponse, RegisterRequest, RegisterResponse, RegistrationHandle,
    WorkerRegistration, register_worker,
};

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
        check_token_config(config.token.as_deref(), "controller")?;
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
        let routes = Router::new()
            .route("/api/get_indices", get(routes::get_indices))
            .route("/api/start_sample", post(routes::start_sample))
            .route("/api/interact", post(routes::interact))
            .route("/api/cancel", post(routes::cancel))
            .route("/api/list_workers", get(routes::list_workers))
            .route("/api/list_sessions", get(routes::list_sessions))
            .route("/api/register", post(registration::register))
            .route("/api/heartbeat", post(registration::heartbeat))
            .fallback(not_found)
            .with_state(self.shared.clone());
        with_token(routes, self.shared.config.token.as_deref())
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
    let has_token = config.token.is_some();
    let controller = Controller::new(config)?;
    let sweeper = controller.spawn_sweeper();
    let (bound, serving) = Serving::start("controller", addr, controller.router(), sweeper).await?;
    super::http::warn_if_exposed("controller", bound, has_token);
    let state = controller;
    Ok((bound, ServiceHandle { serving, state }))
}

async fn not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "no such route; the controller serves /api/get_indices, /api/start_sample, \
         /api/interact, /api/cancel, /api/list_workers, /api/list_sessions, /api/register \
         and /api/heartbeat",
    )
}
