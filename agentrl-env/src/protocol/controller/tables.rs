//! The controller's bookkeeping: live workers, routed sessions and why ended ones ended, with
//! the sweeps that drop silent workers and idle sessions and the pick of a worker for a new
//! session.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::http::StatusCode;

use super::ControllerConfig;
use crate::locking::lock;
use crate::protocol::SESSION_HEADER;
use crate::protocol::ended::{Ended, EndedLog};
use crate::protocol::http::ApiError;

/// One registered worker.
pub(super) struct Worker {
    /// Base URL of its env server (`http://HOST:PORT`).
    pub(super) base: String,
    /// Env ids it serves.
    pub(super) envs: Vec<String>,
    /// Most sessions the controller sends it.
    pub(super) capacity: usize,
    /// The bearer token its env server requires (from its registration; never listed or
    /// logged).
    pub(super) token: Option<String>,
    /// When it last registered or heartbeat.
    pub(super) last_beat: Instant,
    /// Sessions routed to it (including starts in flight).
    pub(super) load: usize,
}

impl Worker {
    /// Where and how to reach it.
    pub(super) fn addr(&self) -> WorkerAddr {
        WorkerAddr {
            base: self.base.clone(),
            token: self.token.clone(),
        }
    }
}

/// How the controller reaches one worker: its base URL and the bearer token it requires.
#[derive(Clone)]
pub(super) struct WorkerAddr {
    /// Base URL of its env server (`http://HOST:PORT`).
    pub(super) base: String,
    /// The bearer token its env server requires, if any.
    token: Option<String>,
}

impl WorkerAddr {
    /// A request for `route` (e.g. `/api/interact`) on this worker, with its token.
    pub(super) fn request(
        &self,
        http: &reqwest::Client,
        method: reqwest::Method,
        route: &str,
    ) -> reqwest::RequestBuilder {
        let request = http.request(method, format!("{}{route}", self.base));
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }
}

/// One routed session.
pub(super) struct Route {
    /// The worker that holds the session.
    pub(super) worker: u64,
    /// The session's id on that worker.
    pub(super) remote_id: String,
    /// Env id.
    pub(super) env: String,
    /// Task id (`split:index`, or the custom task's id).
    pub(super) task_id: String,
    /// Steps taken through the controller.
    pub(super) steps: u64,
    /// When a request last used it.
    pub(super) last_used: Instant,
    /// Requests on it in flight (an in-use session never expires).
    pub(super) busy: usize,
}

/// The mutable part of the controller.
#[derive(Default)]
pub(super) struct Tables {
    /// Live workers by controller-side id.
    pub(super) workers: HashMap<u64, Worker>,
    /// Routed sessions by controller-side session id.
    pub(super) sessions: HashMap<u64, Route>,
    /// Why recent sessions ended.
    ended: EndedLog,
}

impl Tables {
    /// Forgets session `id` (if routed), releasing its worker's load.
    pub(super) fn end(&mut self, id: u64, why: Ended) -> Option<Route> {
        let route = self.sessions.remove(&id)?;
        if let Some(w) = self.workers.get_mut(&route.worker) {
            w.load = w.load.saturating_sub(1);
        }
        self.ended.record(id, why);
        Some(route)
    }

    /// Removes worker `wid` and every session it held.
    pub(super) fn drop_worker(&mut self, wid: u64, why: &str) {
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
            self.ended.record(id, Ended::WorkerLost(reason.clone()));
        }
    }
}

/// State shared by all handlers.
pub(super) struct Shared {
    pub(super) config: ControllerConfig,
    /// Client for requests to workers.
    pub(super) http: reqwest::Client,
    /// Workers, sessions and ended sessions.
    pub(super) tables: Mutex<Tables>,
    /// The next controller-side session id.
    pub(super) next_session: AtomicU64,
    /// The next worker id.
    pub(super) next_worker: AtomicU64,
}

impl Shared {
    /// Drops silent workers and expires idle sessions; returns the expired sessions' routes
    /// (with the worker to cancel them on).
    fn sweep(&self) -> Vec<(WorkerAddr, String)> {
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
                cancels.push((w.addr(), route.remote_id));
            }
        }
        cancels
    }

    /// Sweeps, then tells the workers to cancel the expired sessions (in the background).
    pub(super) fn sweep_and_cancel(self: &Arc<Self>) {
        for (worker, remote) in self.sweep() {
            let http = self.http.clone();
            tokio::spawn(async move {
                let request = worker.request(&http, reqwest::Method::POST, "/api/cancel");
                if let Err(e) = request.header(SESSION_HEADER, remote).send().await {
                    tracing::debug!("cancelling an expired session on {}: {e}", worker.base);
                }
            });
        }
    }

    /// The error for a request on session `id`, which is not routed.
    pub(super) fn gone(&self, id: u64) -> ApiError {
        lock(&self.tables).ended.gone(id, self.config.session_ttl)
    }

    /// Marks session `id` busy and returns its worker and remote id.
    pub(super) fn checkout(&self, id: u64) -> Result<(WorkerAddr, String), ApiError> {
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
        let Some(worker) = t.workers.get(&wid).map(Worker::addr) else {
            drop(t);
            return Err(self.gone(id));
        };
        let Some(route) = t.sessions.get_mut(&id) else {
            drop(t);
            return Err(self.gone(id));
        };
        route.busy += 1;
        route.last_used = Instant::now();
        Ok((worker, route.remote_id.clone()))
    }

    /// Undoes [`Shared::checkout`] (if the session is still routed).
    pub(super) fn checkin(&self, id: u64, stepped: bool) {
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

/// The least-loaded live worker serving `env` below its capacity, other than those in `skip`;
/// reserves one session on it.
pub(super) fn pick(
    shared: &Shared,
    env: &str,
    skip: &[u64],
) -> Result<(u64, WorkerAddr), ApiError> {
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
    Ok((wid, w.addr()))
}

/// Releases a reservation made by [`pick`] for a start that failed.
pub(super) fn unreserve(shared: &Shared, wid: u64) {
    if let Some(w) = lock(&shared.tables).workers.get_mut(&wid) {
        w.load = w.load.saturating_sub(1);
    }
}
