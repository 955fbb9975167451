//! What the env server and the controller share as HTTP services: JSON error answers, body and
//! session-header parsing, the bearer-token check, and binding, running and stopping an axum app
//! with its sweeper.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use agentrl_core::{Error, Result, same_secret};
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use serde::de::DeserializeOwned;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::{ErrorBody, IndicesQuery, SESSION_HEADER};

/// An error answer: a status and a message, sent as `{"error": message}`.
#[derive(Debug)]
pub(crate) struct ApiError {
    pub(crate) status: StatusCode,
    pub(crate) message: String,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.status,
            Json(ErrorBody {
                error: self.message,
            }),
        )
            .into_response()
    }
}

/// The bytes of a body axum could read (else its status and message).
pub(crate) fn body_bytes<'a>(
    body: &'a std::result::Result<Bytes, BytesRejection>,
    what: &str,
) -> std::result::Result<&'a [u8], ApiError> {
    body.as_ref().map(|b| b.as_ref()).map_err(|e| {
        ApiError::new(
            e.status(),
            format!("could not read the {what} body: {}", e.body_text()),
        )
    })
}

/// Parses the JSON of a `what` body: 400 when it is not JSON, 422 when fields are missing or
/// mistyped.
pub(crate) fn parse_json<T: DeserializeOwned>(
    bytes: &[u8],
    what: &str,
) -> std::result::Result<T, ApiError> {
    serde_json::from_slice(bytes).map_err(|e| {
        let status = if e.is_data() {
            StatusCode::UNPROCESSABLE_ENTITY
        } else {
            StatusCode::BAD_REQUEST
        };
        ApiError::new(status, format!("invalid {what} body: {e}"))
    })
}

/// The query of `GET /api/get_indices`: 400 when it does not parse.
pub(crate) fn indices_query(
    query: std::result::Result<Query<IndicesQuery>, QueryRejection>,
) -> std::result::Result<IndicesQuery, ApiError> {
    let Query(query) = query.map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!(
                "invalid query ({}); expected ?name=ENV[&split=train|test]",
                e.body_text()
            ),
        )
    })?;
    Ok(query)
}

/// The numeric session id of the `session_id` header: 400 when it is missing, 404 when it is
/// not a number (no such session can exist).
pub(crate) fn session_id(headers: &HeaderMap) -> std::result::Result<u64, ApiError> {
    let value = headers.get(SESSION_HEADER).ok_or_else(|| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("missing `{SESSION_HEADER}` header"),
        )
    })?;
    let text = value.to_str().unwrap_or("").trim();
    text.parse::<u64>().map_err(|_| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            format!(
                "unknown session id {:?}",
                String::from_utf8_lossy(value.as_bytes())
            ),
        )
    })
}

/// Refuses a blank token for a service (`what`: "env server", "controller").
pub(crate) fn check_token_config(token: Option<&str>, what: &str) -> Result<()> {
    if token.is_some_and(|t| t.trim().is_empty()) {
        return Err(Error::Config(format!("the {what} token is empty")));
    }
    Ok(())
}

/// Warns when a service (`what`) listens beyond this machine without a token: anyone who can
/// reach the port can then drive it.
pub(crate) fn warn_if_exposed(what: &str, bound: SocketAddr, has_token: bool) {
    if !bound.ip().is_loopback() && !has_token {
        tracing::warn!(
            "the {what} listens on {bound}, reachable from other machines, without a token: \
             anyone who can reach that port can use it (set --token, or bind 127.0.0.1)"
        );
    }
}

/// `app` behind a bearer-token check: with a `token`, every request without
/// `Authorization: Bearer TOKEN` is answered 401 (and never reaches a handler).
pub(crate) fn with_token(app: Router, token: Option<&str>) -> Router {
    let token: Option<Arc<str>> = token.map(Arc::from);
    app.layer(middleware::from_fn_with_state(token, check_token))
}

async fn check_token(
    State(token): State<Option<Arc<str>>>,
    request: Request,
    next: Next,
) -> Response {
    if let Some(token) = &token {
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        // Compared in constant time, so the answer time does not leak the token.
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

/// A running axum app and its sweeper task; `what` names it in errors ("env-server",
/// "controller").
pub(crate) struct Serving {
    what: &'static str,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<std::io::Result<()>>,
    sweeper: JoinHandle<()>,
}

impl Serving {
    /// Binds `addr` (port 0 picks a free port) and serves `app` on it; `sweeper` is aborted when
    /// serving ends. Returns the bound address.
    pub(crate) async fn start(
        what: &'static str,
        addr: SocketAddr,
        app: Router,
        sweeper: JoinHandle<()>,
    ) -> Result<(SocketAddr, Serving)> {
        let bound = async {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| Error::Config(format!("cannot bind the {what} to {addr}: {e}")))?;
            let bound = listener
                .local_addr()
                .map_err(|e| Error::Config(format!("cannot read the {what}'s address: {e}")))?;
            Ok((listener, bound))
        }
        .await;
        let (listener, bound) = match bound {
            Ok(ok) => ok,
            Err(e) => {
                sweeper.abort();
                return Err(e);
            }
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await
        });
        tracing::info!(%bound, "{what} listening");
        let serving = Serving {
            what,
            stop: Some(stop),
            task,
            sweeper,
        };
        Ok((bound, serving))
    }

    /// Stops accepting connections, lets requests in flight finish, and waits for the end.
    pub(crate) async fn shutdown(mut self) -> Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.wait().await
    }

    /// Waits until serving stops (after `shutdown` or an I/O failure).
    pub(crate) async fn wait(mut self) -> Result<()> {
        let result = (&mut self.task).await;
        self.sweeper.abort();
        match result {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(Error::env(self.what, format!("server failed: {e}"))),
            Err(e) => Err(Error::env(self.what, format!("server task failed: {e}"))),
        }
    }

    /// Stops serving when `signal` completes (e.g. Ctrl-C), then waits for the end.
    pub(crate) async fn shutdown_on(self, signal: impl Future<Output = ()>) -> Result<()> {
        signal.await;
        self.shutdown().await
    }
}

/// A running service (an [`EnvServer`](super::EnvServer) or a
/// [`Controller`](super::Controller)) and its state; stop it with [`ServiceHandle::shutdown`].
pub struct ServiceHandle<S> {
    pub(crate) serving: Serving,
    pub(crate) state: S,
}

impl<S> ServiceHandle<S> {
    /// Stops accepting connections, lets requests in flight finish, and waits for the end.
    pub async fn shutdown(self) -> Result<()> {
        self.serving.shutdown().await
    }

    /// Waits until the service stops (it only does after `shutdown` or an I/O failure).
    pub async fn wait(self) -> Result<()> {
        self.serving.wait().await
    }

    /// Stops the service when `signal` completes (e.g. Ctrl-C), then waits for the end.
    pub async fn shutdown_on(self, signal: impl Future<Output = ()>) -> Result<()> {
        self.serving.shutdown_on(signal).await
    }
}
