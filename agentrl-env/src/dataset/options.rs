//! The options of the `dataset` env (a run config's `[env.options]` table): which file to read,
//! how its columns map onto tasks, how answers are checked and how rows are split.

use std::path::PathBuf;

use agentrl_core::{Error, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::checker::CheckerKind;
use crate::demonstrator::KnobDoc;

/// Options of one env, by name (a run config's `[env.options]` table, as JSON values).
pub type EnvOptions = serde_json::Map<String, Value>;

/// Test fraction of the hash split when neither `split_column` nor `test_fraction` is set.
pub const DEFAULT_TEST_FRACTION: f64 = 0.1;

/// Relative tolerance of the `numeric` checker unless `tolerance` is set.
pub const DEFAULT_TOLERANCE: f64 = 1e-6;

/// Steps per episode unless `max_turns` is set (one answer, with room for a few tool calls).
pub const DEFAULT_MAX_TURNS: usize = 4;

/// The `dataset` options and what each does, as `agentrl env list` shows them.
pub const DATASET_OPTION_DOCS: &[KnobDoc] = &[
    (
        "path",
        "the task file: .jsonl (one JSON object a line) or .parquet",
    ),
    (
        "prompt",
        "column holding the question text (default `question`)",
    ),
    (
        "messages",
        "column holding the prompt as a list of {role, content} (instead of prompt)",
    ),
    (
        "answer",
        "column holding the reference answer (default `answer`)",
    ),
    (
        "answer_pattern",
        "regex whose first group extracts the reference (e.g. `#### (.*)$`)",
    ),
    (
        "id_column",
        "column of a stable row id (default: line or row number)",
    ),
    (
        "tools",
        "tools by name: calculator, python, shell, read_file, write_file, list_dir, sql, search",
    ),
    (
        "checker",
        "auto | exact | numeric | regex | contains | python | shell | judge (default auto)",
    ),
    (
        "checker_column",
        "column naming a per-row checker that overrides `checker`",
    ),
    (
        "script",
        "python or shell checker script: answer on stdin, $REFERENCE set, exit 0 = solved",
    ),
    (
        "script_column",
        "column of a per-row checker script (overrides `script`)",
    ),
    (
        "tolerance",
        "relative tolerance of the numeric checker (default 1e-6)",
    ),
    (
        "split_column",
        "column whose value (train | test | validation) picks the split",
    ),
    (
        "test_fraction",
        "share of rows in the test split by a stable hash of id or prompt (default 0.1)",
    ),
    ("system", "system prompt put before each task"),
    ("max_turns", "most steps per episode (default 4)"),
    ("database", "SQLite file the `sql` tool reads (read-only)"),
    (
        "corpus",
        "folder of .txt/.md documents the `search` tool indexes",
    ),
];

/// The `dataset` env's options; see [`DATASET_OPTION_DOCS`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatasetOptions {
    /// The task file (`.jsonl` or `.parquet`).
    pub path: PathBuf,
    /// Column of the question text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// Column of the prompt as chat messages (replaces `prompt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<String>,
    /// Column of the reference answer.
    #[serde(default = "default_answer_column")]
    pub answer: String,
    /// Regex extracting the reference from the answer column (first group, else the match).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_pattern: Option<String>,
    /// Column of a stable row id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id_column: Option<String>,
    /// Tools offered in every episode, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// The checker of rows without a per-row one.
    #[serde(default)]
    pub checker: CheckerKind,
    /// Column naming a per-row checker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checker_column: Option<String>,
    /// Script of the `python` or `shell` checker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<String>,
    /// Column of a per-row checker script.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script_column: Option<String>,
    /// Relative tolerance of the numeric checker.
    #[serde(default = "default_tolerance")]
    pub tolerance: f64,
    /// Column whose value picks the split.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_column: Option<String>,
    /// Share of rows in the test split by stable hash (when there is no `split_column`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_fraction: Option<f64>,
    /// System prompt put before each task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// Most steps per episode.
    #[serde(default = "default_max_turns")]
    pub max_turns: usize,
    /// SQLite file behind the `sql` tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<PathBuf>,
    /// Folder of documents behind the `search` tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corpus: Option<PathBuf>,
}

