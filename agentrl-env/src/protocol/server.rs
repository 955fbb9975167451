//! The env server: an axum [`Router`] that runs env sessions for HTTP clients.
//!
//! Each session is one `Box<dyn Env>` behind its own tokio mutex, so sessions step concurrently
//! and requests on one session are served in order. Env calls run on spawned tasks: a client
//! that hangs up mid-step never leaves an env half-stepped, and a panicking env becomes a
//! `task_error` instead of taking the connection down. Sessions idle for longer than
//! [`ServerConfig::session_ttl`] expire (swept in the background by [`serve`], and lazily when
//! the server is full); at most [`ServerConfig::max_sessions`] live at once. With a
//! [`ServerConfig::token`], every request needs `Authorization: Bearer TOKEN` (401 without).

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentrl_core::{Env, Error, Message, Result, Split, Task};
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use tokio::task::JoinHandle;

use super::chaos::{Chaos, ChaosConfig};
use super::ended::{Ended, EndedLog};
use super::http::{
    ApiError, ServiceHandle, Serving, body_bytes, check_token_config, indices_query, parse_json,
    session_id, with_token,
};
use super::{
    CancelResponse, IndicesQuery, InteractRequest, InteractResponse, SESSION_HEADER, SampleStatus,
    SessionInfo, StartSampleRequest, StartSampleResponse, WorkerInfo,
};
use crate::factory::EnvFactory;
use crate::locking::lock;

/// Server settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// Name reported by `list_workers`.
    pub worker_id: String,
    /// A session unused for this long is removed.
    pub session_ttl: Duration,
    /// Most live sessions; `start_sample` answers 503 beyond it.
    pub max_sessions: usize,
    /// How many task indices `get_indices` lists per split (`0..task_count`); `start_sample`
    /// accepts any index.
    pub task_count: u64,
    /// When set, every request must carry `Authorization: Bearer TOKEN` (401 without); a
    /// controller in front of this server needs it too (the `worker_token` of its registration).
    pub token: Option<String>,
    /// Faults to inject on purpose, for chaos tests only (see [`super::chaos`]); off by default.
    pub chaos: ChaosConfig,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            worker_id: "env-server".to_string(),
            session_ttl: Duration::from_secs(600),
            max_sessions: 4096,
            task_count: 200,
            token: None,
            chaos: ChaosConfig::default(),
        }
    }
}

/// What a session's mutex guards.
struct SessionState {
    env: Box<dyn Env>,
    /// Set once the session left the map, so that a request that was waiting for the lock
    /// does not step a finished env.
    ended: Option<Ended>,
}

/// One live session.
struct Session {
    env_id: String,
    task_id: String,
    steps: AtomicU64,
    last_used: Mutex<Instant>,
    state: tokio::sync::Mutex<SessionState>,
}

impl Session {
    fn touch(&self) {
        *lock(&self.last_used) = Instant::now();
    }

    fn idle(&self) -> Duration {
        lock(&self.last_used).elapsed()
    }
}

/// State shared by all handlers.
struct Shared {
    envs: BTreeMap<String, Arc<dyn EnvFactory>>,
    config: ServerConfig,
    sessions: Mutex<HashMap<u64, Arc<Session>>>,
    ended: Mutex<EndedLog>,
    next_id: AtomicU64,
    /// The fault injector, when [`ServerConfig::chaos`] asks for faults.
    chaos: Option<Arc<Chaos>>,
}

impl Shared {
    fn known_ids(&self) -> String {
        self.envs.keys().cloned().collect::<Vec<_>>().join(", ")
    }

