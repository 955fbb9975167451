//! A bubblewrap sandbox for model-written commands: no network, a read-only system, the session
//! workspace read-write at [`WORKSPACE_INSIDE`] (also the working directory), private `/tmp`,
//! `/proc` and `/dev`, all capabilities dropped, CPU-time, memory, file-size and process
//! limits, an unprivileged user of its own when the host is root ([`SandboxUser`]), a
//! wall-clock limit enforced from Rust and capped output. When the sandbox cannot be built the
//! command is never run.

mod capture;
mod command;
mod config;
mod error;
mod launch;
mod outcome;
mod user;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;

pub use capture::Captured;
pub use command::WORKSPACE_INSIDE;
pub use config::{SandboxConfig, SandboxLimits};
pub use error::SandboxError;
pub use outcome::{RunOutput, Termination};
pub use user::{DEFAULT_FIRST_UID, POOL_SIZE, SandboxUser};

/// How long the output readers may take to finish once the sandbox was killed.
const KILL_GRACE: Duration = Duration::from_secs(2);

/// Runs commands inside bubblewrap with the configured mounts and limits.
#[derive(Debug, Clone, Default)]
pub struct Sandbox {
    config: SandboxConfig,
}

impl Sandbox {
    /// A sandbox built from `config`.
    pub fn new(config: SandboxConfig) -> Self {
        Sandbox { config }
    }

    /// The configuration in use.
    pub fn config(&self) -> &SandboxConfig {
        &self.config
    }

    /// Runs `argv` (program and arguments, looked up in the sandbox's `PATH`) with `workspace`
    /// mounted at [`WORKSPACE_INSIDE`], feeding it `stdin` (or nothing). A non-zero exit, a
    /// signal or a time-out is a [`RunOutput`]; an error means the command did not run.
    pub async fn run(
        &self,
        workspace: &Path,
        argv: &[String],
        stdin: Option<Vec<u8>>,
    ) -> Result<RunOutput, SandboxError> {
        let workspace = canonical_workspace(workspace)?;
        let limits = self.config.limits;
        let identity = user::identity_for_run(self.config.user, limits.max_processes, &workspace)?;
        let mut cmd =
            launch::bwrap_command(&self.config.bwrap, identity, launch::Helpers::installed())?;
        cmd.args(command::bwrap_args(&self.config, &workspace, argv))
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let started = Instant::now();
        let mut child = cmd.spawn().map_err(|source| {
            let program = self.config.bwrap.clone();
            if source.kind() == std::io::ErrorKind::NotFound {
                SandboxError::BwrapNotFound { program }
            } else {
                SandboxError::Spawn { program, source }
            }
        })?;
        let group = child.id();
        let (Some(out), Some(err)) = (child.stdout.take(), child.stderr.take()) else {
            return Err(SandboxError::Io {
                action: "opening the output pipes",
                source: std::io::Error::other("a pipe is missing"),
            });
        };
        let input = child.stdin.take();
        let feed = async move {
            if let (Some(mut pipe), Some(bytes)) = (input, stdin) {
                // A command that exits without reading its input closes the pipe: not an error.
                let _ = pipe.write_all(&bytes).await;
            }
        };
        let cap = limits.max_output_bytes;
        let work = async {
            let ((), stdout, stderr, status) = tokio::join!(
                feed,
                capture::read_capped(out, cap),
                capture::read_capped(err, cap + command::READY_MARKER.len()),
                child.wait()
            );
            (stdout, stderr, status)
        };
        tokio::pin!(work);
        let (stdout, mut stderr, status, timed_out) =
            match tokio::time::timeout(limits.wall_time, &mut work).await {
                Ok((stdout, stderr, status)) => (stdout, stderr, Some(status), false),
                Err(_) => {
                    kill_group(group);
                    match tokio::time::timeout(KILL_GRACE, &mut work).await {
                        Ok((stdout, stderr, _)) => (stdout, stderr, None, true),
                        Err(_) => (Captured::default(), Captured::default(), None, true),
                    }
                }
            };
        let elapsed = started.elapsed();
        let ready = capture::strip_prefix(&mut stderr, command::READY_MARKER);
        let termination = match status {
            None => Termination::TimedOut,
            Some(Err(source)) => {
                return Err(SandboxError::Io {
                    action: "waiting for bwrap",
                    source,
                });
            }
            Some(Ok(status)) => {
                use std::os::unix::process::ExitStatusExt;
                Termination::from_status(status.code(), status.signal())
            }
        };
        if !ready && !timed_out {
            return Err(SandboxError::Setup {
                code: status_code(termination),
                message: stderr.text().trim().to_string(),
            });
        }
        Ok(RunOutput {
            termination,
            stdout,
            stderr,
            elapsed,
            cpu_limit_seconds: limits.cpu_seconds.max(1),
        })
    }
}

/// The workspace as a canonical directory path.
fn canonical_workspace(workspace: &Path) -> Result<PathBuf, SandboxError> {
    let fail = |reason: String| SandboxError::Workspace {
        path: workspace.to_path_buf(),
        reason,
    };
    let path = workspace
        .canonicalize()
        .map_err(|e| fail(format!("cannot be resolved: {e}")))?;
    if !path.is_dir() {
        return Err(fail("is not a directory".to_string()));
    }
    Ok(path)
}

/// Kills the process group led by bwrap; the pid namespace and `--die-with-parent` take the
/// sandboxed processes down with it.
fn kill_group(group: Option<u32>) {
    let pid = group
        .and_then(|id| i32::try_from(id).ok())
        .and_then(rustix::process::Pid::from_raw);
    if let Some(pid) = pid {
        // The group may already be gone; nothing else to do then.
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

/// A number for the setup error: the exit status, or 128 + signal.
fn status_code(termination: Termination) -> i32 {
    match termination {
        Termination::Exited(code) => code,
        Termination::Signalled(sig) => 128 + sig,
        Termination::TimedOut => -1,
    }
}
