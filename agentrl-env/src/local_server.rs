//! A small HTTP service an env session runs on 127.0.0.1 (port 0): started on the current
//! tokio runtime, shut down gracefully when dropped; and [`Served`], such a service with the
//! tool box whose tools may reach it.

use std::net::SocketAddr;

use agentrl_core::{Error, Result, Tool};
use agentrl_tools::{ToolBox, ToolLimits, UrlAllowlist};
use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A running local HTTP service.
pub(crate) struct LocalServer {
    addr: SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl LocalServer {
    /// Serves `router` on a free loopback port; `env_id` names the env in errors.
    pub(crate) async fn start(router: Router, env_id: &str) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| Error::env(env_id, format!("cannot bind the local service: {e}")))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::env(env_id, format!("the local service has no address: {e}")))?;
        let (shutdown, signal) = oneshot::channel::<()>();
        let id = env_id.to_string();
        let task = tokio::spawn(async move {
            let stop = async {
                let _ = signal.await;
            };
            if let Err(e) = axum::serve(listener, router)
                .with_graceful_shutdown(stop)
                .await
            {
                tracing::warn!(env = %id, "local service stopped: {e}");
            }
        });
        Ok(LocalServer {
            addr,
            shutdown: Some(shutdown),
            task,
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub(crate) fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Whether the service still runs (it stops with the runtime it was started on).
    pub(crate) fn is_running(&self) -> bool {
        !self.task.is_finished()
    }
}

impl Drop for LocalServer {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }
}

/// A running service and the tool box allowed to reach it.
pub(crate) struct Served {
    /// The service.
    pub server: LocalServer,
    /// Tools whose allowlist is the service's base URL plus a path.
    pub tools: ToolBox,
}

impl Served {
    /// `slot`'s service, started from `router` unless it still runs, with a tool box holding
    /// `tool(allowlist of BASE + path)`.
    pub(crate) async fn ensure<'a, T: Tool + 'static>(
        slot: &'a mut Option<Served>,
        env_id: &str,
        router: impl FnOnce() -> Router,
        path: &str,
        tool: impl FnOnce(UrlAllowlist) -> T,
    ) -> Result<&'a Served> {
        if !slot.as_ref().is_some_and(|s| s.server.is_running()) {
            let server = LocalServer::start(router(), env_id).await?;
            let allow = UrlAllowlist::new([format!("{}{path}", server.base_url())])
                .map_err(|e| Error::env(env_id, e))?;
            let tools = ToolBox::new(ToolLimits::default())
                .with(tool(allow))
                .map_err(|e| Error::env(env_id, format!("cannot set up the tool: {e}")))?;
            *slot = Some(Served { server, tools });
        }
        slot.as_ref()
            .ok_or_else(|| Error::env(env_id, "the local service did not start"))
    }
}