    fn factory(&self, name: &str) -> Result<&Arc<dyn EnvFactory>, ApiError> {
        self.envs.get(name).ok_or_else(|| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                format!(
                    "unknown env `{name}`; this server serves: {}",
                    self.known_ids()
                ),
            )
        })
    }

    /// The live session `id`, or the error that says why there is none.
    fn session(&self, id: u64) -> Result<Arc<Session>, ApiError> {
        if let Some(s) = lock(&self.sessions).get(&id) {
            return Ok(s.clone());
        }
        Err(self.gone(id))
    }

    /// The error for a request on session `id`, which is not live.
    fn gone(&self, id: u64) -> ApiError {
        lock(&self.ended).gone(id, self.config.session_ttl)
    }

    /// Takes session `id` out of the map (if it is still there) and records why.
    fn remove(&self, id: u64, why: Ended) -> Option<Arc<Session>> {
        let removed = lock(&self.sessions).remove(&id);
        if removed.is_some() {
            lock(&self.ended).record(id, why);
        }
        removed
    }

    /// Removes every session idle for longer than the TTL and not in use; returns how many.
    fn sweep(&self) -> usize {
        let ttl = self.config.session_ttl;
        let stale: Vec<(u64, Arc<Session>)> = lock(&self.sessions)
            .iter()
            .filter(|(_, s)| s.idle() > ttl)
            .map(|(id, s)| (*id, s.clone()))
            .collect();
        let mut removed = 0;
        for (id, session) in stale {
            // A session whose lock is held is in use right now: not idle.
            let Ok(mut state) = session.state.try_lock() else {
                continue;
            };
            if session.idle() <= ttl || state.ended.is_some() {
                continue;
            }
            state.ended = Some(Ended::Expired);
            if self.remove(id, Ended::Expired).is_some() {
                removed += 1;
            }
        }
        if removed > 0 {
            tracing::debug!(removed, "expired idle env sessions");
        }
        removed
    }
}

/// A configured env server: the envs it serves and its live sessions.
#[derive(Clone)]
pub struct EnvServer {
    shared: Arc<Shared>,
}

impl EnvServer {
    /// A server for `envs` (distinct ids, at least one).
    pub fn new(envs: Vec<Arc<dyn EnvFactory>>, config: ServerConfig) -> Result<Self> {
        if envs.is_empty() {
            return Err(Error::Config("an env server needs at least one env".into()));
        }
        if config.max_sessions == 0 {
            return Err(Error::Config("max_sessions must be at least 1".into()));
        }
        check_token_config(config.token.as_deref(), "env server")?;
        config.chaos.validate()?;
        let mut map = BTreeMap::new();
        for factory in envs {
            let id = factory.id().to_string();
            if map.insert(id.clone(), factory).is_some() {
                return Err(Error::Config(format!("env `{id}` is listed twice")));
            }
        }
        let chaos = Chaos::new(&config.chaos);
        Ok(EnvServer {
            shared: Arc::new(Shared {
                envs: map,
                chaos,
                config,
                sessions: Mutex::new(HashMap::new()),
                ended: Mutex::new(EndedLog::default()),
                next_id: AtomicU64::new(1),
            }),
        })
    }

    /// The HTTP routes (all under `/api`), sharing this server's sessions, behind the token
    /// check when a token is set.
    pub fn router(&self) -> Router {
        let routes = Router::new()
            .route("/api/get_indices", get(get_indices))
            .route("/api/start_sample", post(start_sample))
            .route("/api/interact", post(interact))
            .route("/api/cancel", post(cancel))
            .route("/api/list_workers", get(list_workers))
            .route("/api/list_sessions", get(list_sessions))
            .fallback(not_found)
            .with_state(self.shared.clone());
        let routes = match &self.shared.chaos {
            Some(chaos) => chaos.layer(routes),
            None => routes,
        };
        with_token(routes, self.shared.config.token.as_deref())
    }

    /// Removes the sessions idle for longer than the TTL now; returns how many.
    pub fn sweep(&self) -> usize {
        self.shared.sweep()
    }

    /// Number of live sessions.
    pub fn session_count(&self) -> usize {
        lock(&self.shared.sessions).len()
    }

    /// Spawns a task that sweeps idle sessions periodically (every half TTL, at most once per
    /// 10 ms and at least once per second) until the server is dropped.
    fn spawn_sweeper(&self) -> JoinHandle<()> {
        let period = (self.shared.config.session_ttl / 2)
            .clamp(Duration::from_millis(10), Duration::from_secs(1));
        super::periodic::spawn_sweeper(&self.shared, period, |shared| {
            shared.sweep();
        })
    }
}

/// A running server: stop it with [`ServiceHandle::shutdown`].
pub type ServerHandle = ServiceHandle<EnvServer>;

impl ServerHandle {
    /// The server's state (session count, manual sweeps).
    pub fn server(&self) -> &EnvServer {
        &self.state
    }
}

