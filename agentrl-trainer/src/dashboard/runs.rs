//! Run directories as the dashboard sees them: which folders are runs, their status (from
//! `status.json` and the process table), their metrics records (read from a byte offset, so a
//! page can poll a growing `metrics.jsonl`), and their trajectory files ("sources").
//!
//! Everything here only reads. Names that come from a URL are looked up among the entries of
//! the listed directory, never joined blindly onto a path.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use serde::Serialize;
use serde_json::Value;

use crate::run_status::{RunState, RunStatus, process_alive};

/// The metrics file of a run.
pub const METRICS_FILE: &str = "metrics.jsonl";
/// The summary a finished `agentrl demo` writes.
pub const SUMMARY_FILE: &str = "summary.json";
/// The run's configuration.
pub const CONFIG_FILE: &str = "config.toml";
/// Demonstrations at the top of a run (a trajectories source like the samples).
pub const DEMOS_FILE: &str = "demos.jsonl";
/// The folder of sampled trajectories.
pub const SAMPLES_DIR: &str = "samples";

/// Files whose presence makes a folder a run.
const RUN_MARKERS: [&str; 4] = [
    METRICS_FILE,
    CONFIG_FILE,
    crate::run_status::STATUS_FILE,
    SUMMARY_FILE,
];
/// Most bytes of `metrics.jsonl` one metrics request returns (the page asks again for more).
const METRICS_CHUNK_BYTES: u64 = 8 << 20;
/// Bytes at the end of `metrics.jsonl` read for a run list's "last metrics".
const METRICS_TAIL_BYTES: u64 = 4 << 20;
/// Most bytes of `config.toml` returned.
const CONFIG_MAX_BYTES: u64 = 1 << 20;

/// A run found in the runs folder: its name in URLs and its directory.
#[derive(Debug, Clone)]
pub struct RunDir {
    /// The folder's name.
    pub name: String,
    /// The folder.
    pub path: PathBuf,
}

/// Whether `name` can only name a direct entry of a folder: not empty, no separator, not `.`
/// or `..`, no NUL.
pub fn is_plain_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\', '\0'])
}

/// Whether `dir` holds any of the files a run writes.
pub fn looks_like_run(dir: &Path) -> bool {
    RUN_MARKERS.iter().any(|marker| dir.join(marker).is_file())
}

/// The runs of `runs_dir`: `runs_dir` itself when it is a run, else its direct subfolders that
/// are runs, sorted by name. An unreadable `runs_dir` is an error naming it.
pub fn list_runs(runs_dir: &Path) -> std::io::Result<Vec<RunDir>> {
    if looks_like_run(runs_dir) {
        let name = runs_dir
            .canonicalize()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "run".to_string());
        return Ok(vec![RunDir {
            name,
            path: runs_dir.to_path_buf(),
        }]);
    }
    let mut runs = Vec::new();
    for entry in std::fs::read_dir(runs_dir)? {
        let entry = entry?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        let path = entry.path();
        if path.is_dir() && looks_like_run(&path) {
            runs.push(RunDir { name, path });
        }
    }
    runs.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(runs)
}

/// The run called `name` among [`list_runs`], or `None`.
pub fn find_run(runs_dir: &Path, name: &str) -> std::io::Result<Option<RunDir>> {
    if !is_plain_name(name) {
        return Ok(None);
    }
    Ok(list_runs(runs_dir)?
        .into_iter()
        .find(|run| run.name == name))
}

/// What the dashboard says about a run's state.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StatusView {
    /// `running`, `finished`, `failed` or `unknown`.
    pub state: &'static str,
    /// More words: `interrupted` for a running status whose process is gone, the error of a
    /// failed command.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The command that runs (or ran) the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The process id from `status.json`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// When the command started (Unix seconds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_unix: Option<u64>,
}

/// The state of the run in `dir`: running (status running, process alive), finished (status
/// finished, or no status but a summary), failed (status failed, or running with a dead
/// process: interrupted), unknown otherwise.
pub fn run_status(dir: &Path) -> StatusView {
    let unknown = StatusView {
        state: "unknown",
        detail: None,
        command: None,
        pid: None,
        started_unix: None,
    };
    match RunStatus::read(dir) {
        Ok(Some(status)) => status_view(&status),
        Ok(None) if dir.join(SUMMARY_FILE).is_file() => StatusView {
            state: "finished",
            ..unknown
        },
        Ok(None) => unknown,
        Err(e) => StatusView {
            detail: Some(e.to_string()),
            ..unknown
        },
    }
}

/// [`StatusView`] of a `status.json`.
fn status_view(status: &RunStatus) -> StatusView {
    let (state, detail) = match status.state {
        RunState::Running if process_alive(status.pid) => ("running", None),
        RunState::Running => ("failed", Some("interrupted".to_string())),
        RunState::Finished => ("finished", None),
        RunState::Failed => ("failed", status.error.clone()),
    };
    StatusView {
        state,
        detail,
        command: Some(status.command.clone()),
        pid: Some(status.pid),
        started_unix: Some(status.started_unix),
    }
}

