//! Why a session is gone, as the env server and the controller remember it: a bounded log of
//! ended session ids and the error answer for a request on one of them.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use axum::http::StatusCode;

use super::SampleStatus;
use super::http::ApiError;

/// How many ended session ids are remembered, to say why a late request fails.
const ENDED_MEMORY: usize = 65_536;

/// Why a session is gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ended {
    /// Its episode finished with this status.
    Finished(SampleStatus),
    /// `cancel` removed it.
    Cancelled,
    /// It sat idle for longer than the TTL.
    Expired,
    /// The worker that held it was lost (controller only); the reason names the worker.
    WorkerLost(String),
}

/// Ended session ids with why they ended, oldest first, bounded by [`ENDED_MEMORY`].
#[derive(Default)]
pub(crate) struct EndedLog {
    reasons: HashMap<u64, Ended>,
    order: VecDeque<u64>,
}

impl EndedLog {
    /// Remembers that session `id` ended for `why`, forgetting the oldest beyond the bound.
    pub(crate) fn record(&mut self, id: u64, why: Ended) {
        if self.reasons.insert(id, why).is_none() {
            self.order.push_back(id);
        }
        while self.order.len() > ENDED_MEMORY {
            if let Some(old) = self.order.pop_front() {
                self.reasons.remove(&old);
            }
        }
    }

    /// The error answer for a request on session `id`, which is not live; `ttl` is the idle
    /// time after which sessions expire.
    pub(crate) fn gone(&self, id: u64, ttl: Duration) -> ApiError {
        match self.reasons.get(&id) {
            Some(Ended::Finished(status)) => ApiError::new(
                StatusCode::CONFLICT,
                format!("session {id} already finished ({status}); start a new sample"),
            ),
            Some(Ended::Cancelled) => {
                ApiError::new(StatusCode::NOT_FOUND, format!("session {id} was cancelled"))
            }
            Some(Ended::Expired) => ApiError::new(
                StatusCode::NOT_FOUND,
                format!("session {id} expired after {:.1} s idle", ttl.as_secs_f64()),
            ),
            Some(Ended::WorkerLost(reason)) => ApiError::new(
                StatusCode::GONE,
                format!("session {id} is gone: worker lost ({reason}); start a new sample"),
            ),
            None => ApiError::new(StatusCode::NOT_FOUND, format!("unknown session id {id}")),
        }
    }
}
