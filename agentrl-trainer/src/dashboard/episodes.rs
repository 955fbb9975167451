//! The episode index of trajectories files: per file, the byte offset, length and a few
//! summary fields of each episode (one JSON line), so the dashboard can filter and page
//! through files of gigabytes and fetch one episode by seeking to it.
//!
//! An index is built by a background thread and cached in memory by path. It grows
//! incrementally: when the file is longer than what was indexed (a live run appends to it),
//! indexing continues from the last indexed offset; a last line without its newline is not
//! indexed until it is complete. A query never waits for the whole index: it answers from
//! what is indexed so far (waiting a little for the first page to fill) and says whether the
//! index is complete. A malformed line is counted (with its line number) and skipped.

use std::collections::{BTreeSet, HashMap};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

/// Episodes parsed between two publications of a growing index (small, so a first page
/// shows up fast).
const PUBLISH_EVERY: usize = 64;
/// Read buffer of the indexing thread.
const READ_BUFFER_BYTES: usize = 1 << 20;
/// Malformed lines remembered per file (all are counted).
const MAX_BAD_LINES_KEPT: usize = 100;

/// The summary of one episode kept in the index.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct EpisodeSummary {
    /// Position among the file's episodes, from 0.
    pub index: usize,
    /// Line number in the file, from 1.
    pub line: usize,
    /// Byte offset of the line.
    #[serde(skip)]
    pub offset: u64,
    /// Byte length of the line (without its newline).
    #[serde(skip)]
    pub len: u64,
    /// Env id.
    pub env_id: String,
    /// Task id.
    pub task_id: String,
    /// Whether the env judged the task solved.
    pub success: bool,
    /// Training reward.
    pub reward: f64,
    /// How the episode ended (`completed`, `truncated`, ...).
    pub outcome: String,
    /// Number of policy turns.
    pub turns: usize,
    /// Tool calls executed.
    pub tool_calls: u32,
    /// Tool calls that returned errors.
    pub tool_errors: u32,
    /// Turns whose action the env rejected.
    pub invalid_actions: usize,
    /// The distinct policy versions of the turns, ascending.
    pub policy_versions: Vec<u64>,
    /// The distinct policy names of the turns, ascending.
    pub policy_names: Vec<String>,
}

/// The fields of a trajectory line the index reads; everything else is skipped unparsed.
#[derive(Deserialize)]
struct TrajectoryFields {
    env_id: String,
    task_id: String,
    outcome: String,
    #[serde(default)]
    success: bool,
    #[serde(default)]
    reward: f64,
    #[serde(default)]
    turns: Vec<TurnFields>,
    #[serde(default)]
    tool_calls: u32,
    #[serde(default)]
    tool_errors: u32,
}

/// The fields of a turn the index reads.
#[derive(Deserialize)]
struct TurnFields {
    #[serde(default)]
    policy_version: u64,
    #[serde(default)]
    policy_name: Option<String>,
    #[serde(default)]
    invalid_action: Option<IgnoredAny>,
}

impl EpisodeSummary {
    /// The summary of the trajectory in `line`, or why it is not one.
    pub fn parse(
        line: &[u8],
        index: usize,
        line_number: usize,
        offset: u64,
    ) -> Result<Self, String> {
        let fields: TrajectoryFields = serde_json::from_slice(line).map_err(|e| e.to_string())?;
        let versions: BTreeSet<u64> = fields.turns.iter().map(|t| t.policy_version).collect();
        let names: BTreeSet<String> = fields
            .turns
            .iter()
            .filter_map(|t| t.policy_name.clone())
            .collect();
        Ok(EpisodeSummary {
            index,
            line: line_number,
            offset,
            len: line.len() as u64,
            env_id: fields.env_id,
            task_id: fields.task_id,
            success: fields.success,
            reward: fields.reward,
            outcome: fields.outcome,
            turns: fields.turns.len(),
            tool_calls: fields.tool_calls,
            tool_errors: fields.tool_errors,
            invalid_actions: fields
                .turns
                .iter()
                .filter(|t| t.invalid_action.is_some())
                .count(),
            policy_versions: versions.into_iter().collect(),
            policy_names: names.into_iter().collect(),
        })
    }
}

/// A line that is not a trajectory.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct BadLine {
    /// Line number, from 1.
    pub line: usize,
    /// The parser's complaint.
    pub error: String,
}