/// Latest modification time (Unix seconds) of the run's folder and its main files.
pub fn modified_unix(dir: &Path) -> Option<u64> {
    [
        dir.to_path_buf(),
        dir.join(METRICS_FILE),
        dir.join(crate::run_status::STATUS_FILE),
        dir.join(SUMMARY_FILE),
    ]
    .iter()
    .filter_map(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
    .filter_map(|t| t.duration_since(UNIX_EPOCH).ok())
    .map(|d| d.as_secs())
    .max()
}

/// Metrics records read from a byte offset.
#[derive(Debug, Clone, Serialize, Default)]
pub struct MetricsChunk {
    /// The records, in file order.
    pub records: Vec<Value>,
    /// Where the next read starts: after the last complete line read.
    pub next_offset: u64,
    /// Whether more complete lines may follow (the chunk hit its size limit).
    pub more: bool,
    /// Lines that are not JSON objects, by the byte offset where they start.
    pub bad_lines: Vec<BadMetricsLine>,
}

/// A line of `metrics.jsonl` that could not be read.
#[derive(Debug, Clone, Serialize)]
pub struct BadMetricsLine {
    /// Byte offset of the line's start.
    pub offset: u64,
    /// Why it was rejected.
    pub error: String,
}

/// Records of `path` from byte `since` on: complete lines only (a last line without its
/// newline is left for the next read), at most `METRICS_CHUNK_BYTES` at a time. A missing
/// file is an empty chunk; an offset past the end (the file was rewritten) restarts at 0.
pub fn read_metrics(path: &Path, since: u64) -> std::io::Result<MetricsChunk> {
    let mut file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(MetricsChunk::default()),
        Err(e) => return Err(e),
    };
    let len = file.metadata()?.len();
    let start = if since > len { 0 } else { since };
    file.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::new();
    file.take(METRICS_CHUNK_BYTES).read_to_end(&mut bytes)?;
    let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let mut chunk = MetricsChunk {
        next_offset: start + complete as u64,
        more: start + (bytes.len() as u64) < len,
        ..MetricsChunk::default()
    };
    let mut line_start = start;
    for line in bytes[..complete].split_inclusive(|&b| b == b'\n') {
        push_record(&mut chunk, line, line_start);
        line_start += line.len() as u64;
    }
    Ok(chunk)
}

/// Parses one metrics line into `chunk` (a record, a bad line, or nothing when blank).
fn push_record(chunk: &mut MetricsChunk, line: &[u8], offset: u64) {
    if line.iter().all(u8::is_ascii_whitespace) {
        return;
    }
    match serde_json::from_slice::<Value>(line) {
        Ok(record @ Value::Object(_)) => chunk.records.push(record),
        Ok(_) => chunk.bad_lines.push(BadMetricsLine {
            offset,
            error: "not a JSON object".to_string(),
        }),
        Err(e) => chunk.bad_lines.push(BadMetricsLine {
            offset,
            error: e.to_string(),
        }),
    }
}

/// The last record of each `kind` in the last `METRICS_TAIL_BYTES` of `path`, and the
/// `step` of the last record that has one.
pub fn last_metrics(path: &Path) -> std::io::Result<(BTreeMap<String, Value>, Option<u64>)> {
    let len = match std::fs::metadata(path) {
        Ok(meta) => meta.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((BTreeMap::new(), None)),
        Err(e) => return Err(e),
    };
    let tail_start = len.saturating_sub(METRICS_TAIL_BYTES);
    let mut offset = tail_start;
    let mut last = BTreeMap::new();
    let mut last_step = None;
    loop {
        let chunk = read_metrics(path, offset)?;
        for (i, record) in chunk.records.into_iter().enumerate() {
            if i == 0 && offset == tail_start && tail_start > 0 {
                continue; // probably the end of a line cut by the tail's start
            }
            if let Some(step) = record.get("step").and_then(Value::as_u64) {
                last_step = Some(step);
            }
            if let Some(kind) = record.get("kind").and_then(Value::as_str) {
                last.insert(kind.to_string(), record.clone());
            }
        }
        if !chunk.more || chunk.next_offset == offset {
            break;
        }
        offset = chunk.next_offset;
    }
    Ok((last, last_step))
}