fn default_answer_column() -> String {
    "answer".to_string()
}

fn default_tolerance() -> f64 {
    DEFAULT_TOLERANCE
}

fn default_max_turns() -> usize {
    DEFAULT_MAX_TURNS
}

/// How rows are assigned to the train and test splits.
#[derive(Debug, Clone, PartialEq)]
pub enum SplitRule {
    /// By the value of this column.
    Column(String),
    /// By a stable hash of the row's id (or prompt): this share goes to test.
    Hash(f64),
}

impl DatasetOptions {
    /// Options for the file at `path`, every other option at its default.
    pub fn for_file(path: impl Into<PathBuf>) -> Self {
        DatasetOptions {
            path: path.into(),
            prompt: None,
            messages: None,
            answer: default_answer_column(),
            answer_pattern: None,
            id_column: None,
            tools: Vec::new(),
            checker: CheckerKind::default(),
            checker_column: None,
            script: None,
            script_column: None,
            tolerance: DEFAULT_TOLERANCE,
            split_column: None,
            test_fraction: None,
            system: None,
            max_turns: DEFAULT_MAX_TURNS,
            database: None,
            corpus: None,
        }
    }

    /// Reads the options of env `env` from `options`; a missing `path`, an unknown option or
    /// a value of the wrong type is an [`Error::Config`] naming the env.
    pub fn from_map(env: &str, options: &EnvOptions) -> Result<Self> {
        let parsed: DatasetOptions = serde_json::from_value(Value::Object(options.clone()))
            .map_err(|e| Error::Config(format!("env `{env}` options: {e}")))?;
        parsed.validate(env)?;
        Ok(parsed)
    }

    /// The column of the question text (`prompt`, else `question`), unless `messages` is set.
    pub fn prompt_column(&self) -> Option<&str> {
        match (&self.prompt, &self.messages) {
            (Some(prompt), _) => Some(prompt),
            (None, Some(_)) => None,
            (None, None) => Some("question"),
        }
    }

    /// The split rule these options set.
    pub fn split_rule(&self) -> SplitRule {
        match &self.split_column {
            Some(column) => SplitRule::Column(column.clone()),
            None => SplitRule::Hash(self.test_fraction.unwrap_or(DEFAULT_TEST_FRACTION)),
        }
    }

    /// Checks the values that have to agree with each other; errors name `env` and the option.
    pub fn validate(&self, env: &str) -> Result<()> {
        let fail = |what: String| Err(Error::Config(format!("env `{env}` options: {what}")));
        if self.prompt.is_some() && self.messages.is_some() {
            return fail("set either `prompt` or `messages`, not both".into());
        }
        if self.split_column.is_some() && self.test_fraction.is_some() {
            return fail("set either `split_column` or `test_fraction`, not both".into());
        }
        if let Some(f) = self.test_fraction
            && !(0.0..1.0).contains(&f)
        {
            return fail(format!("`test_fraction` must be in [0, 1), got {f}"));
        }
        if !(self.tolerance.is_finite() && self.tolerance >= 0.0) {
            return fail(format!("`tolerance` must be >= 0, got {}", self.tolerance));
        }
        if self.max_turns == 0 {
            return fail("`max_turns` must be at least 1".into());
        }
        if self.checker.runs_script() && self.script.is_none() && self.script_column.is_none() {
            return fail(format!(
                "checker `{}` needs `script` or `script_column`",
                self.checker.name()
            ));
        }
        Ok(())
    }
}

/// `options` with each of `defaults` (name, value) added where it is not set.
pub fn with_defaults(options: &EnvOptions, defaults: &[(&str, Value)]) -> EnvOptions {
    let mut merged = options.clone();
    for (name, value) in defaults {
        merged
            .entry(name.to_string())
            .or_insert_with(|| value.clone());
    }
    merged
}