/// Binds `addr` (port 0 picks a free port), serves `envs` on it and returns the bound address.
pub async fn serve(
    addr: SocketAddr,
    envs: Vec<Arc<dyn EnvFactory>>,
    config: ServerConfig,
) -> Result<(SocketAddr, ServerHandle)> {
    let has_token = config.token.is_some();
    let server = EnvServer::new(envs, config)?;
    let sweeper = server.spawn_sweeper();
    let (bound, serving) = Serving::start("env server", addr, server.router(), sweeper).await?;
    super::http::warn_if_exposed("env server", bound, has_token);
    let state = server;
    Ok((bound, ServiceHandle { serving, state }))
}

async fn not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "no such route; the env protocol serves /api/get_indices, /api/start_sample, \
         /api/interact, /api/cancel, /api/list_workers and /api/list_sessions",
    )
}

async fn get_indices(
    State(shared): State<Arc<Shared>>,
    query: Result<Query<IndicesQuery>, QueryRejection>,
) -> Result<Json<Vec<u64>>, ApiError> {
    let query = indices_query(query)?;
    shared.factory(&query.name)?;
    Ok(Json((0..shared.config.task_count).collect()))
}

/// Runs `f` on its own task, so that neither a dropped request nor a panic can cut it short.
async fn isolated<T: Send + 'static>(
    what: &str,
    f: impl Future<Output = T> + Send + 'static,
) -> Result<T, String> {
    tokio::spawn(f).await.map_err(|e| {
        if e.is_panic() {
            format!("{what} panicked")
        } else {
            format!("{what} was cancelled")
        }
    })
}

async fn start_sample(
    State(shared): State<Arc<Shared>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let request = parse_start_sample_body(body_bytes(&body, "start_sample")?)?;
    let factory = shared.factory(&request.name)?.clone();
    let custom = request.custom_task.is_some();
    let task: Task = match (request.custom_task, request.index) {
        (Some(task), _) => {
            if task.env_id != request.name {
                return Err(ApiError::new(
                    StatusCode::BAD_REQUEST,
                    format!(
                        "custom_task belongs to env `{}`, not `{}`",
                        task.env_id, request.name
                    ),
                ));
            }
            task
        }
        (None, Some(index)) => factory.task(request.split.unwrap_or(Split::Test), index),
        (None, None) => {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "start_sample needs `index` or `custom_task`",
            ));
        }
    };
    if lock(&shared.sessions).len() >= shared.config.max_sessions {
        shared.sweep();
    }
    if lock(&shared.sessions).len() >= shared.config.max_sessions {
        return Err(full(&shared));
    }
    let task_id = task.id.clone();
    let chaos = shared.chaos.clone();
    let started = isolated("env reset", async move {
        let mut env = factory.make();
        if let Some(chaos) = chaos {
            env = chaos.wrap(env);
        }
        let obs = env.reset(&task).await;
        obs.map(|obs| (env, obs))
    })
    .await;
    let (env, obs) = match started {
        Ok(Ok(pair)) => pair,
        Ok(Err(e)) if custom => {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("the env refused custom_task `{task_id}`: {e}"),
            ));
        }
        Ok(Err(e)) => {
            return Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("the env could not start task `{task_id}`: {e}"),
            ));
        }
        Err(why) => {
            return Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("task `{task_id}`: {why}"),
            ));
        }
    };
    let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
    let session = Arc::new(Session {
        env_id: request.name,
        task_id,
        steps: AtomicU64::new(0),
        last_used: Mutex::new(Instant::now()),
        state: tokio::sync::Mutex::new(SessionState { env, ended: None }),
    });
    {
        let mut sessions = lock(&shared.sessions);
        if sessions.len() >= shared.config.max_sessions {
            drop(sessions);
            return Err(full(&shared));
        }
        sessions.insert(id, session);
    }
    let mut response = Json(StartSampleResponse {
        messages: obs.messages,
        tools: obs.tools,
    })
    .into_response();
    response
        .headers_mut()
        .insert(SESSION_HEADER, HeaderValue::from(id));
    Ok(response)
}

fn full(shared: &Shared) -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        format!(
            "the env server holds its maximum of {} sessions; finish or cancel some first",
            shared.config.max_sessions
        ),
    )
}

