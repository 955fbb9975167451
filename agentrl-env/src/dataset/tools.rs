//! The tools a dataset offers, by name: the calculator always; the sandboxed standard tools
//! (`python`, `shell`, `read_file`, `write_file`, `list_dir`, feature `shell-envs`) in a
//! private workspace per session; `sql` over the user's SQLite file (`database`, feature
//! `sql-envs`) and `search` over the user's documents (`corpus`, feature `search-envs`).

use agentrl_core::{Error, Result, ToolContext, ToolSpec};
use agentrl_tools::{Calculator, ToolBox, ToolLimits};

use super::options::DatasetOptions;

/// Every tool name a dataset may ask for.
pub const TOOL_NAMES: &[&str] = &[
    "calculator",
    "python",
    "shell",
    "read_file",
    "write_file",
    "list_dir",
    "sql",
    "search",
];

/// Tools that run in the session's workspace.
const WORKSPACE_TOOLS: &[&str] = &["python", "shell", "read_file", "write_file", "list_dir"];

/// The tools of a dataset's episodes and what they need, checked when the dataset loads.
#[derive(Clone, Default)]
pub struct ToolSet {
    names: Vec<String>,
    #[cfg(feature = "sql-envs")]
    database: Option<std::path::PathBuf>,
    #[cfg(feature = "search-envs")]
    search: Option<std::sync::Arc<agentrl_tools::SearchIndex>>,
}

impl std::fmt::Debug for ToolSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolSet")
            .field("names", &self.names)
            .finish()
    }
}

/// A session's tool box and the context (workspace) its tools run in.
pub struct SessionToolBox {
    /// The tools.
    pub toolbox: ToolBox,
    /// Where they run.
    pub ctx: ToolContext,
    /// Keeps the workspace alive for the session; removed on drop.
    #[cfg(feature = "shell-envs")]
    _workspace: Option<crate::workspace::Workspace>,
}

impl ToolSet {
    /// The tools `options` name; an unknown name, or a tool whose data or feature is missing,
    /// is an [`Error::Config`] naming env `env`.
    pub fn from_options(env: &str, options: &DatasetOptions) -> Result<Self> {
        let fail = |what: String| Error::Config(format!("env `{env}` options: {what}"));
        for name in &options.tools {
            if !TOOL_NAMES.contains(&name.as_str()) {
                return Err(fail(format!(
                    "unknown tool `{name}` (known: {})",
                    TOOL_NAMES.join(", ")
                )));
            }
            if let Some(feature) = missing_feature(name) {
                return Err(fail(format!(
                    "tool `{name}` needs agentrl-env's `{feature}` feature"
                )));
            }
        }
        let wants = |tool: &str| options.tools.iter().any(|n| n == tool);
        if wants("sql") != options.database.is_some() {
            return Err(fail("tool `sql` and option `database` go together".into()));
        }
        if wants("search") != options.corpus.is_some() {
            return Err(fail("tool `search` and option `corpus` go together".into()));
        }
        Ok(ToolSet {
            names: options.tools.clone(),
            #[cfg(feature = "sql-envs")]
            database: checked_database(options)?,
            #[cfg(feature = "search-envs")]
            search: match &options.corpus {
                Some(folder) => Some(std::sync::Arc::new(super::corpus::index_corpus(folder)?)),
                None => None,
            },
        })
    }

    /// Whether no tool is offered.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The tool names, in option order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// A fresh tool box for one session of env `env_id` (with its own workspace when a tool
    /// needs one).
    pub fn build(&self, env_id: &str) -> Result<SessionToolBox> {
        #[cfg(feature = "shell-envs")]
        let workspace = if self
            .names
            .iter()
            .any(|n| WORKSPACE_TOOLS.contains(&n.as_str()))
        {
            Some(crate::workspace::Workspace::create(
                env_id,
                &Default::default(),
            )?)
        } else {
            None
        };
        #[cfg(feature = "shell-envs")]
        let ctx = workspace
            .as_ref()
            .map(crate::workspace::Workspace::context)
            .unwrap_or_default();
        #[cfg(not(feature = "shell-envs"))]
        let ctx = ToolContext::default();
        let mut toolbox = ToolBox::new(ToolLimits::default());
        for name in &self.names {
            toolbox = self.add_tool(toolbox, name, env_id)?;
        }
        Ok(SessionToolBox {
            toolbox,
            ctx,
            #[cfg(feature = "shell-envs")]
            _workspace: workspace,
        })
    }

