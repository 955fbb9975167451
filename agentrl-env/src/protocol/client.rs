//! The protocol client: raw calls ([`ProtocolClient`]), an [`Env`] over a remote session
//! ([`RemoteEnv`]) and an [`EnvFactory`] whose sessions are remote ([`RemoteEnvFactory`]).
//!
//! Every failure (server unreachable, connection lost, timeout, an error answer, an answer that
//! is not the expected JSON) is an [`Error::Env`] that names the request and says what
//! happened; a rollout ends such an episode as an env error and keeps what it recorded.

use std::sync::Arc;
use std::time::Duration;

use agentrl_core::{Env, Error, Message, Observation, Result, Split, Step, Task};
use async_trait::async_trait;
use reqwest::Method;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{
    CancelResponse, ErrorBody, InteractRequest, InteractResponse, SESSION_HEADER, SessionInfo,
    StartSampleRequest, StartSampleResponse, WorkerInfo, indices_route,
};
use crate::demonstrator::{DemonstratorKnobs, KnobDoc, reject_unknown_knobs};
use crate::factory::{EnvFactory, Solver};
use crate::registry::lookup;

/// Client settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientConfig {
    /// Longest wait for one whole request (connect, env work, answer).
    pub request_timeout: Duration,
    /// Longest wait for a connection.
    pub connect_timeout: Duration,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            request_timeout: Duration::from_secs(120),
            connect_timeout: Duration::from_secs(5),
        }
    }
}

/// Raw calls of the env protocol against one server.
#[derive(Clone)]
pub struct ProtocolClient {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl std::fmt::Debug for ProtocolClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProtocolClient")
            .field("base", &self.base)
            .finish()
    }
}

impl ProtocolClient {
    /// A client of the server at `base_url` (`http://HOST:PORT` or `HOST:PORT`). System proxy
    /// settings are ignored: env servers are reached directly.
    pub fn new(base_url: &str, config: &ClientConfig) -> Result<Self> {
        let trimmed = base_url.trim().trim_end_matches('/');
        if trimmed.is_empty() {
            return Err(Error::Config("empty env server address".into()));
        }
        let base = if trimmed.contains("://") {
            trimmed.to_string()
        } else {
            format!("http://{trimmed}")
        };
        let http = reqwest::Client::builder()
            .timeout(config.request_timeout)
            .connect_timeout(config.connect_timeout)
            .no_proxy()
            .build()
            .map_err(|e| {
                Error::Config(format!(
                    "cannot build an HTTP client: {}",
                    agentrl_core::with_causes(&e)
                ))
            })?;
        Ok(ProtocolClient {
            http,
            base,
            token: None,
        })
    }

    /// The same client, sending `Authorization: Bearer TOKEN` (for a controller with a token).
    pub fn with_token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// The server's base URL.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// Sends one request and parses its JSON answer; returns the answer's headers too.
    async fn call<B: Serialize, T: DeserializeOwned>(
        &self,
        env: &str,
        method: Method,
        route: &str,
        session: Option<&str>,
        body: Option<&B>,
    ) -> Result<(reqwest::header::HeaderMap, T)> {
        let url = format!("{}{route}", self.base);
        let what = format!("{method} {url}");
        let mut request = self.http.request(method, &url);
        if let Some(id) = session {
            request = request.header(SESSION_HEADER, id);
        }
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.map_err(|e| {
            let why = if e.is_timeout() {
                "timed out"
            } else if e.is_connect() {
                "env server unreachable"
            } else {
                "request failed (connection lost?)"
            };
            Error::env(
                env,
                format!("{what}: {why}: {}", agentrl_core::with_causes(&e)),
            )
        })?;
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = super::answer::read_capped(response)
            .await
            .map_err(|e| Error::env(env, format!("{what}: {e}")))?;
        if !status.is_success() {
            let message = ErrorBody::message_of(&bytes);
            return Err(Error::env(env, format!("{what}: HTTP {status}: {message}")));
        }
        let value = serde_json::from_slice(&bytes).map_err(|e| {
            Error::env(
                env,
                format!("{what}: the answer is not the expected JSON: {e}"),
            )
        })?;
        Ok((headers, value))
    }

