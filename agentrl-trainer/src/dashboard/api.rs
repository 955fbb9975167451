//! The dashboard's JSON handlers (routes are listed in the [module doc](super)). File work runs
//! on blocking threads, never on the async runtime; errors are JSON `{"error": "..."}` with a
//! 400 (bad parameter) or 404 (no such run, source or episode) status.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::DashboardState;
use super::episodes::{BadLine, EpisodeFilter, EpisodeSummary, read_episode};
use super::runs::{self, METRICS_FILE, RunDir, SourceFile, StatusView};

/// Episodes per page when the query does not say.
const DEFAULT_PAGE: usize = 50;
/// Most episodes per page.
const MAX_PAGE: usize = 500;
/// How long a query waits for a cold index to fill its page before answering with less.
const PAGE_WAIT: Duration = Duration::from_secs(2);
/// How long an episode request waits for the index to reach the episode.
const EPISODE_WAIT: Duration = Duration::from_secs(30);

/// An error answered as JSON.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    /// A 400 saying what is wrong with the request.
    fn bad_request(message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
        }
    }

    /// A 404 saying what was not found.
    fn not_found(message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::NOT_FOUND,
            message: message.into(),
        }
    }

    /// A 500 for a file that could not be read.
    fn io(what: &str, error: std::io::Error) -> Self {
        ApiError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: format!("{what}: {error}"),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.status,
            Json(serde_json::json!({ "error": self.message })),
        )
            .into_response()
    }
}

/// Runs `work` on a blocking thread.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ApiError::io("a dashboard worker", std::io::Error::other(e)))?
}

/// The run `name` of the runs folder, or a 404.
fn run_named(runs_dir: &std::path::Path, name: &str) -> Result<RunDir, ApiError> {
    if !runs::is_plain_name(name) {
        return Err(ApiError::bad_request(format!("`{name}` is not a run name")));
    }
    runs::find_run(runs_dir, name)
        .map_err(|e| ApiError::io("listing the runs folder", e))?
        .ok_or_else(|| ApiError::not_found(format!("no run named `{name}`")))
}

/// The source `name` of `run`, or a 404.
fn source_named(run: &RunDir, name: &str) -> Result<SourceFile, ApiError> {
    if !runs::is_plain_name(name) {
        return Err(ApiError::bad_request(format!(
            "`{name}` is not a source name"
        )));
    }
    runs::find_source(&run.path, name)
        .map_err(|e| ApiError::io("listing the run's samples", e))?
        .ok_or_else(|| ApiError::not_found(format!("run `{}` has no source `{name}`", run.name)))
}

/// One run in the run list.
#[derive(Serialize)]
struct RunListItem {
    name: String,
    status: StatusView,
    last_step: Option<u64>,
    last: BTreeMap<String, Value>,
    modified_unix: Option<u64>,
}

/// `GET /api/runs`: the runs with status, last step and last record of each kind.
pub async fn list_runs(State(state): State<DashboardState>) -> Result<Json<Value>, ApiError> {
    let runs_dir = state.runs_dir.clone();
    let items = blocking(move || {
        let runs = runs::list_runs(&runs_dir).map_err(|e| {
            ApiError::io(
                &format!("listing the runs folder {}", runs_dir.display()),
                e,
            )
        })?;
        runs.into_iter()
            .map(|run| run_list_item(&run))
            .collect::<Result<Vec<_>, _>>()
    })
    .await?;
    Ok(Json(serde_json::json!({ "runs": items })))
}

/// [`RunListItem`] of `run`.
fn run_list_item(run: &RunDir) -> Result<RunListItem, ApiError> {
    let metrics = run.path.join(METRICS_FILE);
    let (last, last_step) = runs::last_metrics(&metrics)
        .map_err(|e| ApiError::io(&format!("reading {}", metrics.display()), e))?;
    Ok(RunListItem {
        name: run.name.clone(),
        status: runs::run_status(&run.path),
        last_step,
        last,
        modified_unix: runs::modified_unix(&run.path),
    })
}

/// A source in a run's detail, with how far its index got.
#[derive(Serialize)]
struct SourceItem {
    #[serde(flatten)]
    file: SourceFile,
    episodes_indexed: usize,
    index_complete: bool,
    bad_line_count: usize,
}

