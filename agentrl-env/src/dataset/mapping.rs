//! The column mapping: turning one record of a task file into a [`TaskRow`] and its split.
//! Every failure is a reason naming the column at fault, which the loader reports with the
//! record's line or row.

use agentrl_core::{Error, Message, Result, Split, stable_hash};
use regex::Regex;
use serde_json::{Map, Value};

use super::checker::{CHECKER_NAMES, CheckerKind};
use super::options::{DatasetOptions, SplitRule};
use super::source::{Record, RecordPlace, json_kind};
use super::task_row::TaskRow;

/// Where the prompt comes from.
#[derive(Debug, Clone)]
enum PromptColumn {
    /// A text column.
    Text(String),
    /// A column of `{role, content}` messages.
    Messages(String),
}

/// How the columns of a record map onto a task, read from [`DatasetOptions`].
#[derive(Debug, Clone)]
pub struct ColumnMapping {
    prompt: PromptColumn,
    answer: String,
    answer_pattern: Option<Regex>,
    id: Option<String>,
    checker: Option<String>,
    script: Option<String>,
    split: SplitRule,
    default_checker: CheckerKind,
    default_script: Option<String>,
}

/// A record mapped onto a task, with its split.
#[derive(Debug, Clone)]
pub struct MappedRow {
    /// The task.
    pub row: TaskRow,
    /// Its split.
    pub split: Split,
}

impl ColumnMapping {
    /// The mapping `options` describe; a bad `answer_pattern` is an [`Error::Config`].
    pub fn from_options(options: &DatasetOptions) -> Result<Self> {
        let prompt = match (options.prompt_column(), &options.messages) {
            (Some(text), _) => PromptColumn::Text(text.to_string()),
            (None, Some(messages)) => PromptColumn::Messages(messages.clone()),
            (None, None) => PromptColumn::Text("question".into()),
        };
        let answer_pattern = match &options.answer_pattern {
            Some(p) => Some(Regex::new(p).map_err(|e| {
                Error::Config(format!("option `answer_pattern` is not a valid regex: {e}"))
            })?),
            None => None,
        };
        Ok(ColumnMapping {
            prompt,
            answer: options.answer.clone(),
            answer_pattern,
            id: options.id_column.clone(),
            checker: options.checker_column.clone(),
            script: options.script_column.clone(),
            split: options.split_rule(),
            default_checker: options.checker,
            default_script: options.script.clone(),
        })
    }

    /// `record` as a task and its split, or why it cannot be one.
    pub fn map(&self, record: &Record) -> std::result::Result<MappedRow, String> {
        let columns = &record.columns;
        let prompt = self.prompt_of(columns)?;
        let reference = self.reference_of(columns)?;
        let id = match &self.id {
            Some(column) => scalar_text(columns, column)?,
            None => default_id(record.place),
        };
        let checker = match &self.checker {
            Some(column) => optional_checker(columns, column)?.unwrap_or(self.default_checker),
            None => self.default_checker,
        };
        let script = match &self.script {
            Some(column) => optional_text(columns, column)?.or(self.default_script.clone()),
            None => self.default_script.clone(),
        };
        if checker.runs_script() && script.is_none() {
            return Err(format!("checker `{}` has no script", checker.name()));
        }
        let row = TaskRow {
            id,
            prompt,
            reference,
            checker,
            script,
        };
        let split = self.split_of(columns, &row)?;
        Ok(MappedRow { row, split })
    }

    /// The prompt messages of a record.
    fn prompt_of(&self, columns: &Map<String, Value>) -> std::result::Result<Vec<Message>, String> {
        match &self.prompt {
            PromptColumn::Text(column) => {
                let text = text_column(columns, column)?;
                if text.trim().is_empty() {
                    return Err(format!("column `{column}` is empty"));
                }
                Ok(vec![Message::user(text)])
            }
            PromptColumn::Messages(column) => messages_column(columns, column),
        }
    }

    /// The reference answer of a record, through `answer_pattern` when there is one.
    fn reference_of(&self, columns: &Map<String, Value>) -> std::result::Result<String, String> {
        let raw = scalar_text(columns, &self.answer)?;
        let Some(pattern) = &self.answer_pattern else {
            return Ok(raw.trim().to_string());
        };
        let captures = pattern.captures(&raw).ok_or_else(|| {
            format!(
                "column `{}` does not match answer_pattern `{}`",
                self.answer,
                pattern.as_str()
            )
        })?;
        let found = captures.get(1).or_else(|| captures.get(0));
        let reference = found.map_or("", |m| m.as_str()).trim();
        if reference.is_empty() {
            return Err(format!(
                "answer_pattern extracts nothing from column `{}`",
                self.answer
            ));
        }
        Ok(reference.to_string())
    }

