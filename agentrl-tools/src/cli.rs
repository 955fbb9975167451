//! `agentrl tool list` and `agentrl tool call NAME 'JSON-ARGS' [options]`: every tool from the
//! command line — the standard ones (calculator, workspace files, sandboxed shell and Python)
//! and those that work on a resource an env would provide: `sql` on an SQLite file
//! (`--database`, read-only unless `--write`; an empty in-memory database without it),
//! `spreadsheet` on sheets loaded from CSV files (`--sheet NAME=FILE.csv`; changes are not
//! saved), `search` over the text files of a folder (`--corpus DIR`), and `http`/`browser`
//! restricted to the base URLs given with `--allow` (none without it).
//!
//! The `agentrl` binary mounts [`ToolCommand`] as its `tool` subcommand and hands it to [`run`]
//! (feature `cli`):
//!
//! ```
//! use agentrl_tools::cli::{ToolCommand, run};
//!
//! let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
//! let mut out = Vec::new();
//! rt.block_on(run(ToolCommand::List, &mut out)).unwrap();
//! assert!(String::from_utf8(out).unwrap().starts_with("calculator\t"));
//! ```

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::{
    Browser, Cell, FileLimits, HttpTool, SandboxConfig, Search, SearchDocument, SearchIndex,
    SearchLimits, Spreadsheet, Sql, SqlAccess, SqlDatabase, SqlLimits, ToolBox, ToolLimits,
    UrlAllowlist, WebLimits, Workbook, standard_toolbox,
};
use agentrl_core::{Error, Result, ToolCall, ToolContext};
use clap::{Args, Subcommand};

/// Time a call may take beyond the sandbox's own wall-clock limit before the ToolBox gives up.
const TIMEOUT_MARGIN: Duration = Duration::from_secs(2);
/// Longest output printed by `tool call`.
const MAX_OUTPUT_CHARS: usize = 100_000;

/// The `tool` subcommands.
#[derive(Debug, Subcommand)]
pub enum ToolCommand {
    /// Lists every tool: its name and description.
    List,
    /// Calls a tool with JSON arguments and prints its output (non-zero exit on error).
    Call {
        /// Tool name (see `agentrl tool list`).
        name: String,
        /// The arguments as a JSON object, e.g. '{"expression": "6*7"}'.
        args: String,
        /// Session workspace for the file, shell and python tools.
        #[arg(long)]
        workspace: Option<PathBuf>,
        /// What the resource tools work on.
        #[command(flatten)]
        resources: Resources,
    },
}

/// The resources of `sql`, `spreadsheet`, `search`, `http` and `browser`.
#[derive(Debug, Clone, Default, Args)]
pub struct Resources {
    /// SQLite file for the `sql` tool (default: an empty in-memory database).
    #[arg(long)]
    pub database: Option<PathBuf>,
    /// Let `sql` write to `--database` (default: read-only).
    #[arg(long, requires = "database")]
    pub write: bool,
    /// A sheet for the `spreadsheet` tool, as NAME=FILE.csv (repeatable).
    #[arg(long = "sheet", value_name = "NAME=FILE.csv")]
    pub sheets: Vec<String>,
    /// Folder whose `.txt` and `.md` files the `search` tool indexes (title: the first line).
    #[arg(long)]
    pub corpus: Option<PathBuf>,
    /// Base URL the `http` and `browser` tools may reach (repeatable).
    #[arg(long = "allow", value_name = "URL")]
    pub allow: Vec<String>,
}

/// Every tool: the standard toolbox (default sandbox, a ToolBox time-out just above its limit)
/// and the resource tools over `resources`.
fn toolbox(resources: &Resources) -> Result<ToolBox> {
    let sandbox = SandboxConfig::default();
    let limits = ToolLimits {
        timeout: sandbox.limits.wall_time + TIMEOUT_MARGIN,
        max_output_chars: MAX_OUTPUT_CHARS,
    };
    let database = match &resources.database {
        Some(path) => {
            let access = if resources.write {
                SqlAccess::ReadWrite
            } else {
                SqlAccess::ReadOnly
            };
            SqlDatabase::open(path, access)?
        }
        None => SqlDatabase::in_memory()?,
    };
    let allow =
        UrlAllowlist::new(&resources.allow).map_err(|e| Error::Config(format!("--allow: {e}")))?;
    standard_toolbox(limits, FileLimits::default(), sandbox)?
        .with(Sql::new(Arc::new(database), SqlLimits::default()))?
        .with(Spreadsheet::new(Arc::new(workbook(&resources.sheets)?)))?
        .with(Search::new(
            Arc::new(corpus_index(resources.corpus.as_deref())?),
            SearchLimits::default(),
        ))?
        .with(HttpTool::new(allow.clone(), WebLimits::default()))?
        .with(Browser::new(allow, WebLimits::default()))
}

