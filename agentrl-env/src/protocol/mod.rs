//! The env HTTP protocol: env sessions served over HTTP (JSON, all routes under `/api`), in the
//! shape of AgentRL's env-server/controller API, and a client that plays them as an ordinary
//! [`Env`](agentrl_core::Env).
//!
//! | route | request | answer |
//! |---|---|---|
//! | `GET /api/get_indices?name=ENV[&split=train\|test]` | | JSON list of task indices (default split: `test`) |
//! | `POST /api/start_sample` | [`StartSampleRequest`] | [`StartSampleResponse`], session id in the `session_id` header |
//! | `POST /api/interact` | header `session_id`, [`InteractRequest`] | [`InteractResponse`] |
//! | `POST /api/cancel` | header `session_id` | [`CancelResponse`] |
//! | `GET /api/list_workers` | | list of [`WorkerInfo`] |
//! | `GET /api/list_sessions` | | list of [`SessionInfo`] |
//!
//! Every error is a JSON object [`ErrorBody`] `{"error": "..."}` with a 4xx/5xx status:
//! 400 for a body that is not JSON, a missing `session_id` header or an unknown env name (the
//! message lists the known ids), 422 for JSON that misses or mistypes fields, 404 for an
//! unknown, expired or cancelled session, 409 for a session whose episode already finished,
//! 503 when the server holds its maximum number of sessions, 500 when an env fails to start.
//!
//! [`server`] serves any set of [`crate::EnvFactory`]s; [`client`] has
//! [`client::RemoteEnv`] and [`client::RemoteEnvFactory`], with
//! which the trainer trains against remote envs exactly as against in-process ones;
//! [`controller`] fronts many env servers behind one address.

mod answer;
pub mod chaos;
pub mod client;
pub mod controller;
mod ended;
#[doc(hidden)]
pub mod fuzzing;
mod http;
mod periodic;
pub mod server;

use agentrl_core::{Message, Split, Step, StepInfo, Task, ToolSpec};
use serde::{Deserialize, Serialize};

pub use answer::MAX_ANSWER_BYTES;
pub use chaos::ChaosConfig;
pub use client::{ClientConfig, ProtocolClient, RemoteEnv, RemoteEnvFactory};
pub use controller::{
    Controller, ControllerConfig, ControllerHandle, RegistrationHandle, WorkerRegistration,
    register_worker, serve_controller,
};
pub use http::ServiceHandle;
pub use server::{EnvServer, ServerConfig, ServerHandle, serve};

/// Name of the HTTP header that carries the session id (answer of `start_sample`, request of
/// `interact` and `cancel`).
pub const SESSION_HEADER: &str = "session_id";

/// The `get_indices` route (path and query) for env `name` and `split`.
pub(crate) fn indices_route(name: &str, split: Split) -> String {
    format!("/api/get_indices?name={}&split={split}", encode(name))
}

/// Percent-encodes a query value (env ids are plain, but never trust that).
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

/// Where a sample (one episode on the server) stands, as `interact` reports it.
///
/// How an env [`Step`] maps to a status:
/// - `terminated` → [`Completed`](SampleStatus::Completed) (finished);
/// - `truncated` (turn limit) → [`TaskLimitReached`](SampleStatus::TaskLimitReached) (finished);
/// - not done, with [`StepInfo::invalid_action`] → [`AgentInvalidAction`](SampleStatus::AgentInvalidAction)
///   (the episode goes on: the env answered with an error observation);
/// - not done otherwise → [`Running`](SampleStatus::Running);
/// - the env's `step` returned `Err` (or panicked) → [`TaskError`](SampleStatus::TaskError)
///   (finished, the message is in [`InteractResponse::error`]).
///
/// A session ended by `cancel` is [`Cancelled`](SampleStatus::Cancelled). `AgentContextLimit`
/// and `AgentValidationFailed` are never produced by this server (they are the agent side's to
/// report) but are part of the vocabulary so that clients can use one type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SampleStatus {
    /// The episode goes on.
    Running,
    /// The env reached a terminal state.
    Completed,
    /// The agent ran out of context.
    AgentContextLimit,
    /// The agent's output failed validation.
    AgentValidationFailed,
    /// The agent's action could not be carried out; the episode goes on.
    AgentInvalidAction,
    /// The episode hit its turn limit.
    TaskLimitReached,
    /// The env failed.
    TaskError,
    /// The session was cancelled.
    Cancelled,
}