    /// The specs of the tools, as an observation lists them.
    pub fn specs(&self, env_id: &str) -> Result<Vec<ToolSpec>> {
        Ok(self.build(env_id)?.toolbox.specs())
    }

    /// `toolbox` with tool `name` added.
    fn add_tool(&self, toolbox: ToolBox, name: &str, env_id: &str) -> Result<ToolBox> {
        match name {
            "calculator" => toolbox.with(Calculator),
            #[cfg(feature = "shell-envs")]
            "python" => toolbox.with(agentrl_tools::Python::new(Default::default())),
            #[cfg(feature = "shell-envs")]
            "shell" => toolbox.with(agentrl_tools::Shell::new(Default::default())),
            #[cfg(feature = "shell-envs")]
            "read_file" => toolbox.with(agentrl_tools::ReadFile {
                limits: Default::default(),
            }),
            #[cfg(feature = "shell-envs")]
            "write_file" => toolbox.with(agentrl_tools::WriteFile {
                limits: Default::default(),
            }),
            #[cfg(feature = "shell-envs")]
            "list_dir" => toolbox.with(agentrl_tools::ListDir {
                limits: Default::default(),
            }),
            #[cfg(feature = "sql-envs")]
            "sql" => self.add_sql(toolbox, env_id),
            #[cfg(feature = "search-envs")]
            "search" => match &self.search {
                Some(index) => toolbox.with(agentrl_tools::Search::new(
                    std::sync::Arc::clone(index),
                    Default::default(),
                )),
                None => Err(Error::env(env_id, "tool `search` has no corpus")),
            },
            other => Err(Error::env(
                env_id,
                format!("tool `{other}` is not available"),
            )),
        }
    }

    /// `toolbox` with the `sql` tool over the dataset's database, opened read-only.
    #[cfg(feature = "sql-envs")]
    fn add_sql(&self, toolbox: ToolBox, env_id: &str) -> Result<ToolBox> {
        use agentrl_tools::{Sql, SqlAccess, SqlDatabase};
        let Some(path) = &self.database else {
            return Err(Error::env(env_id, "tool `sql` has no database"));
        };
        let db = SqlDatabase::open(path, SqlAccess::ReadOnly)
            .map_err(|e| Error::env(env_id, format!("database {}: {e}", path.display())))?;
        toolbox.with(Sql::new(std::sync::Arc::new(db), Default::default()))
    }
}

/// The `database` option, checked to be a file that exists.
#[cfg(feature = "sql-envs")]
fn checked_database(options: &DatasetOptions) -> Result<Option<std::path::PathBuf>> {
    match &options.database {
        Some(path) if !path.is_file() => Err(Error::Config(format!(
            "database {}: no such file",
            path.display()
        ))),
        other => Ok(other.clone()),
    }
}

/// The Cargo feature tool `name` needs, when it is not built.
fn missing_feature(name: &str) -> Option<&'static str> {
    let needs = match name {
        "sql" => "sql-envs",
        "search" => "search-envs",
        n if WORKSPACE_TOOLS.contains(&n) => "shell-envs",
        _ => return None,
    };
    let built = match needs {
        "sql-envs" => cfg!(feature = "sql-envs"),
        "search-envs" => cfg!(feature = "search-envs"),
        _ => cfg!(feature = "shell-envs"),
    };
    (!built).then_some(needs)
}