/// What is indexed of one file.
#[derive(Debug, Default, Clone)]
pub struct FileIndex {
    /// The episodes, in file order.
    pub episodes: Vec<EpisodeSummary>,
    /// The first malformed lines (at most `MAX_BAD_LINES_KEPT`).
    pub bad_lines: Vec<BadLine>,
    /// How many malformed lines there are.
    pub bad_line_count: usize,
    /// Bytes indexed: the offset after the last complete line read.
    pub indexed_bytes: u64,
    /// Lines read (complete ones).
    pub lines: usize,
    /// The file's size when it was last looked at.
    pub file_bytes: u64,
    /// Whether a thread is extending this index now.
    pub building: bool,
    /// The last I/O error of the indexing thread, if any.
    pub error: Option<String>,
    /// How many times the file was found rewritten (shorter than indexed) and reindexed.
    pub generation: u64,
}

impl FileIndex {
    /// Whether every complete line of the file (as last seen) is indexed.
    pub fn complete(&self) -> bool {
        !self.building && self.error.is_none() && self.indexed_bytes >= self.file_bytes
    }

    /// Takes in one complete `line` (with its newline) that starts at `offset`.
    fn add_line(&mut self, line: &[u8], offset: u64) {
        self.lines += 1;
        self.indexed_bytes = offset + line.len() as u64;
        let body = line.strip_suffix(b"\n").unwrap_or(line);
        let body = body.strip_suffix(b"\r").unwrap_or(body);
        if body.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        match EpisodeSummary::parse(body, self.episodes.len(), self.lines, offset) {
            Ok(summary) => self.episodes.push(summary),
            Err(error) => {
                self.bad_line_count += 1;
                if self.bad_lines.len() < MAX_BAD_LINES_KEPT {
                    self.bad_lines.push(BadLine {
                        line: self.lines,
                        error,
                    });
                }
            }
        }
    }
}

/// Indexes `path` whole, on this thread (what the background thread does, in one go).
pub fn index_file(path: &Path) -> std::io::Result<FileIndex> {
    let mut index = FileIndex::default();
    extend_index(path, &mut index, |_| true)?;
    Ok(index)
}

/// Reads `path` from `index.indexed_bytes` on, adding complete lines to `index`, and calls
/// `publish` with the lines added every [`PUBLISH_EVERY`] episodes and at the end; it stops
/// early when `publish` returns false. A file shorter than what was indexed (rewritten) is
/// indexed again from the start.
fn extend_index(
    path: &Path,
    index: &mut FileIndex,
    mut publish: impl FnMut(&FileIndex) -> bool,
) -> std::io::Result<()> {
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    if len < index.indexed_bytes {
        *index = FileIndex {
            generation: index.generation + 1,
            building: index.building,
            ..FileIndex::default()
        };
    }
    index.file_bytes = len;
    file.seek(SeekFrom::Start(index.indexed_bytes))?;
    let mut reader =
        BufReader::with_capacity(READ_BUFFER_BYTES, file.take(len - index.indexed_bytes));
    let mut line = Vec::new();
    let mut since_publish = 0;
    loop {
        line.clear();
        let read = reader.read_until(b'\n', &mut line)?;
        if read == 0 || line.last() != Some(&b'\n') {
            break; // end of file, or a last line still being written
        }
        let before = index.episodes.len();
        index.add_line(&line, index.indexed_bytes);
        since_publish += index.episodes.len() - before;
        if since_publish >= PUBLISH_EVERY {
            if !publish(index) {
                return Ok(());
            }
            since_publish = 0;
        }
    }
    publish(index);
    Ok(())
}

/// Which episodes a query wants.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct EpisodeFilter {
    /// Only this env.
    pub env: Option<String>,
    /// Only solved (`true`) or unsolved (`false`) episodes.
    pub success: Option<bool>,
    /// Only rewards at least this.
    pub min_reward: Option<f64>,
    /// Only rewards at most this.
    pub max_reward: Option<f64>,
    /// Only episodes with an invalid action (`true`).
    pub invalid: Option<bool>,
}

impl EpisodeFilter {
    /// Whether `episode` passes.
    pub fn matches(&self, episode: &EpisodeSummary) -> bool {
        self.env
            .as_deref()
            .is_none_or(|env| env.is_empty() || episode.env_id == env)
            && self.success.is_none_or(|s| episode.success == s)
            && self.min_reward.is_none_or(|min| episode.reward >= min)
            && self.max_reward.is_none_or(|max| episode.reward <= max)
            && (self.invalid != Some(true) || episode.invalid_actions > 0)
    }
}