    /// `GET /api/get_indices`: task indices of `split` the server lists for env `name`.
    pub async fn get_indices(&self, name: &str, split: Split) -> Result<Vec<u64>> {
        let route = indices_route(name, split);
        let (_, indices) = self
            .call::<(), _>(name, Method::GET, &route, None, None)
            .await?;
        Ok(indices)
    }

    /// `POST /api/start_sample`: a new session; returns its id and the initial observation.
    pub async fn start_sample(
        &self,
        request: &StartSampleRequest,
    ) -> Result<(String, StartSampleResponse)> {
        let (headers, answer) = self
            .call(
                &request.name,
                Method::POST,
                "/api/start_sample",
                None,
                Some(request),
            )
            .await?;
        let id = headers
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
            .ok_or_else(|| {
                Error::env(
                    &request.name,
                    format!(
                        "POST {}/api/start_sample: the answer has no `{SESSION_HEADER}` header",
                        self.base
                    ),
                )
            })?;
        Ok((id, answer))
    }

    /// `POST /api/interact`: applies `action` in session `session` of env `env`.
    pub async fn interact(
        &self,
        env: &str,
        session: &str,
        action: &Message,
    ) -> Result<InteractResponse> {
        let body = InteractRequest {
            messages: vec![action.clone()],
        };
        let (_, answer) = self
            .call(
                env,
                Method::POST,
                "/api/interact",
                Some(session),
                Some(&body),
            )
            .await?;
        Ok(answer)
    }

    /// `POST /api/cancel`: ends session `session`.
    pub async fn cancel(&self, env: &str, session: &str) -> Result<CancelResponse> {
        let (_, answer) = self
            .call::<(), _>(env, Method::POST, "/api/cancel", Some(session), None)
            .await?;
        Ok(answer)
    }

    /// `GET /api/list_workers`.
    pub async fn list_workers(&self) -> Result<Vec<WorkerInfo>> {
        let (_, answer) = self
            .call::<(), _>("env-server", Method::GET, "/api/list_workers", None, None)
            .await?;
        Ok(answer)
    }

    /// `GET /api/list_sessions`.
    pub async fn list_sessions(&self) -> Result<Vec<SessionInfo>> {
        let (_, answer) = self
            .call::<(), _>("env-server", Method::GET, "/api/list_sessions", None, None)
            .await?;
        Ok(answer)
    }
}

/// An [`Env`] whose session lives on an env server.
///
/// `reset` starts a sample with the task as `custom_task` (so any task, generated or not, runs
/// exactly); [`RemoteEnv::reset_index`] starts one by index instead. `step` is `interact`; a
/// `task_error` answer, an error answer and a dead server are all [`Error::Env`]. A session
/// still running when the value is dropped (or reset) is cancelled in the background.
pub struct RemoteEnv {
    client: ProtocolClient,
    env_id: String,
    session: Option<String>,
    /// Start episodes by the task's `data.index` (the server's own task) rather than by
    /// sending the whole task.
    by_index: bool,
}

impl std::fmt::Debug for RemoteEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteEnv")
            .field("server", &self.client.base)
            .field("env_id", &self.env_id)
            .field("session", &self.session)
            .finish()
    }
}

impl RemoteEnv {
    /// A session of env `env_id` on the server behind `client` (started by `reset`).
    pub fn new(client: ProtocolClient, env_id: impl Into<String>) -> Self {
        RemoteEnv {
            client,
            env_id: env_id.into(),
            session: None,
            by_index: false,
        }
    }

