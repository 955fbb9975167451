//! [`RouterPolicy`]: spreads generation over several backends (e.g. one
//! [`crate::http::HttpPolicy`] per serving process). A request goes to the backend with the
//! fewest outstanding requests; every later turn of the same session (see
//! [`GenerationRequest::session`]) goes to the backend that served its first turn, so that
//! backend's prefix cache is reused. A backend can be taken out ([`RouterPolicy::remove`], e.g.
//! a server that failed a weight push): it gets no new requests, and a session pinned to it
//! moves on its next turn to the live backend with the fewest outstanding requests (the whole
//! prompt travels with every turn, so the session goes on there without its prefix cache).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
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
    live: Vec<AtomicBool>,
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
            live: backends.iter().map(|_| AtomicBool::new(true)).collect(),
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

    /// Takes backend `index` out of rotation: no new request goes to it, and sessions pinned to
    /// it move to a live backend on their next turn. Returns how many backends are left; an
    /// index out of range is an error.
    pub fn remove(&self, index: usize) -> Result<usize> {
        let flag = self.live.get(index).ok_or_else(|| {
            Error::Config(format!(
                "RouterPolicy::remove: no backend {index} (there are {})",
                self.live.len()
            ))
        })?;
        flag.store(false, Ordering::Release);
        Ok(self.live_backends().len())
    }

    /// The indices of the backends still in rotation.
    pub fn live_backends(&self) -> Vec<usize> {
        (0..self.live.len()).filter(|&i| self.is_live(i)).collect()
    }

    /// Whether backend `index` is still in rotation.
    fn is_live(&self, index: usize) -> bool {
        self.live
            .get(index)
            .is_some_and(|l| l.load(Ordering::Acquire))
    }

    /// The backend a session is pinned to, if it has been seen.
    pub fn backend_of(&self, session: &str) -> Option<usize> {
        self.sessions
            .lock()
            .ok()
            .and_then(|s| s.map.get(session).copied())
    }

    /// Picks a live backend for `request` and counts it as outstanding there (`None` when
    /// every backend was removed). A session pinned to a removed backend is pinned anew.
    fn assign(&self, sessions: &mut Sessions, request: &GenerationRequest) -> Option<usize> {
        let pinned = request
            .session
            .as_ref()
            .and_then(|s| sessions.map.get(s).copied())
            .filter(|&b| self.is_live(b));
        let b = match pinned {
            Some(b) => b,
            None => {
                let loads = self.outstanding();
                let b = self.live_backends().into_iter().min_by_key(|&i| loads[i])?;
                if let Some(s) = &request.session {
                    self.pin(sessions, s, b);
                }
                b
            }
        };
        self.outstanding[b].fetch_add(1, Ordering::AcqRel);
        Some(b)
    }

    /// Pins `session` to backend `b`, forgetting the oldest sessions beyond the capacity.
    fn pin(&self, sessions: &mut Sessions, session: &str, b: usize) {
        if sessions.map.insert(session.to_string(), b).is_none() {
            sessions.order.push_back(session.to_string());
        }
        while sessions.order.len() > self.capacity {
            if let Some(old) = sessions.order.pop_front() {
                sessions.map.remove(&old);
            }
        }
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
            let mut choice = Vec::with_capacity(requests.len());
            for r in &requests {
                match self.assign(&mut sessions, r) {
                    Some(b) => choice.push(b),
                    None => {
                        for &b in &choice {
                            self.outstanding[b].fetch_sub(1, Ordering::AcqRel);
                        }
                        return Err(Error::Policy(
                            "router: every backend was removed; none is left to generate".into(),
                        ));
                    }
                }
            }
            choice
        };
        let counts = self.outstanding.clone();
        let release = Arc::new(move |b: usize, rows: usize| {
            counts[b].fetch_sub(rows, Ordering::AcqRel);
        });
        fan_out(&self.backends, &choice, requests, release).await
    }

    /// The lowest version among the live backends (the stalest weights a generation may come
    /// from).
    fn version(&self) -> u64 {
        self.live_backends()
            .into_iter()
            .map(|i| self.backends[i].version())
            .min()
            .unwrap_or(0)
    }

    /// Tells the session's backend, and forgets the pin.
    fn end_session(&self, session: &str) {
        let backend = self
            .sessions
            .lock()
            .ok()
            .and_then(|mut s| s.map.remove(session));
        if let Some(b) = backend
            .filter(|&b| self.is_live(b))
            .and_then(|b| self.backends.get(b))
        {
            b.end_session(session);
        }
    }
}