/// One page of matching episodes of a file.
#[derive(Debug, Clone, Serialize)]
pub struct EpisodePage {
    /// The page.
    pub episodes: Vec<EpisodeSummary>,
    /// Matching episodes indexed so far.
    pub total_matching: usize,
    /// Episodes indexed so far (matching or not).
    pub indexed_episodes: usize,
    /// Whether the whole file is indexed (so `total_matching` is final).
    pub index_complete: bool,
    /// Bytes indexed and the file's size.
    pub indexed_bytes: u64,
    /// The file's size when last looked at.
    pub file_bytes: u64,
    /// Malformed lines (the first ones) and their count.
    pub bad_lines: Vec<BadLine>,
    /// How many lines are malformed.
    pub bad_line_count: usize,
    /// The env ids seen so far, sorted.
    pub envs: Vec<String>,
    /// The indexing thread's error, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The page of `index` from match `offset`, at most `limit` episodes.
pub fn page_of(
    index: &FileIndex,
    filter: &EpisodeFilter,
    offset: usize,
    limit: usize,
) -> EpisodePage {
    let mut total = 0;
    let mut episodes = Vec::new();
    let mut envs = BTreeSet::new();
    for episode in &index.episodes {
        envs.insert(episode.env_id.as_str());
        if filter.matches(episode) {
            if total >= offset && episodes.len() < limit {
                episodes.push(episode.clone());
            }
            total += 1;
        }
    }
    EpisodePage {
        episodes,
        total_matching: total,
        indexed_episodes: index.episodes.len(),
        index_complete: index.complete(),
        indexed_bytes: index.indexed_bytes,
        file_bytes: index.file_bytes,
        bad_lines: index.bad_lines.clone(),
        bad_line_count: index.bad_line_count,
        envs: envs.into_iter().map(str::to_string).collect(),
        error: index.error.clone(),
    }
}

/// How far an index got.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct IndexProgress {
    /// Episodes indexed.
    pub episodes: usize,
    /// Whether the file (as last seen) is indexed whole.
    pub complete: bool,
    /// Malformed lines met.
    pub bad_line_count: usize,
    /// Bytes indexed.
    pub indexed_bytes: u64,
}

/// An index shared between its building thread and the queries.
struct SharedIndex {
    index: Mutex<FileIndex>,
    /// Bumped at each publication, so a query can wait for progress.
    progress: watch::Sender<u64>,
}

impl SharedIndex {
    /// The index, even if a thread panicked while holding it.
    fn lock(&self) -> MutexGuard<'_, FileIndex> {
        self.index
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The cache of file indexes, keyed by path. Cheap to clone (shared).
#[derive(Clone, Default)]
pub struct IndexCache {
    files: Arc<Mutex<HashMap<PathBuf, Arc<SharedIndex>>>>,
}

impl IndexCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// The shared index of `path`, created empty if new.
    fn shared(&self, path: &Path) -> Arc<SharedIndex> {
        let mut files = self
            .files
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        files
            .entry(path.to_path_buf())
            .or_insert_with(|| {
                Arc::new(SharedIndex {
                    index: Mutex::new(FileIndex::default()),
                    progress: watch::Sender::new(0),
                })
            })
            .clone()
    }

    /// Starts a background thread extending the index of `path` when the file grew (or was
    /// never indexed) and no thread is at it already. Never blocks on the file.
    pub fn refresh(&self, path: &Path) -> std::io::Result<()> {
        let shared = self.shared(path);
        let len = std::fs::metadata(path)?.len();
        {
            let mut index = shared.lock();
            index.file_bytes = index.file_bytes.max(len);
            if index.building || (index.indexed_bytes == len && index.error.is_none()) {
                return Ok(());
            }
            index.building = true;
            index.error = None;
        }
        let path = path.to_path_buf();
        let spawned = std::thread::Builder::new()
            .name("dashboard-index".into())
            .spawn(move || build_in_background(&path, shared));
        spawned.map(|_| ())
    }

    /// How far the index of `path` got, without starting anything; `None` if never asked.
    pub fn peek(&self, path: &Path) -> Option<IndexProgress> {
        let files = self
            .files
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let index = files.get(path)?.lock();
        Some(IndexProgress {
            episodes: index.episodes.len(),
            complete: index.complete(),
            bad_line_count: index.bad_line_count,
            indexed_bytes: index.indexed_bytes,
        })
    }