/// A workbook with one sheet per `NAME=FILE.csv`.
fn workbook(sheets: &[String]) -> Result<Workbook> {
    let book = Workbook::new()?;
    for spec in sheets {
        let Some((name, file)) = spec.split_once('=') else {
            return Err(Error::Config(format!(
                "--sheet {spec}: expected NAME=FILE.csv"
            )));
        };
        let text = std::fs::read_to_string(file).map_err(|e| Error::io("reading", file, e))?;
        let rows: Vec<Vec<Cell>> = text.lines().map(csv_row).collect();
        book.add_sheet(name.trim(), &rows)
            .map_err(|e| Error::Config(format!("--sheet {spec}: {e}")))?;
    }
    Ok(book)
}

/// One CSV line as cells: numbers where a field parses as one, double quotes honoured.
fn csv_row(line: &str) -> Vec<Cell> {
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            ('"', _) => quoted = !quoted,
            (',', false) => fields.push(std::mem::take(&mut field)),
            (c, _) => field.push(c),
        }
    }
    fields.push(field);
    fields
        .into_iter()
        .map(|f| match f.trim() {
            "" => Cell::Empty,
            t => t
                .parse::<f64>()
                .map_or_else(|_| Cell::text(t), Cell::Number),
        })
        .collect()
}

/// The search index of the `.txt`/`.md` files in `dir` (an empty index without one).
fn corpus_index(dir: Option<&Path>) -> Result<SearchIndex> {
    let mut documents = Vec::new();
    if let Some(dir) = dir {
        let entries = std::fs::read_dir(dir).map_err(|e| Error::io("reading", dir, e))?;
        let mut paths: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.extension()
                    .is_some_and(|x| x.eq_ignore_ascii_case("txt") || x.eq_ignore_ascii_case("md"))
            })
            .collect();
        paths.sort();
        for path in paths {
            let body =
                std::fs::read_to_string(&path).map_err(|e| Error::io("reading", &path, e))?;
            let id = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let title = body.lines().next().unwrap_or_default().trim().to_string();
            documents.push(SearchDocument { id, title, body });
        }
    }
    SearchIndex::build(&documents).map_err(|e| Error::Config(format!("indexing the corpus: {e}")))
}

/// Runs a `tool` subcommand, writing what it prints to `out` (the binary passes stdout); a
/// failed call is an [`Error::Tool`].
pub async fn run(command: ToolCommand, out: &mut dyn Write) -> Result<()> {
    let written = |e| Error::io("writing", "the tool output", e);
    match command {
        ToolCommand::List => {
            let toolbox = toolbox(&Resources::default())?;
            for spec in toolbox.specs() {
                writeln!(out, "{}\t{}", spec.function.name, spec.function.description)
                    .map_err(written)?;
            }
            Ok(())
        }
        ToolCommand::Call {
            name,
            args,
            workspace,
            resources,
        } => {
            let toolbox = toolbox(&resources)?;
            if let Some(dir) = &workspace
                && !dir.is_dir()
            {
                return Err(Error::Config(format!(
                    "--workspace {} is not a directory",
                    dir.display()
                )));
            }
            let mut call = ToolCall::new("cli_call", name.clone(), &serde_json::json!({}));
            call.function.arguments = args;
            let outcome = toolbox.dispatch(&call, &ToolContext { workspace }).await;
            let text = outcome.message.text();
            if outcome.is_ok() {
                writeln!(out, "{text}").map_err(written)?;
                return Ok(());
            }
            Err(Error::Tool {
                tool: name,
                message: text.strip_prefix("error: ").unwrap_or(text).to_string(),
            })
        }
    }
}
