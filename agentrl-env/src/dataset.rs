//! `dataset`: tasks from a file of one's own, JSONL or Parquet (the format Hugging Face
//! datasets are stored in), with a column mapping given in the env options:
//!
//! ```toml
//! [env]
//! id = "dataset"
//! [env.options]
//! path = "data/gsm8k_train.jsonl"
//! prompt = "question"             # or messages = "messages" (a list of {role, content})
//! answer = "answer"               # the reference answer column
//! answer_pattern = "#### (.*)$"   # optional regex whose first group is the reference
//! tools = ["calculator"]          # optional tools by name
//! checker = "numeric"             # auto | exact | numeric | regex | contains | python | shell | judge
//! test_fraction = 0.1             # or split_column = "split"
//! system = "Solve the problem."   # optional system prompt
//! max_turns = 4
//! ```
//!
//! Rows that cannot be used (missing column, wrong type, unparsable line, a pattern that does
//! not match) are logged as warnings with their line (JSONL, from 1) or row (Parquet, from 0)
//! and skipped; a file with no usable row is an error naming it. Task `index` of a split is
//! row `index % n` of that split's `n` rows, so training cycles through the rows in file order.
//!
//! The final answer is read from the agent's first message without tool calls: its last
//! `\boxed{}`, else what follows `Answer:`, else the whole text. Checkers: see [`CheckerKind`];
//! `python`/`shell` scripts run in the sandbox with the answer on stdin and the reference in
//! `$REFERENCE` ([`REFERENCE_VAR`]); `judge` leaves the verdict to the reward's `llm_judge`:
//! the episode ends without a success flag and with a note giving the reference
//! ([`REFERENCE_NOTE`]) as its last message, which the judge reads in the transcript.
//!
//! With no options the env plays a built-in sample of 24 GSM8K-shaped word problems.
//! `math-reasoning`, `sql-analysis` and `knowledge-search` take the same options to play a
//! user's file under their own ids (see [`Dataset::load_as`]).

#[cfg(feature = "search-envs")]
mod corpus;
mod env;
mod final_answer;
mod mapping;
#[cfg(feature = "dataset-parquet")]
mod parquet_file;
mod record;
#[cfg(feature = "shell-envs")]
mod script;
mod source;
mod task_row;
mod tools;
mod user_data;

pub mod checker;
pub mod options;

use std::sync::Arc;

use agentrl_core::{Env, Error, Message, Result, Split, Task};

pub use checker::{CHECKER_NAMES, CheckerKind, Verdict};
pub use env::{DatasetEnv, REFERENCE_NOTE, SessionSettings};
pub use final_answer::{extract_final_answer, parse_number};
pub use mapping::hash_split;
pub use options::{DATASET_OPTION_DOCS, DatasetOptions, EnvOptions, SplitRule};
#[cfg(feature = "shell-envs")]
pub use script::REFERENCE_VAR;
pub use source::{RecordPlace, RowWarning};
pub use task_row::TaskRow;
pub use tools::TOOL_NAMES;
pub use user_data::{SEED_OPTION, UserDataEnv};

/// Name of the environment variable holding the reference for script checkers.
#[cfg(not(feature = "shell-envs"))]
pub const REFERENCE_VAR: &str = "REFERENCE";

use crate::factory::{EnvFactory, Solver};
use crate::wrappers::TurnLimit;
use mapping::ColumnMapping;
use source::{ReadRecords, parse_jsonl, read_records};
use tools::ToolSet;

/// Registry id of the env.
pub const DATASET_ID: &str = "dataset";

/// The built-in sample the env plays without options (GSM8K-shaped, `#### N` endings).
const SAMPLE_JSONL: &str = include_str!("dataset/sample.jsonl");

/// Description of the env without options (what `env list` shows).
const SAMPLE_DESCRIPTION: &str = "tasks from a JSONL or Parquet file: [env.options] path, \
     prompt|messages, answer, answer_pattern, tools, checker, split_column|test_fraction, \
     system, max_turns (no options: 24 built-in word problems)";