    /// A session whose `reset(task)` starts the server's task `task.data.index` of
    /// `task.split` (for envs whose tasks only the server can make, e.g. Python envs).
    pub fn by_index(client: ProtocolClient, env_id: impl Into<String>) -> Self {
        let mut env = RemoteEnv::new(client, env_id);
        env.by_index = true;
        env
    }

    /// The current remote session id, while an episode runs.
    pub fn session_id(&self) -> Option<&str> {
        self.session.as_deref()
    }

    /// Starts an episode on task `index` of `split`, as generated by the server.
    pub async fn reset_index(&mut self, split: Split, index: u64) -> Result<Observation> {
        self.start(StartSampleRequest {
            name: self.env_id.clone(),
            index: Some(index),
            split: Some(split),
            custom_task: None,
        })
        .await
    }

    async fn start(&mut self, request: StartSampleRequest) -> Result<Observation> {
        if let Some(old) = self.session.take() {
            // Best effort: the old episode is abandoned either way.
            if let Err(e) = self.client.cancel(&self.env_id, &old).await {
                tracing::debug!("cancelling abandoned session {old}: {e}");
            }
        }
        let (id, answer) = self.client.start_sample(&request).await?;
        self.session = Some(id);
        Ok(Observation {
            messages: answer.messages,
            tools: answer.tools,
        })
    }
}

#[async_trait]
impl Env for RemoteEnv {
    fn id(&self) -> &str {
        &self.env_id
    }

    async fn reset(&mut self, task: &Task) -> Result<Observation> {
        if self.by_index {
            let Some(index) = task.data.get("index").and_then(|i| i.as_u64()) else {
                return Err(Error::env(
                    &self.env_id,
                    format!("task `{}` has no numeric data.index to start", task.id),
                ));
            };
            return self.reset_index(task.split, index).await;
        }
        self.start(StartSampleRequest {
            name: self.env_id.clone(),
            index: None,
            split: None,
            custom_task: Some(task.clone()),
        })
        .await
    }

    async fn step(&mut self, action: &Message) -> Result<Step> {
        let Some(session) = self.session.clone() else {
            return Err(Error::env(
                &self.env_id,
                "step called before reset or after the episode ended",
            ));
        };
        let answer = match self.client.interact(&self.env_id, &session, action).await {
            Ok(a) => a,
            Err(e) => {
                // The session's state is unknown now: do not step it again.
                self.session = None;
                return Err(e);
            }
        };
        if answer.finish {
            self.session = None;
        }
        match answer.to_step() {
            Some(step) => Ok(step),
            None => Err(Error::env(
                &self.env_id,
                format!(
                    "remote session {session} ended with status {}: {}",
                    answer.status,
                    answer.error.as_deref().unwrap_or("no reason given")
                ),
            )),
        }
    }
}

impl Drop for RemoteEnv {
    fn drop(&mut self) {
        let Some(session) = self.session.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return; // no runtime: the server's idle expiry removes the session
        };
        let client = self.client.clone();
        let env = self.env_id.clone();
        runtime.spawn(async move {
            if let Err(e) = client.cancel(&env, &session).await {
                tracing::debug!("cancelling dropped session {session}: {e}");
            }
        });
    }
}

/// An [`EnvFactory`] whose sessions run on an env server (or a controller). Built with
/// [`RemoteEnvFactory::new`] for a registered env, tasks, turn limit and solver come from the
/// local factory of the same id (so task generation is identical) and sessions get the whole
/// task; built with [`RemoteEnvFactory::served`] for an env only the server knows (a Python
/// env, say), task `index` is the server's task `index` and there is no reference solver.
#[derive(Clone)]
pub struct RemoteEnvFactory {
    env_id: String,
    local: Option<Arc<dyn EnvFactory>>,
    client: ProtocolClient,
    max_turns: usize,
}

impl RemoteEnvFactory {
    /// Sessions of `local`'s env on the server behind `client`.
    pub fn new(client: ProtocolClient, local: Arc<dyn EnvFactory>) -> Self {
        RemoteEnvFactory {
            env_id: local.id().to_string(),
            max_turns: local.max_turns(),
            local: Some(local),
            client,
        }
    }