/// The run's `config.toml` (at most `CONFIG_MAX_BYTES`), if any.
pub fn config_text(dir: &Path) -> std::io::Result<Option<String>> {
    let path = dir.join(CONFIG_FILE);
    match std::fs::File::open(&path) {
        Ok(file) => {
            let mut bytes = Vec::new();
            file.take(CONFIG_MAX_BYTES).read_to_end(&mut bytes)?;
            Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The run's `summary.json` as JSON, if any (an unreadable one is a string saying why).
pub fn summary_json(dir: &Path) -> Option<Value> {
    let path = dir.join(SUMMARY_FILE);
    let text = std::fs::read_to_string(&path).ok()?;
    Some(
        serde_json::from_str(&text).unwrap_or_else(|e| {
            Value::String(format!("{} is not valid JSON: {e}", path.display()))
        }),
    )
}

/// A trajectories file of a run.
#[derive(Debug, Clone, Serialize)]
pub struct SourceFile {
    /// Its file name (the name used in URLs).
    pub name: String,
    /// The step in its name (`rl_step_000040.jsonl` → 40), if any.
    pub step: Option<u64>,
    /// Its name without the step and extension (`rl_step`, `eval_after_rl`, `demos`).
    pub label: String,
    /// Its size in bytes.
    pub size: u64,
    /// Where it is.
    #[serde(skip)]
    pub path: PathBuf,
}

/// The run's trajectory files: `demos.jsonl`, then `samples/*.jsonl` by name.
pub fn list_sources(dir: &Path) -> std::io::Result<Vec<SourceFile>> {
    let mut sources = Vec::new();
    let demos = dir.join(DEMOS_FILE);
    if demos.is_file() {
        sources.push(source_file(DEMOS_FILE.to_string(), demos)?);
    }
    let samples = dir.join(SAMPLES_DIR);
    if samples.is_dir() {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&samples)? {
            let entry = entry?;
            if let Ok(name) = entry.file_name().into_string()
                && name.ends_with(".jsonl")
                && name != DEMOS_FILE
                && entry.path().is_file()
            {
                names.push((name, entry.path()));
            }
        }
        names.sort();
        for (name, path) in names {
            sources.push(source_file(name, path)?);
        }
    }
    Ok(sources)
}

/// The source called `name` among the run's, or `None`.
pub fn find_source(dir: &Path, name: &str) -> std::io::Result<Option<SourceFile>> {
    if !is_plain_name(name) {
        return Ok(None);
    }
    Ok(list_sources(dir)?.into_iter().find(|s| s.name == name))
}

/// [`SourceFile`] of `path` named `name`.
fn source_file(name: String, path: PathBuf) -> std::io::Result<SourceFile> {
    let size = std::fs::metadata(&path)?.len();
    let (label, step) = label_and_step(&name);
    Ok(SourceFile {
        name,
        step,
        label,
        size,
        path,
    })
}

/// `rl_step_000040.jsonl` → (`rl_step`, Some(40)); `eval_after_rl.jsonl` → (`eval_after_rl`,
/// None).
pub fn label_and_step(name: &str) -> (String, Option<u64>) {
    let stem = name.strip_suffix(".jsonl").unwrap_or(name);
    if let Some((label, digits)) = stem.rsplit_once('_')
        && !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && let Ok(step) = digits.parse()
    {
        return (label.to_string(), Some(step));
    }
    (stem.to_string(), None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_only() {
        for bad in ["", ".", "..", "../x", "a/b", "a\\b", "x\0"] {
            assert!(!is_plain_name(bad), "{bad:?}");
        }
        assert!(is_plain_name("run-1.seed2"));
    }

    #[test]
    fn labels_and_steps_from_names() {
        assert_eq!(
            label_and_step("rl_step_000040.jsonl"),
            ("rl_step".into(), Some(40))
        );
        assert_eq!(
            label_and_step("eval_after_rl.jsonl"),
            ("eval_after_rl".into(), None)
        );
        assert_eq!(label_and_step("demos.jsonl"), ("demos".into(), None));
    }

    #[test]
    fn metrics_keep_a_partial_last_line_and_report_bad_ones() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join(METRICS_FILE);
        std::fs::write(
            &path,
            "{\"kind\":\"a\",\"step\":1}\nnot json\n{\"kind\":\"a\",\"st",
        )
        .expect("write");
        let chunk = read_metrics(&path, 0).expect("read");
        assert_eq!(chunk.records.len(), 1);
        assert_eq!(chunk.bad_lines.len(), 1);
        assert_eq!(chunk.bad_lines[0].offset, 22);
        assert_eq!(chunk.next_offset, 31);
        std::fs::write(
            &path,
            "{\"kind\":\"a\",\"step\":1}\nnot json\n{\"kind\":\"a\",\"step\":2}\n",
        )
        .expect("write");
        let next = read_metrics(&path, chunk.next_offset).expect("read");
        assert_eq!(next.records.len(), 1);
        assert_eq!(next.records[0]["step"], 2);
        let (last, step) = last_metrics(&path).expect("last");
        assert_eq!(step, Some(2));
        assert_eq!(last["a"]["step"], 2);
    }

    #[test]
    fn finds_runs_by_listed_name_only() {
        let dir = tempfile::tempdir().expect("temp dir");
        let run = dir.path().join("r1");
        std::fs::create_dir_all(&run).expect("mkdir");
        std::fs::write(run.join(METRICS_FILE), "").expect("write");
        std::fs::create_dir_all(dir.path().join("not-a-run")).expect("mkdir");
        assert_eq!(list_runs(dir.path()).expect("list").len(), 1);
        assert!(find_run(dir.path(), "r1").expect("find").is_some());
        assert!(find_run(dir.path(), "not-a-run").expect("find").is_none());
        assert!(find_run(dir.path(), "../r1").expect("find").is_none());
        assert_eq!(list_runs(&run).expect("list")[0].name, "r1");
        assert_eq!(run_status(&run).state, "unknown");
        std::fs::write(run.join(SUMMARY_FILE), "{}").expect("write");
        assert_eq!(run_status(&run).state, "finished");
    }
}