    /// What is indexed of `path` now (a copy), starting indexing if needed.
    pub fn snapshot(&self, path: &Path) -> std::io::Result<FileIndex> {
        self.refresh(path)?;
        Ok(self.shared(path).lock().clone())
    }

    /// The page of `path`'s episodes matching `filter` from match `offset`, at most `limit`.
    /// Starts or extends the index, then waits up to `wait` for the page to fill (or the
    /// index to complete) and answers with what is indexed by then.
    pub async fn page(
        &self,
        path: &Path,
        filter: &EpisodeFilter,
        offset: usize,
        limit: usize,
        wait: Duration,
    ) -> std::io::Result<EpisodePage> {
        self.refresh(path)?;
        let shared = self.shared(path);
        let mut progress = shared.progress.subscribe();
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            progress.borrow_and_update();
            let (page, building) = {
                let index = shared.lock();
                (page_of(&index, filter, offset, limit), index.building)
            };
            if page.total_matching >= offset + limit || !building {
                return Ok(page);
            }
            match tokio::time::timeout_at(deadline, progress.changed()).await {
                Ok(Ok(())) => continue,
                _ => return Ok(page_of(&shared.lock(), filter, offset, limit)),
            }
        }
    }

    /// Waits until the index of `path` has no thread extending it (for tests and benches).
    pub async fn wait_idle(&self, path: &Path) {
        let shared = self.shared(path);
        let mut progress = shared.progress.subscribe();
        while shared.lock().building {
            if progress.changed().await.is_err() {
                return;
            }
        }
    }

    /// The summary of episode `index` of `path`, waiting up to `wait` for the index to
    /// reach it; `None` when the file has no such episode (so far).
    pub async fn episode(
        &self,
        path: &Path,
        index: usize,
        wait: Duration,
    ) -> std::io::Result<Option<EpisodeSummary>> {
        let filter = EpisodeFilter::default();
        let page = self.page(path, &filter, index, 1, wait).await?;
        Ok(page.episodes.into_iter().next())
    }
}

/// The indexing thread: extends the index of `path`, publishing progress as it goes; stops
/// when nothing but this thread holds the index any more (its cache was dropped).
fn build_in_background(path: &Path, shared: Arc<SharedIndex>) {
    let mut working = {
        let index = shared.lock();
        FileIndex {
            building: true,
            ..index.clone()
        }
    };
    let mut published_episodes = working.episodes.len();
    let result = extend_index(path, &mut working, |progress| {
        let mut index = shared.lock();
        if progress.generation != index.generation {
            *index = progress.clone(); // the file was rewritten: start over
        } else {
            index.episodes.extend_from_slice(
                &progress.episodes[published_episodes.min(progress.episodes.len())..],
            );
            index.bad_lines = progress.bad_lines.clone();
            index.bad_line_count = progress.bad_line_count;
            index.indexed_bytes = progress.indexed_bytes;
            index.lines = progress.lines;
            index.file_bytes = progress.file_bytes;
        }
        published_episodes = progress.episodes.len();
        drop(index);
        shared.progress.send_modify(|n| *n += 1);
        Arc::strong_count(&shared) > 1
    });
    let mut index = shared.lock();
    index.building = false;
    if let Err(e) = result {
        index.error = Some(format!("indexing {}: {e}", path.display()));
    }
    drop(index);
    shared.progress.send_modify(|n| *n += 1);
}

