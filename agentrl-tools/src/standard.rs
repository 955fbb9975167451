//! The standard tool set: calculator, workspace files and sandboxed shell and Python.

use std::sync::Arc;

use agentrl_core::Result;

use crate::exec::{Python, Shell};
use crate::files::{FileLimits, ListDir, ReadFile, WriteFile};
use crate::sandbox::{Sandbox, SandboxConfig};
use crate::{Calculator, ToolBox, ToolLimits};

/// A toolbox with `calculator`, `read_file`, `write_file`, `list_dir`, `shell` and `python`.
pub fn standard_toolbox(
    limits: ToolLimits,
    files: FileLimits,
    sandbox: SandboxConfig,
) -> Result<ToolBox> {
    let sandbox = Arc::new(Sandbox::new(sandbox));
    ToolBox::new(limits)
        .with(Calculator)?
        .with(ReadFile { limits: files })?
        .with(WriteFile { limits: files })?
        .with(ListDir { limits: files })?
        .with(Shell::new(Arc::clone(&sandbox)))?
        .with(Python::new(sandbox))
}
