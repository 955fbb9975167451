//! `agentrl dashboard [RUNS_DIR] [--addr 127.0.0.1:8050]`: a web page, served by the `agentrl`
//! binary itself, over the runs in a folder — their status, learning curves (live while a run
//! writes), held-out evaluations with Wilson intervals, and an episode browser that renders
//! saved trajectories turn by turn with their token log-probabilities.
//!
//! Every asset (`assets/index.html`, `app.js`, `style.css`) is compiled into the binary;
//! nothing is fetched from the internet. The charts are plain SVG drawn by a few KB of
//! vanilla JavaScript: no build step and no vendored dependency.
//!
//! The dashboard only reads run directories: it never writes in them and never locks a file,
//! so it cannot slow down or block a run. Run and source names from URLs must be direct
//! entries of the listed folders. Big trajectory files are indexed in the background
//! ([`episodes`]), so the first page of a gigabyte file shows up at once.
//!
//! JSON routes (errors are `{"error": "..."}` with status 400, 404 or 500):
//!
//! | route | answer |
//! |---|---|
//! | `GET /api/runs` | `{runs: [{name, status, last_step, last: {KIND: record}, modified_unix}]}` |
//! | `GET /api/runs/{run}` | `{name, status, modified_unix, config, summary, sources: [{name, step, label, size, episodes_indexed, index_complete, bad_line_count}]}` |
//! | `GET /api/runs/{run}/metrics?since=N` | `{records, next_offset, more, bad_lines}`: records after byte `N` (complete lines only) |
//! | `GET /api/runs/{run}/eval` | `{evals: [eval records with per_task Wilson bounds]}` |
//! | `GET /api/runs/{run}/episodes?source=&env=&success=&min_reward=&max_reward=&invalid=&step_min=&step_max=&offset=&limit=` | a page of episode summaries with `total_matching`, `index_complete`, `bad_lines` |
//! | `GET /api/runs/{run}/episodes/{source}/{index}` | the episode's JSON line as stored |
//!
//! `status` is `{state: running|finished|failed|unknown, detail?, command?, pid?,
//! started_unix?}` (see [`runs::run_status`]). The page itself is `GET /` with hash routes
//! `#/`, `#/run/NAME`, `#/run/NAME/episodes?...`, `#/run/NAME/episode/SOURCE/INDEX` and
//! `#/compare?runs=a,b&metric=m`.

mod api;
pub mod episodes;
pub mod runs;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;

use agentrl_core::{Error, Result};
use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use clap::Args;

use episodes::IndexCache;

/// The page.
const INDEX_HTML: &str = include_str!("assets/index.html");
/// The page's script (routing, API calls, SVG charts, episode rendering).
const APP_JS: &str = include_str!("assets/app.js");
/// The page's style sheet.
const STYLE_CSS: &str = include_str!("assets/style.css");

/// `agentrl dashboard`: serve the dashboard over a folder of runs.
#[derive(Args, Debug, Clone)]
pub struct DashboardArgs {
    /// Folder whose subfolders are runs (or one run directory).
    #[arg(default_value = "runs")]
    pub runs_dir: PathBuf,
    /// Address to listen on; anything but loopback exposes the runs to the network.
    #[arg(long, default_value = "127.0.0.1:8050")]
    pub addr: SocketAddr,
}

/// What the handlers share: the runs folder and the episode index cache.
#[derive(Clone)]
pub struct DashboardState {
    /// The folder of runs (or a run).
    pub runs_dir: PathBuf,
    /// Indexes of the trajectory files asked about so far.
    pub index: IndexCache,
}

/// The dashboard's routes (page, assets and JSON API) over `runs_dir`.
pub fn router(runs_dir: PathBuf) -> Router {
    let state = DashboardState {
        runs_dir,
        index: IndexCache::new(),
    };
    Router::new()
        .route("/", get(|| asset("text/html; charset=utf-8", INDEX_HTML)))
        .route(
            "/app.js",
            get(|| asset("text/javascript; charset=utf-8", APP_JS)),
        )
        .route(
            "/style.css",
            get(|| asset("text/css; charset=utf-8", STYLE_CSS)),
        )
        .route("/api/runs", get(api::list_runs))
        .route("/api/runs/{run}", get(api::run_detail))
        .route("/api/runs/{run}/metrics", get(api::metrics))
        .route("/api/runs/{run}/eval", get(api::evals))
        .route("/api/runs/{run}/episodes", get(api::episodes))
        .route(
            "/api/runs/{run}/episodes/{source}/{index}",
            get(api::episode),
        )
        .route("/api/{*rest}", get(api::no_route))
        .with_state(state)
}

/// An embedded asset with its content type.
async fn asset(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
}

/// Serves the dashboard over `runs_dir` on an already bound `listener` until `shutdown`
/// resolves (tests bind `127.0.0.1:0`).
pub async fn serve(
    listener: tokio::net::TcpListener,
    runs_dir: PathBuf,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    axum::serve(listener, router(runs_dir))
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(|e| Error::Trainer(format!("dashboard server failed: {e}")))
}

/// `agentrl dashboard`: binds `args.addr`, prints the URL and serves until Ctrl-C.
pub async fn dashboard(args: DashboardArgs) -> Result<()> {
    if !args.runs_dir.is_dir() {
        return Err(Error::Config(format!(
            "runs folder {} does not exist or is not a folder",
            args.runs_dir.display()
        )));
    }
    if !args.addr.ip().is_loopback() {
        tracing::warn!(
            "the dashboard listens on {}, reachable from other machines: runs (configs, \
             episodes) may be private",
            args.addr
        );
    }
    let listener = tokio::net::TcpListener::bind(args.addr)
        .await
        .map_err(|e| Error::Config(format!("cannot listen on {}: {e}", args.addr)))?;
    println!(
        "dashboard of {} on http://{} (Ctrl-C to stop)",
        args.runs_dir.display(),
        args.addr
    );
    serve(listener, args.runs_dir, ctrl_c()).await?;
    println!("dashboard stopped");
    Ok(())
}

/// Waits for Ctrl-C; if it cannot be listened for, warns and waits forever (until killed).
async fn ctrl_c() {
    if let Err(e) = tokio::signal::ctrl_c().await {
        tracing::warn!("cannot listen for Ctrl-C ({e}); serving until killed");
        std::future::pending::<()>().await;
    }
}