/// A dataset env's factory: the usable rows of one file, split into train and test.
#[derive(Debug, Clone)]
pub struct Dataset {
    inner: Arc<Loaded>,
}

/// What a loaded dataset holds.
#[derive(Debug)]
struct Loaded {
    description: String,
    rows: Vec<TaskRow>,
    train: Vec<usize>,
    test: Vec<usize>,
    max_turns: usize,
    settings: Arc<SessionSettings>,
    skipped: Vec<RowWarning>,
}

impl Default for Dataset {
    /// The built-in sample (see [`Dataset::sample`]).
    fn default() -> Self {
        Dataset::sample()
    }
}

impl Dataset {
    /// The file `options` describe, as env `dataset`.
    pub fn load(options: &DatasetOptions) -> Result<Self> {
        Dataset::load_as(DATASET_ID, options)
    }

    /// The file `options` describe, as env `id` (used by the envs that accept user data).
    pub fn load_as(id: &'static str, options: &DatasetOptions) -> Result<Self> {
        options.validate(id)?;
        let read = read_records(&options.path)?;
        let source = options.path.display().to_string();
        Dataset::from_records(id, &source, read, options, None)
    }

    /// The env `dataset` configured by `options` (an `[env.options]` table).
    pub fn from_options(options: &EnvOptions) -> Result<Self> {
        Dataset::load(&DatasetOptions::from_map(DATASET_ID, options)?)
    }

    /// The built-in sample of 24 word problems (reference after `#### `, numeric checker).
    pub fn sample() -> Self {
        let mut options = DatasetOptions::for_file("built-in sample");
        options.answer_pattern = Some("#### (.*)$".into());
        options.checker = CheckerKind::Numeric;
        options.test_fraction = Some(0.25);
        let read = parse_jsonl(SAMPLE_JSONL);
        let description = Some(SAMPLE_DESCRIPTION);
        match Dataset::from_records(DATASET_ID, "built-in sample", read, &options, description) {
            Ok(dataset) => dataset,
            // The sample is compiled into the crate and its loading is tested.
            Err(e) => panic!("the built-in dataset sample does not load: {e}"),
        }
    }

    /// The rows that were skipped while loading, with where and why.
    pub fn skipped_rows(&self) -> &[RowWarning] {
        &self.inner.skipped
    }

    /// Number of distinct rows in `split`.
    pub fn len(&self, split: Split) -> usize {
        self.indices(split).len()
    }

    /// Whether `split` has no rows of its own (test then reuses the train rows).
    pub fn is_empty(&self, split: Split) -> bool {
        self.len(split) == 0
    }

    /// Row `index % n` of `split`'s `n` rows.
    pub fn row(&self, split: Split, index: u64) -> &TaskRow {
        let indices = match self.indices(split) {
            [] => &self.inner.train,
            some => some,
        };
        let at = (index % indices.len() as u64) as usize;
        &self.inner.rows[indices[at]]
    }

    /// The row positions of `split`.
    fn indices(&self, split: Split) -> &[usize] {
        match split {
            Split::Train => &self.inner.train,
            Split::Test => &self.inner.test,
        }
    }