/// Parses a `start_sample` body (the server's and the controller's handlers): 400 when it is
/// not JSON, 422 when fields are missing or mistyped.
pub(crate) fn parse_start_sample_body(bytes: &[u8]) -> Result<StartSampleRequest, ApiError> {
    parse_json(bytes, "start_sample")
}

/// Parses an `interact` body into its one assistant message: 400 when it is not JSON, 422
/// when fields are missing or mistyped or it holds other than one message.
pub(crate) fn parse_interact_body(bytes: &[u8]) -> Result<Message, ApiError> {
    action_of(parse_json(bytes, "interact")?)
}

/// The one assistant message of an interact request.
fn action_of(request: InteractRequest) -> Result<Message, ApiError> {
    let n = request.messages.len();
    let mut messages = request.messages.into_iter();
    match (messages.next(), n) {
        (Some(m), 1) => Ok(m),
        _ => Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("`messages` must hold exactly one (assistant) message, got {n}"),
        )),
    }
}

async fn interact(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<InteractResponse>, ApiError> {
    let id = session_id(&headers)?;
    let action = parse_interact_body(body_bytes(&body, "interact")?)?;
    let session = shared.session(id)?;
    session.touch();
    let worker = shared.clone();
    let outcome = isolated("env step", async move {
        let mut state = session.state.lock().await;
        let live = lock(&worker.sessions).contains_key(&id);
        if state.ended.is_some() || !live {
            return Err(worker.gone(id));
        }
        let step = state.env.step(&action).await;
        session.steps.fetch_add(1, Ordering::Relaxed);
        session.touch();
        let response = match step {
            Ok(step) => InteractResponse::from_step(step),
            Err(e) => InteractResponse {
                finish: true,
                reward: 0.0,
                status: SampleStatus::TaskError,
                messages: Vec::new(),
                metrics: Default::default(),
                error: Some(e.to_string()),
            },
        };
        if response.finish {
            let why = Ended::Finished(response.status);
            state.ended = Some(why.clone());
            worker.remove(id, why);
        }
        Ok(response)
    })
    .await;
    match outcome {
        Ok(Ok(response)) => Ok(Json(response)),
        Ok(Err(e)) => Err(e),
        Err(why) => {
            // The env panicked: the session cannot be trusted any more.
            shared.remove(id, Ended::Finished(SampleStatus::TaskError));
            Ok(Json(InteractResponse {
                finish: true,
                reward: 0.0,
                status: SampleStatus::TaskError,
                messages: Vec::new(),
                metrics: Default::default(),
                error: Some(why),
            }))
        }
    }
}

async fn cancel(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
) -> Result<Json<CancelResponse>, ApiError> {
    let id = session_id(&headers)?;
    let Some(session) = shared.remove(id, Ended::Cancelled) else {
        return Err(shared.gone(id));
    };
    // Mark it so that a request waiting for its lock does not step it; a step in progress
    // finishes first and is answered, but the session is already gone from the map.
    if let Ok(mut state) = session.state.try_lock() {
        state.ended = Some(Ended::Cancelled);
    } else {
        tokio::spawn(async move {
            session
                .state
                .lock()
                .await
                .ended
                .get_or_insert(Ended::Cancelled);
        });
    }
    Ok(Json(CancelResponse {
        session_id: id.to_string(),
        status: SampleStatus::Cancelled,
    }))
}

async fn list_workers(State(shared): State<Arc<Shared>>) -> Json<Vec<WorkerInfo>> {
    Json(vec![WorkerInfo {
        id: shared.config.worker_id.clone(),
        envs: shared.envs.keys().cloned().collect(),
        sessions: lock(&shared.sessions).len(),
        max_sessions: shared.config.max_sessions,
        session_ttl_secs: shared.config.session_ttl.as_secs_f64(),
    }])
}

async fn list_sessions(State(shared): State<Arc<Shared>>) -> Json<Vec<SessionInfo>> {
    let mut list: Vec<SessionInfo> = lock(&shared.sessions)
        .iter()
        .map(|(id, s)| SessionInfo {
            session_id: id.to_string(),
            env: s.env_id.clone(),
            task_id: s.task_id.clone(),
            steps: s.steps.load(Ordering::Relaxed),
            idle_secs: s.idle().as_secs_f64(),
        })
        .collect();
    list.sort_by_key(|s| s.session_id.parse::<u64>().unwrap_or(u64::MAX));
    Json(list)
}
