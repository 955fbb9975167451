//! File tools confined to the session workspace: [`ReadFile`] (`read_file {path}`),
//! [`WriteFile`] (`write_file {path, content}`) and [`ListDir`] (`list_dir {path}`).
//!
//! Paths are relative to [`ToolContext::workspace`]; absolute paths, `..` and symbolic links
//! that lead outside the workspace are refused. Reads and writes are size-limited.

mod resolve;

use std::io::Read;
use std::path::PathBuf;

use agentrl_core::{Tool, ToolContext, ToolError, ToolSpec};
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::arguments::parse_args;

/// Size limits of the file tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileLimits {
    /// Bytes `read_file` returns at most; longer files are cut with a note.
    pub max_read_bytes: u64,
    /// Largest `content` (in bytes) `write_file` accepts.
    pub max_write_bytes: usize,
    /// Entries `list_dir` shows at most.
    pub max_list_entries: usize,
}

impl Default for FileLimits {
    /// 64 KiB read, 1 MiB write, 500 entries.
    fn default() -> Self {
        FileLimits {
            max_read_bytes: 64 << 10,
            max_write_bytes: 1 << 20,
            max_list_entries: 500,
        }
    }
}

/// The `read_file` tool: the text of a workspace file.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadFile {
    /// Size limits.
    pub limits: FileLimits,
}

/// The `write_file` tool: creates or replaces a workspace file (and missing parent directories).
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteFile {
    /// Size limits.
    pub limits: FileLimits,
}

/// The `list_dir` tool: the entries of a workspace directory.
#[derive(Debug, Clone, Copy, Default)]
pub struct ListDir {
    /// Size limits.
    pub limits: FileLimits,
}

impl ReadFile {
    /// Name the model calls the tool by.
    pub const NAME: &'static str = "read_file";
}

impl WriteFile {
    /// Name the model calls the tool by.
    pub const NAME: &'static str = "write_file";
}

impl ListDir {
    /// Name the model calls the tool by.
    pub const NAME: &'static str = "list_dir";
}

/// A JSON Schema property for a workspace path.
fn path_property(what: &str) -> Value {
    json!({"type": "string", "description": format!("{what}, relative to the workspace (no `..`, not absolute).")})
}

/// The arguments of `read_file` and `list_dir`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PathArgs {
    /// The file or directory, relative to the workspace.
    path: String,
}

/// The arguments of `write_file`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    /// The file, relative to the workspace.
    path: String,
    /// The complete new content.
    content: String,
}

/// Runs blocking file work off the async runtime.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ToolError::Failed(format!("the file operation crashed: {e}")))?
}

#[async_trait]
impl Tool for ReadFile {
    fn spec(&self) -> ToolSpec {
        ToolSpec::function(
            Self::NAME,
            "Reads a text file from the workspace.",
            json!({
                "type": "object",
                "properties": {"path": path_property("The file")},
                "required": ["path"],
                "additionalProperties": false
            }),
        )
    }

    async fn call(&self, args: Value, ctx: &ToolContext) -> Result<String, ToolError> {
        let PathArgs { path } = parse_args(args)?;
        let root = resolve::workspace_root(ctx, Self::NAME)?;
        let max = self.limits.max_read_bytes;
        blocking(move || {
            let file = resolve::existing(&root, &path)?;
            let io = |e: std::io::Error| ToolError::Failed(format!("cannot read `{path}`: {e}"));
            if file.is_dir() {
                return Err(ToolError::Failed(format!(
                    "`{path}` is a directory; use list_dir"
                )));
            }
            let size = std::fs::metadata(&file).map_err(io)?.len();
            let mut bytes = Vec::new();
            std::fs::File::open(&file)
                .map_err(io)?
                .take(max)
                .read_to_end(&mut bytes)
                .map_err(io)?;
            let mut text = String::from_utf8_lossy(&bytes).into_owned();
            if size > max {
                text.push_str(&format!(
                    "\n…[file truncated: it has {size} bytes, only the first {max} are shown]"
                ));
            }
            Ok(text)
        })
        .await
    }
}

#[async_trait]
impl Tool for WriteFile {
    fn spec(&self) -> ToolSpec {
        ToolSpec::function(
            Self::NAME,
            "Creates or replaces a text file in the workspace (missing directories are created).",
            json!({
                "type": "object",
                "properties": {
                    "path": path_property("The file"),
                    "content": {"type": "string", "description": "The complete new content."}
                },
                "required": ["path", "content"],
                "additionalProperties": false
            }),
        )
    }

    async fn call(&self, args: Value, ctx: &ToolContext) -> Result<String, ToolError> {
        let WriteArgs { path, content } = parse_args(args)?;
        let max = self.limits.max_write_bytes;
        if content.len() > max {
            return Err(ToolError::InvalidArguments(format!(
                "`content` has {} bytes, more than the limit of {max}",
                content.len()
            )));
        }
        let root = resolve::workspace_root(ctx, Self::NAME)?;
        blocking(move || {
            let file: PathBuf = resolve::for_write(&root, &path)?;
            std::fs::write(&file, content.as_bytes())
                .map_err(|e| ToolError::Failed(format!("cannot write `{path}`: {e}")))?;
            Ok(format!("wrote {} bytes to {path}", content.len()))
        })
        .await
    }
}

#[async_trait]
impl Tool for ListDir {
    fn spec(&self) -> ToolSpec {
        ToolSpec::function(
            Self::NAME,
            "Lists a workspace directory: one entry per line, directories end with `/`.",
            json!({
                "type": "object",
                "properties": {"path": path_property("The directory (\".\" for the workspace)")},
                "required": ["path"],
                "additionalProperties": false
            }),
        )
    }

    async fn call(&self, args: Value, ctx: &ToolContext) -> Result<String, ToolError> {
        let PathArgs { path } = parse_args(args)?;
        let root = resolve::workspace_root(ctx, Self::NAME)?;
        let max = self.limits.max_list_entries;
        blocking(move || {
            let dir = resolve::existing(&root, &path)?;
            let io = |e: std::io::Error| ToolError::Failed(format!("cannot list `{path}`: {e}"));
            if !dir.is_dir() {
                return Err(ToolError::Failed(format!(
                    "`{path}` is not a directory; use read_file"
                )));
            }
            let mut entries = Vec::new();
            for entry in std::fs::read_dir(&dir).map_err(io)? {
                let entry = entry.map_err(io)?;
                let name = entry.file_name().to_string_lossy().into_owned();
                let kind = entry.file_type().map_err(io)?;
                entries.push(if kind.is_dir() {
                    format!("{name}/")
                } else if kind.is_symlink() {
                    format!("{name} (symbolic link)")
                } else {
                    let size = entry.metadata().map_err(io)?.len();
                    format!("{name} ({size} bytes)")
                });
            }
            if entries.is_empty() {
                return Ok("(empty directory)".to_string());
            }
            entries.sort();
            let total = entries.len();
            entries.truncate(max);
            let mut text = entries.join("\n");
            if total > max {
                text.push_str(&format!("\n…[{} more entries not shown]", total - max));
            }
            Ok(text)
        })
        .await
    }
}