/// `GET /api/runs/{run}`: status, config text, summary and sources of one run.
pub async fn run_detail(
    State(state): State<DashboardState>,
    UrlPath(name): UrlPath<String>,
) -> Result<Json<Value>, ApiError> {
    let runs_dir = state.runs_dir.clone();
    let cache = state.index.clone();
    let detail = blocking(move || {
        let run = run_named(&runs_dir, &name)?;
        let sources = runs::list_sources(&run.path)
            .map_err(|e| ApiError::io("listing the run's samples", e))?;
        let sources: Vec<SourceItem> = sources
            .into_iter()
            .map(|file| {
                let known = cache.peek(&file.path);
                SourceItem {
                    episodes_indexed: known.map_or(0, |i| i.episodes),
                    index_complete: known
                        .is_some_and(|i| i.complete && i.indexed_bytes >= file.size),
                    bad_line_count: known.map_or(0, |i| i.bad_line_count),
                    file,
                }
            })
            .collect();
        let config =
            runs::config_text(&run.path).map_err(|e| ApiError::io("reading config.toml", e))?;
        Ok(serde_json::json!({
            "name": run.name,
            "status": runs::run_status(&run.path),
            "modified_unix": runs::modified_unix(&run.path),
            "config": config,
            "summary": runs::summary_json(&run.path),
            "sources": sources,
        }))
    })
    .await?;
    Ok(Json(detail))
}

/// Query of the metrics route.
#[derive(Deserialize)]
pub struct MetricsQuery {
    since: Option<String>,
}

/// `GET /api/runs/{run}/metrics?since=N`: records after byte `N` and the next offset.
pub async fn metrics(
    State(state): State<DashboardState>,
    UrlPath(name): UrlPath<String>,
    Query(query): Query<MetricsQuery>,
) -> Result<Json<runs::MetricsChunk>, ApiError> {
    let since = parse_opt::<u64>("since", query.since.as_deref())?.unwrap_or(0);
    let runs_dir = state.runs_dir.clone();
    let chunk = blocking(move || {
        let run = run_named(&runs_dir, &name)?;
        runs::read_metrics(&run.path.join(METRICS_FILE), since)
            .map_err(|e| ApiError::io("reading metrics.jsonl", e))
    })
    .await?;
    Ok(Json(chunk))
}

/// `GET /api/runs/{run}/eval`: the `eval` records of the run, in order.
pub async fn evals(
    State(state): State<DashboardState>,
    UrlPath(name): UrlPath<String>,
) -> Result<Json<Value>, ApiError> {
    let runs_dir = state.runs_dir.clone();
    let records = blocking(move || {
        let run = run_named(&runs_dir, &name)?;
        let path = run.path.join(METRICS_FILE);
        let mut evals = Vec::new();
        let mut offset = 0;
        loop {
            let chunk = runs::read_metrics(&path, offset)
                .map_err(|e| ApiError::io("reading metrics.jsonl", e))?;
            evals.extend(
                chunk
                    .records
                    .into_iter()
                    .filter(|r| r.get("kind").and_then(Value::as_str) == Some("eval")),
            );
            if !chunk.more || chunk.next_offset == offset {
                break;
            }
            offset = chunk.next_offset;
        }
        Ok(evals)
    })
    .await?;
    Ok(Json(serde_json::json!({ "evals": records })))
}

/// Query of the episodes route; every value is text so a bad one is a clear 400.
#[derive(Deserialize, Default)]
pub struct EpisodesQuery {
    source: Option<String>,
    env: Option<String>,
    success: Option<String>,
    min_reward: Option<String>,
    max_reward: Option<String>,
    invalid: Option<String>,
    step_min: Option<String>,
    step_max: Option<String>,
    offset: Option<String>,
    limit: Option<String>,
}

/// `value` parsed as a `T` (empty or absent: `None`), or a 400 naming `name`.
fn parse_opt<T: std::str::FromStr>(name: &str, value: Option<&str>) -> Result<Option<T>, ApiError> {
    match value.map(str::trim) {
        None | Some("") => Ok(None),
        Some(text) => text
            .parse()
            .map(Some)
            .map_err(|_| ApiError::bad_request(format!("`{name}={text}` is not a valid value"))),
    }
}

/// An episode in a page, with the source it is from.
#[derive(Serialize)]
struct SourcedEpisode {
    source: String,
    #[serde(flatten)]
    episode: EpisodeSummary,
}

/// A malformed line of a source.
#[derive(Serialize)]
struct SourcedBadLine {
    source: String,
    #[serde(flatten)]
    bad: BadLine,
}

/// A page of episodes over one or several sources.
#[derive(Serialize, Default)]
pub struct EpisodesPage {
    sources: Vec<String>,
    episodes: Vec<SourcedEpisode>,
    offset: usize,
    limit: usize,
    total_matching: usize,
    indexed_episodes: usize,
    index_complete: bool,
    bad_lines: Vec<SourcedBadLine>,
    bad_line_count: usize,
    envs: Vec<String>,
    errors: Vec<String>,
}