/// The bytes of the episode `summary` describes, read from its offset in `path`.
pub fn read_episode(path: &Path, summary: &EpisodeSummary) -> std::io::Result<Vec<u8>> {
    let mut file = std::fs::File::open(path)?;
    file.seek(SeekFrom::Start(summary.offset))?;
    let mut bytes = vec![0; usize::try_from(summary.len).unwrap_or(usize::MAX)];
    file.read_exact(&mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn episode_line(env: &str, success: bool, reward: f64, invalid: bool) -> String {
        let invalid = if invalid {
            r#","invalid_action":"bad move""#
        } else {
            ""
        };
        format!(
            r#"{{"env_id":"{env}","task_id":"t","split":"train","group_id":1,"messages":[{{"role":"user","content":"hi"}}],"turns":[{{"injected_ids":[1],"generated_ids":[2,3],"logprobs":[-0.1,-0.2],"policy_version":7,"policy_name":"stale","finish":"stop","reward":0.0{invalid}}}],"outcome":"completed","success":{success},"tool_calls":2,"tool_errors":1,"reward":{reward}}}"#
        )
    }

    fn write_lines(path: &Path, lines: &[String]) {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("open");
        for line in lines {
            writeln!(file, "{line}").expect("write");
        }
    }

    #[test]
    fn malformed_lines_are_counted_and_skipped() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("s.jsonl");
        write_lines(
            &path,
            &[
                episode_line("maze", true, 1.0, false),
                "{not json".to_string(),
                String::new(),
                r#"{"env_id":"x"}"#.to_string(),
                episode_line("maze", false, 0.0, true),
            ],
        );
        let index = index_file(&path).expect("index");
        assert_eq!(index.episodes.len(), 2);
        assert_eq!(index.bad_line_count, 2);
        assert_eq!(
            index.bad_lines.iter().map(|b| b.line).collect::<Vec<_>>(),
            [2, 4]
        );
        let second = &index.episodes[1];
        assert_eq!(
            (second.index, second.line, second.invalid_actions),
            (1, 5, 1)
        );
        assert_eq!(second.policy_versions, [7]);
        assert_eq!(second.policy_names, ["stale"]);
        let bytes = read_episode(&path, second).expect("read");
        assert_eq!(bytes, episode_line("maze", false, 0.0, true).as_bytes());
    }

    #[test]
    fn filters_and_pages() {
        let mut index = FileIndex::default();
        let mut offset = 0;
        for i in 0..10 {
            let line = episode_line(
                if i % 2 == 0 { "a" } else { "b" },
                i % 3 == 0,
                i as f64,
                i == 9,
            ) + "\n";
            index.add_line(line.as_bytes(), offset);
            offset += line.len() as u64;
        }
        index.file_bytes = offset;
        let all = page_of(&index, &EpisodeFilter::default(), 0, 4);
        assert_eq!(
            (all.episodes.len(), all.total_matching, all.index_complete),
            (4, 10, true)
        );
        let env_b = EpisodeFilter {
            env: Some("b".into()),
            ..Default::default()
        };
        let page = page_of(&index, &env_b, 2, 2);
        assert_eq!(page.total_matching, 5);
        assert_eq!(
            page.episodes.iter().map(|e| e.index).collect::<Vec<_>>(),
            [5, 7]
        );
        let solved = EpisodeFilter {
            success: Some(true),
            min_reward: Some(1.0),
            max_reward: Some(6.0),
            ..Default::default()
        };
        assert_eq!(
            page_of(&index, &solved, 0, 10)
                .episodes
                .iter()
                .map(|e| e.index)
                .collect::<Vec<_>>(),
            [3, 6]
        );
        let invalid = EpisodeFilter {
            invalid: Some(true),
            ..Default::default()
        };
        assert_eq!(page_of(&index, &invalid, 0, 10).total_matching, 1);
        assert_eq!(page.envs, ["a", "b"]);
    }

    #[tokio::test]
    async fn grows_incrementally_and_waits_for_a_partial_line() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("s.jsonl");
        write_lines(
            &path,
            &[
                episode_line("a", true, 1.0, false),
                episode_line("a", false, 0.0, false),
            ],
        );
        let cache = IndexCache::new();
        let wait = Duration::from_secs(5);
        let page = cache
            .page(&path, &EpisodeFilter::default(), 0, 10, wait)
            .await
            .expect("page");
        assert_eq!((page.total_matching, page.index_complete), (2, true));

        let third = episode_line("b", true, 0.5, false);
        let (head, tail) = third.split_at(20);
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .expect("open");
        write!(file, "{head}").expect("write");
        let page = cache
            .page(&path, &EpisodeFilter::default(), 0, 10, wait)
            .await
            .expect("page");
        assert_eq!(page.total_matching, 2, "a partial line is not indexed");
        assert!(!page.index_complete);

        writeln!(file, "{tail}").expect("write");
        let page = cache
            .page(&path, &EpisodeFilter::default(), 0, 10, wait)
            .await
            .expect("page");
        assert_eq!((page.total_matching, page.index_complete), (3, true));
        assert_eq!(page.episodes[2].env_id, "b");
        let episode = cache
            .episode(&path, 2, wait)
            .await
            .expect("episode")
            .expect("some");
        assert_eq!(
            read_episode(&path, &episode).expect("read"),
            third.as_bytes()
        );
        assert!(
            cache
                .episode(&path, 3, wait)
                .await
                .expect("episode")
                .is_none()
        );
    }
}