    /// Maps `read`'s records with `options` into a dataset of env `id`; `source` names the
    /// file in warnings and errors; `description` replaces the generated one.
    fn from_records(
        id: &'static str,
        source: &str,
        read: ReadRecords,
        options: &DatasetOptions,
        description: Option<&str>,
    ) -> Result<Self> {
        let mapping = ColumnMapping::from_options(options)?;
        let tools = ToolSet::from_options(id, options)?;
        let mut skipped = read.skipped;
        let (mut rows, mut train, mut test) = (Vec::new(), Vec::new(), Vec::new());
        for record in &read.records {
            match mapping.map(record) {
                Ok(mapped) => {
                    let split = if mapped.split == Split::Train {
                        &mut train
                    } else {
                        &mut test
                    };
                    split.push(rows.len());
                    rows.push(mapped.row);
                }
                Err(reason) => skipped.push(RowWarning {
                    place: record.place,
                    reason,
                }),
            }
        }
        skipped.sort_by_key(|w| match w.place {
            RecordPlace::Line(n) | RecordPlace::Row(n) => n,
        });
        for warning in &skipped {
            tracing::warn!(env = id, "task file {source}: {warning}; row skipped");
        }
        check_splits(source, &rows, &train, &test, &skipped)?;
        let settings = SessionSettings {
            env_id: id,
            system: options.system.clone(),
            tools,
            tolerance: options.tolerance,
        };
        Ok(Dataset {
            inner: Arc::new(Loaded {
                description: description.map_or_else(
                    || {
                        format!(
                            "tasks from {source} ({} train, {} test rows)",
                            train.len(),
                            test.len()
                        )
                    },
                    str::to_string,
                ),
                rows,
                train,
                test,
                max_turns: options.max_turns,
                settings: Arc::new(settings),
                skipped,
            }),
        })
    }
}

/// Fails when `source` gave no usable row or no train row; warns when it gave no test row.
fn check_splits(
    source: &str,
    rows: &[TaskRow],
    train: &[usize],
    test: &[usize],
    skipped: &[RowWarning],
) -> Result<()> {
    if rows.is_empty() {
        let first = skipped
            .first()
            .map_or(String::new(), |w| format!("; first skipped: {w}"));
        return Err(Error::Config(format!(
            "task file {source}: no usable rows ({} skipped{first})",
            skipped.len()
        )));
    }
    if train.is_empty() {
        return Err(Error::Config(format!(
            "task file {source}: all {} usable rows are in the test split; lower test_fraction \
             or check split_column",
            rows.len()
        )));
    }
    if test.is_empty() {
        tracing::warn!("task file {source}: no test rows; evaluation uses the train rows");
    }
    Ok(())
}

#[async_trait::async_trait]
impl EnvFactory for Dataset {
    fn id(&self) -> &str {
        self.inner.settings.env_id
    }

    fn description(&self) -> &str {
        &self.inner.description
    }

    fn task(&self, split: Split, index: u64) -> Task {
        self.row(split, index).to_task(self.id(), split)
    }

    fn make(&self) -> Box<dyn Env> {
        Box::new(TurnLimit::new(
            DatasetEnv::new(Arc::clone(&self.inner.settings)),
            self.inner.max_turns,
        ))
    }

    fn max_turns(&self) -> usize {
        self.inner.max_turns
    }

    /// The sandbox must start when a row is checked by a `python` or `shell` script.
    async fn preflight(&self) -> Result<()> {
        #[cfg(feature = "shell-envs")]
        if self.inner.rows.iter().any(|row| row.checker.runs_script()) {
            let sandbox = agentrl_tools::Sandbox::default();
            return crate::workspace::check_sandbox(self.id(), &sandbox).await;
        }
        Ok(())
    }

    /// The expert knows the reference, so `seed` is not used.
    fn solver(&self, _seed: u64) -> Box<dyn Solver> {
        Box::new(DatasetExpert)
    }
}

/// The reference solver: answers `Answer: REFERENCE` at once. It solves rows checked by
/// `exact`, `numeric`, `contains` (and `auto`); a `regex` reference is a pattern and a script
/// checker decides for itself, so those may fail.
#[derive(Debug, Clone, Copy, Default)]
pub struct DatasetExpert;

impl Solver for DatasetExpert {
    fn act(&mut self, task: &Task, _history: &[Message]) -> Message {
        match serde_json::from_value::<TaskRow>(task.data.clone()) {
            Ok(row) => Message::assistant(format!("Answer: {}", row.reference)),
            Err(e) => Message::assistant(format!("I cannot read this task: {e}")),
        }
    }
}