    /// Sessions of env `env_id`, which only the server behind `client` knows; `max_turns`
    /// bounds an episode on this side (the server may end it sooner).
    pub fn served(client: ProtocolClient, env_id: impl Into<String>, max_turns: usize) -> Self {
        RemoteEnvFactory {
            env_id: env_id.into(),
            local: None,
            client,
            max_turns: max_turns.max(1),
        }
    }

    /// The registered env `env_id` served at `base_url`; checks that the server serves it.
    pub async fn connect(base_url: &str, env_id: &str, config: &ClientConfig) -> Result<Self> {
        let factory =
            RemoteEnvFactory::new(ProtocolClient::new(base_url, config)?, lookup(env_id)?);
        factory.check_served().await?;
        Ok(factory)
    }

    /// Asks the server whether some worker serves this env; an error says what it serves.
    pub async fn check_served(&self) -> Result<()> {
        let workers = self.client.list_workers().await?;
        if workers.iter().any(|w| w.envs.contains(&self.env_id)) {
            return Ok(());
        }
        let served: Vec<&str> = workers
            .iter()
            .flat_map(|w| w.envs.iter().map(String::as_str))
            .collect();
        Err(Error::Config(format!(
            "the env server at {} does not serve `{}` (it serves: {})",
            self.client.base_url(),
            self.env_id,
            served.join(", ")
        )))
    }

    /// The protocol client the sessions use.
    pub fn client(&self) -> &ProtocolClient {
        &self.client
    }
}

impl EnvFactory for RemoteEnvFactory {
    fn id(&self) -> &str {
        &self.env_id
    }

    fn description(&self) -> &str {
        match &self.local {
            Some(local) => local.description(),
            None => "an env served by a remote env server",
        }
    }

    fn task(&self, split: Split, index: u64) -> Task {
        match &self.local {
            Some(local) => local.task(split, index),
            None => Task {
                env_id: self.env_id.clone(),
                id: format!("{split}:{index}"),
                split,
                data: serde_json::json!({ "index": index }),
            },
        }
    }

    fn make(&self) -> Box<dyn Env> {
        match &self.local {
            Some(_) => Box::new(RemoteEnv::new(self.client.clone(), &self.env_id)),
            None => Box::new(RemoteEnv::by_index(self.client.clone(), &self.env_id)),
        }
    }

    fn max_turns(&self) -> usize {
        self.max_turns
    }

    fn has_solver(&self) -> bool {
        self.local.is_some()
    }

    fn solver(&self, seed: u64) -> Box<dyn Solver> {
        match &self.local {
            Some(local) => local.solver(seed),
            None => Box::new(NoSolver(self.env_id.clone())),
        }
    }

    fn demonstrator_knobs(&self) -> &[KnobDoc] {
        match &self.local {
            Some(local) => local.demonstrator_knobs(),
            None => &[],
        }
    }

    /// The local factory's demonstrator; a served-only env has none (no knobs, and without
    /// knobs the solver that says so).
    fn demonstrator(&self, knobs: &DemonstratorKnobs, seed: u64) -> Result<Box<dyn Solver>> {
        match &self.local {
            Some(local) => local.demonstrator(knobs, seed),
            None => {
                reject_unknown_knobs(&self.env_id, knobs, &[])?;
                Ok(self.solver(seed))
            }
        }
    }
}

/// What [`RemoteEnvFactory::solver`] gives for a served-only env: an agent that says it has
/// no solver (see [`EnvFactory::has_solver`]).
struct NoSolver(String);

impl Solver for NoSolver {
    fn act(&mut self, _task: &Task, _history: &[Message]) -> Message {
        Message::assistant(format!(
            "env `{}` is served remotely and has no reference solver here",
            self.0
        ))
    }
}