/// `GET /api/runs/{run}/episodes?source=&env=&success=&min_reward=&max_reward=&invalid=&
/// step_min=&step_max=&offset=&limit=`: a page of episode summaries with counts. Without
/// `source`, the sources with a step in `[step_min, step_max]` are paged one after another.
pub async fn episodes(
    State(state): State<DashboardState>,
    UrlPath(name): UrlPath<String>,
    Query(query): Query<EpisodesQuery>,
) -> Result<Json<EpisodesPage>, ApiError> {
    let filter = EpisodeFilter {
        env: query.env.clone().filter(|e| !e.is_empty()),
        success: parse_opt("success", query.success.as_deref())?,
        min_reward: parse_opt("min_reward", query.min_reward.as_deref())?,
        max_reward: parse_opt("max_reward", query.max_reward.as_deref())?,
        invalid: parse_opt("invalid", query.invalid.as_deref())?,
    };
    let step_min: Option<u64> = parse_opt("step_min", query.step_min.as_deref())?;
    let step_max: Option<u64> = parse_opt("step_max", query.step_max.as_deref())?;
    let offset = parse_opt("offset", query.offset.as_deref())?.unwrap_or(0);
    let limit = parse_opt("limit", query.limit.as_deref())?
        .unwrap_or(DEFAULT_PAGE)
        .min(MAX_PAGE);
    let sources = chosen_sources(&state, name, query.source, step_min, step_max).await?;
    let mut page = EpisodesPage {
        offset,
        limit,
        index_complete: true,
        ..EpisodesPage::default()
    };
    let mut skip = offset;
    let mut envs = std::collections::BTreeSet::new();
    for source in sources {
        let part = state
            .index
            .page(
                &source.path,
                &filter,
                skip,
                limit - page.episodes.len(),
                PAGE_WAIT,
            )
            .await
            .map_err(|e| ApiError::io(&format!("indexing `{}`", source.name), e))?;
        skip = skip.saturating_sub(part.total_matching);
        page.total_matching += part.total_matching;
        page.indexed_episodes += part.indexed_episodes;
        page.index_complete &= part.index_complete;
        page.bad_line_count += part.bad_line_count;
        page.errors.extend(part.error);
        envs.extend(part.envs);
        page.bad_lines
            .extend(part.bad_lines.into_iter().map(|bad| SourcedBadLine {
                source: source.name.clone(),
                bad,
            }));
        page.episodes
            .extend(part.episodes.into_iter().map(|episode| SourcedEpisode {
                source: source.name.clone(),
                episode,
            }));
        page.sources.push(source.name);
    }
    page.envs = envs.into_iter().collect();
    Ok(Json(page))
}

/// The sources a query pages: the one named, or every source with a step, kept when its
/// step is within `[step_min, step_max]`.
async fn chosen_sources(
    state: &DashboardState,
    run_name: String,
    source: Option<String>,
    step_min: Option<u64>,
    step_max: Option<u64>,
) -> Result<Vec<SourceFile>, ApiError> {
    let runs_dir = state.runs_dir.clone();
    blocking(move || {
        let run = run_named(&runs_dir, &run_name)?;
        let candidates = match source.filter(|s| !s.is_empty()) {
            Some(name) => vec![source_named(&run, &name)?],
            None => runs::list_sources(&run.path)
                .map_err(|e| ApiError::io("listing the run's samples", e))?
                .into_iter()
                .filter(|s| s.step.is_some())
                .collect(),
        };
        let in_range = |step: Option<u64>| match (step_min, step_max, step) {
            (None, None, _) => true,
            (_, _, None) => false,
            (min, max, Some(step)) => {
                min.is_none_or(|m| step >= m) && max.is_none_or(|m| step <= m)
            }
        };
        Ok(candidates
            .into_iter()
            .filter(|s| in_range(s.step))
            .collect())
    })
    .await
}

/// `GET /api/runs/{run}/episodes/{source}/{index}`: the episode's JSON line, as stored.
pub async fn episode(
    State(state): State<DashboardState>,
    UrlPath((name, source, index)): UrlPath<(String, String, String)>,
) -> Result<Response, ApiError> {
    let index: usize = parse_opt("index", Some(&index))?
        .ok_or_else(|| ApiError::bad_request("an episode index is needed"))?;
    let runs_dir = state.runs_dir.clone();
    let file = blocking(move || {
        let run = run_named(&runs_dir, &name)?;
        source_named(&run, &source)
    })
    .await?;
    let summary = state
        .index
        .episode(&file.path, index, EPISODE_WAIT)
        .await
        .map_err(|e| ApiError::io(&format!("indexing `{}`", file.name), e))?
        .ok_or_else(|| ApiError::not_found(format!("`{}` has no episode {index}", file.name)))?;
    let path: PathBuf = file.path.clone();
    let bytes = blocking(move || {
        read_episode(&path, &summary).map_err(|e| ApiError::io("reading the episode", e))
    })
    .await?;
    Ok(([(header::CONTENT_TYPE, "application/json")], bytes).into_response())
}

/// Any other `/api/...` path.
pub async fn no_route() -> ApiError {
    ApiError::not_found("no such API route")
}
