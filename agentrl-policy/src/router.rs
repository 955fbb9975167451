//! [`RouterPolicy`]: spreads generation over several backends (e.g. one
//! [`crate::http::HttpPolicy`] per serving process). A request goes to the backend with the
//! fewest outstanding requests; every later turn of the same session (see
//! [`GenerationRequest::session`]) goes to the backend that served its first turn, so that
//! backend's prefix cache is reused.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use agentrl_core::{Error, Generation, GenerationRequest, Policy, Result};
use async_trait::async_trait;

use crate::fanout::fan_out;

/// Sessions remembered by default; the oldest are forgotten first.
pub const DEFAULT_SESSION_CAPACITY: usize = 100_000;

/// Session id → backend, forgetting the oldest sessions beyond a capacity.
#[derive(Debug, Default)]
struct Sessions {
    map: HashMap<String, usize>,
    order: VecDeque<String>,
}

/// A [`Policy`] over several backends: least outstanding requests, sticky sessions.
pub struct RouterPolicy {
    backends: Vec<Arc<dyn Policy>>,
    outstanding: Arc<Vec<AtomicUsize>>,
    sessions: Mutex<Sessions>,
    capacity: usize,
}

impl RouterPolicy {
    /// A router over `backends` (at least one).
    pub fn new(backends: Vec<Arc<dyn Policy>>) -> Result<Self> {
        if backends.is_empty() {
            return Err(Error::Config(
                "RouterPolicy needs at least one backend".into(),
            ));
        }
        Ok(RouterPolicy {
            outstanding: Arc::new(backends.iter().map(|_| AtomicUsize::new(0)).collect()),
            backends,
            sessions: Mutex::new(Sessions::default()),
            capacity: DEFAULT_SESSION_CAPACITY,
        })
    }

    /// Remembers at most `capacity` sessions (at least 1).
    pub fn with_session_capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity.max(1);
        self
    }

    /// Requests in flight per backend.
    pub fn outstanding(&self) -> Vec<usize> {
        self.outstanding
            .iter()
            .map(|c| c.load(Ordering::Acquire))
            .collect()
    }

    /// The backend a session is pinned to, if it has been seen.
    pub fn backend_of(&self, session: &str) -> Option<usize> {
        self.sessions
            .lock()
            .ok()
            .and_then(|s| s.map.get(session).copied())
    }

    /// Picks a backend for `request` and counts it as outstanding there.
    fn assign(&self, sessions: &mut Sessions, request: &GenerationRequest) -> usize {
        let pinned = request
            .session
            .as_ref()
            .and_then(|s| sessions.map.get(s).copied());
        let b = pinned.unwrap_or_else(|| {
            let loads = self.outstanding();
            (0..loads.len()).min_by_key(|&i| loads[i]).unwrap_or(0)
        });
        if pinned.is_none()
            && let Some(s) = &request.session
        {
            sessions.map.insert(s.clone(), b);
            sessions.order.push_back(s.clone());
            while sessions.order.len() > self.capacity {
                if let Some(old) = sessions.order.pop_front() {
                    sessions.map.remove(&old);
                }
            }
        }
        self.outstanding[b].fetch_add(1, Ordering::AcqRel);
        b
    }
}

#[async_trait]
impl Policy for RouterPolicy {
    async fn generate(&self, requests: Vec<GenerationRequest>) -> Result<Vec<Generation>> {
        let choice: Vec<usize> = {
            let mut sessions = self
                .sessions
                .lock()
                .map_err(|_| Error::Policy("router session table poisoned".into()))?;
            requests
                .iter()
                .map(|r| self.assign(&mut sessions, r))
                .collect()
        };
        let counts = self.outstanding.clone();
        let release = Arc::new(move |b: usize, rows: usize| {
            counts[b].fetch_sub(rows, Ordering::AcqRel);
        });
        fan_out(&self.backends, &choice, requests, release).await
    }

    /// The lowest version among the backends (the stalest weights a generation may come from).
    fn version(&self) -> u64 {
        self.backends.iter().map(|b| b.version()).min().unwrap_or(0)
    }

    /// Tells the session's backend, and forgets the pin.
    fn end_session(&self, session: &str) {
        let backend = self
            .sessions
            .lock()
            .ok()
            .and_then(|mut s| s.map.remove(session));
        if let Some(b) = backend.and_then(|b| self.backends.get(b)) {
            b.end_session(session);
        }
    }
}