impl SampleStatus {
    /// The status that reports `step` (see the type's docs for the mapping).
    pub fn of_step(step: &Step) -> Self {
        if step.terminated {
            SampleStatus::Completed
        } else if step.truncated {
            SampleStatus::TaskLimitReached
        } else if step.info.invalid_action.is_some() {
            SampleStatus::AgentInvalidAction
        } else {
            SampleStatus::Running
        }
    }

    /// Whether the sample is over in this status.
    pub fn is_finished(self) -> bool {
        !matches!(
            self,
            SampleStatus::Running | SampleStatus::AgentInvalidAction
        )
    }

    /// The snake_case name used on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            SampleStatus::Running => "running",
            SampleStatus::Completed => "completed",
            SampleStatus::AgentContextLimit => "agent_context_limit",
            SampleStatus::AgentValidationFailed => "agent_validation_failed",
            SampleStatus::AgentInvalidAction => "agent_invalid_action",
            SampleStatus::TaskLimitReached => "task_limit_reached",
            SampleStatus::TaskError => "task_error",
            SampleStatus::Cancelled => "cancelled",
        }
    }
}

impl std::fmt::Display for SampleStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Query of `GET /api/get_indices`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndicesQuery {
    /// Env id.
    pub name: String,
    /// Which split (default: test).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split: Option<Split>,
}

/// Body of `POST /api/start_sample`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StartSampleRequest {
    /// Env id.
    pub name: String,
    /// Task index within `split`; required unless `custom_task` is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u64>,
    /// Split of `index` (default: test).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split: Option<Split>,
    /// A full task to run instead of the generated one; its `env_id` must equal `name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_task: Option<Task>,
}

/// Answer of `POST /api/start_sample` (the session id is in the `session_id` header).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StartSampleResponse {
    /// Initial messages of the episode.
    pub messages: Vec<Message>,
    /// Tools the agent may call.
    pub tools: Vec<ToolSpec>,
}

/// Body of `POST /api/interact`: exactly one assistant message (the action).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InteractRequest {
    /// The action, as a one-element list.
    pub messages: Vec<Message>,
}

/// Answer of `POST /api/interact`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InteractResponse {
    /// Whether the sample is over (the session is gone afterwards).
    pub finish: bool,
    /// Reward of this step.
    pub reward: f64,
    /// Where the sample stands.
    pub status: SampleStatus,
    /// Messages the env adds to the conversation.
    pub messages: Vec<Message>,
    /// The env's step facts (tool calls, invalid action, success, score, ...).
    #[serde(default)]
    pub metrics: StepInfo,
    /// With status `task_error`: what failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl InteractResponse {
    /// The response that reports `step`.
    pub fn from_step(step: Step) -> Self {
        let status = SampleStatus::of_step(&step);
        InteractResponse {
            finish: status.is_finished(),
            reward: step.reward,
            status,
            messages: step.messages,
            metrics: step.info,
            error: None,
        }
    }

    /// The env [`Step`] this response reports (`None` for `task_error`/`cancelled`, which are
    /// not steps). A finished status other than `completed` counts as truncated.
    pub fn to_step(&self) -> Option<Step> {
        if matches!(
            self.status,
            SampleStatus::TaskError | SampleStatus::Cancelled
        ) {
            return None;
        }
        let terminated = self.status == SampleStatus::Completed;
        Some(Step {
            messages: self.messages.clone(),
            reward: self.reward,
            terminated,
            truncated: self.finish && !terminated,
            info: self.metrics.clone(),
        })
    }
}

/// Answer of `POST /api/cancel`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CancelResponse {
    /// The cancelled session.
    pub session_id: String,
    /// Always `cancelled`.
    pub status: SampleStatus,
}

/// One worker (env server) as `list_workers` describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerInfo {
    /// Worker name.
    pub id: String,
    /// Env ids it serves.
    pub envs: Vec<String>,
    /// Live sessions.
    pub sessions: usize,
    /// Most sessions it holds at once.
    pub max_sessions: usize,
    /// Idle time after which a session expires, in seconds.
    pub session_ttl_secs: f64,
}

/// One live session as `list_sessions` describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionInfo {
    /// Session id.
    pub session_id: String,
    /// Env id.
    pub env: String,
    /// Task id.
    pub task_id: String,
    /// Steps taken so far.
    pub steps: u64,
    /// Seconds since the session was last used.
    pub idle_secs: f64,
}

/// The body of every error answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: String,
}

impl ErrorBody {
    /// The message of an error answer's body: its `error`, or the body as text when it is not
    /// an [`ErrorBody`].
    pub fn message_of(body: &[u8]) -> String {
        serde_json::from_slice::<ErrorBody>(body)
            .map(|b| b.error)
            .unwrap_or_else(|_| String::from_utf8_lossy(body).into_owned())
    }
}