    /// The split of a mapped row.
    fn split_of(
        &self,
        columns: &Map<String, Value>,
        row: &TaskRow,
    ) -> std::result::Result<Split, String> {
        match &self.split {
            SplitRule::Column(column) => split_named(&text_column(columns, column)?)
                .ok_or_else(|| format!("column `{column}` is not train, test or validation")),
            SplitRule::Hash(test_fraction) => {
                let key = match &self.id {
                    Some(_) => row.id.clone(),
                    None => row.prompt_text(),
                };
                Ok(hash_split(&key, *test_fraction))
            }
        }
    }
}

/// The split a split column's value names (`validation`, `valid`, `dev` and `eval` are test).
fn split_named(value: &str) -> Option<Split> {
    match value.trim().to_lowercase().as_str() {
        "train" | "training" => Some(Split::Train),
        "test" | "validation" | "valid" | "dev" | "eval" => Some(Split::Test),
        _ => None,
    }
}

/// Buckets of the hash split (so fractions as fine as 1e-6 work).
const HASH_BUCKETS: u64 = 1_000_000;

/// The split of a row whose key is `key`: test for a stable `test_fraction` of keys.
pub fn hash_split(key: &str, test_fraction: f64) -> Split {
    let bucket = stable_hash(key) % HASH_BUCKETS;
    if (bucket as f64) < test_fraction * HASH_BUCKETS as f64 {
        Split::Test
    } else {
        Split::Train
    }
}

/// The id of a row without an id column: `line-N` or `row-N`.
fn default_id(place: RecordPlace) -> String {
    match place {
        RecordPlace::Line(n) => format!("line-{n}"),
        RecordPlace::Row(n) => format!("row-{n}"),
    }
}

/// Column `column`, present and not null.
fn present<'a>(
    columns: &'a Map<String, Value>,
    column: &str,
) -> std::result::Result<&'a Value, String> {
    match columns.get(column) {
        None => Err(format!("missing column `{column}`")),
        Some(Value::Null) => Err(format!("column `{column}` is null")),
        Some(value) => Ok(value),
    }
}

/// Column `column` as a string.
fn text_column(columns: &Map<String, Value>, column: &str) -> std::result::Result<String, String> {
    match present(columns, column)? {
        Value::String(s) => Ok(s.clone()),
        other => Err(format!(
            "column `{column}` should be a string, got {}",
            json_kind(other)
        )),
    }
}

/// Column `column` as text: a string, or a number or boolean written out.
fn scalar_text(columns: &Map<String, Value>, column: &str) -> std::result::Result<String, String> {
    match present(columns, column)? {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        other => Err(format!(
            "column `{column}` should be a string or number, got {}",
            json_kind(other)
        )),
    }
}

/// Column `column` as text when present, non-null and not blank.
fn optional_text(
    columns: &Map<String, Value>,
    column: &str,
) -> std::result::Result<Option<String>, String> {
    match columns.get(column) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(_) => text_column(columns, column).map(Some),
    }
}

/// Column `column` as a checker name, when set.
fn optional_checker(
    columns: &Map<String, Value>,
    column: &str,
) -> std::result::Result<Option<CheckerKind>, String> {
    let Some(name) = optional_text(columns, column)? else {
        return Ok(None);
    };
    CheckerKind::from_name(&name).map(Some).ok_or_else(|| {
        format!(
            "column `{column}` names an unknown checker `{name}` (known: {})",
            CHECKER_NAMES.join(", ")
        )
    })
}

/// Column `column` as chat messages: a list of `{role, content}` objects.
fn messages_column(
    columns: &Map<String, Value>,
    column: &str,
) -> std::result::Result<Vec<Message>, String> {
    let Value::Array(items) = present(columns, column)? else {
        return Err(format!("column `{column}` should be a list of messages"));
    };
    if items.is_empty() {
        return Err(format!("column `{column}` has no messages"));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, item)| chat_message(item).map_err(|why| format!("column `{column}`[{i}]: {why}")))
        .collect()
}

/// One `{role, content}` object as a message.
fn chat_message(item: &Value) -> std::result::Result<Message, String> {
    let role = item.get("role").and_then(Value::as_str);
    let content = item.get("content").and_then(Value::as_str);
    let (Some(role), Some(content)) = (role, content) else {
        return Err("should be an object with string `role` and `content`".into());
    };
    match role {
        "system" => Ok(Message::system(content)),
        "user" => Ok(Message::user(content)),
        "assistant" => Ok(Message::assistant(content)),
        other => Err(format!(
            "unknown role `{other}` (system, user or assistant)"
        )),
    }
}
