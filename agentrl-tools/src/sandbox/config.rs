//! What a [`Sandbox`](super::Sandbox) mounts and which limits it applies.

use std::path::PathBuf;
use std::time::Duration;

use super::user::SandboxUser;

/// Resource limits applied to every command run in the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SandboxLimits {
    /// CPU time (seconds) after which the command gets `SIGXCPU` (and `SIGKILL` a second later).
    pub cpu_seconds: u64,
    /// Largest virtual address space of each process, in bytes.
    pub memory_bytes: u64,
    /// Largest file a process may write, in bytes.
    pub file_size_bytes: u64,
    /// Wall-clock time after which the whole sandbox is killed from Rust.
    pub wall_time: Duration,
    /// Bytes kept of stdout and of stderr each; the rest is read and dropped.
    pub max_output_bytes: usize,
    /// Processes (threads included) the command may have at once, bubblewrap's own two
    /// counted; a fork beyond it fails inside the sandbox (see [`super::SandboxUser`]).
    pub max_processes: u64,
}

impl Default for SandboxLimits {
    /// 3 s CPU, 1 GiB address space, 64 MiB files, 4 s wall clock (under the ToolBox's default
    /// 5 s), 16 KiB of each output stream, 64 processes.
    fn default() -> Self {
        SandboxLimits {
            cpu_seconds: 3,
            memory_bytes: 1 << 30,
            file_size_bytes: 64 << 20,
            wall_time: Duration::from_secs(4),
            max_output_bytes: 16 << 10,
            max_processes: 64,
        }
    }
}

/// How the sandbox is built: the `bwrap` program, the host paths shown read-only and the limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxConfig {
    /// The bubblewrap program (a bare name is looked up in `PATH`).
    pub bwrap: PathBuf,
    /// Host paths mounted read-only at the same place; symbolic links are recreated as links and
    /// missing paths are skipped.
    pub system_paths: Vec<PathBuf>,
    /// Resource limits.
    pub limits: SandboxLimits,
    /// Which user commands run as (by default, an unprivileged id of their own when the host
    /// runs as root).
    pub user: SandboxUser,
}

/// The read-only system view: programs, libraries and the few `/etc` files they need.
const DEFAULT_SYSTEM_PATHS: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc/alternatives",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
];

impl Default for SandboxConfig {
    /// `bwrap` from `PATH`, the standard system directories, [`SandboxLimits::default`] and
    /// [`SandboxUser::default`].
    fn default() -> Self {
        SandboxConfig {
            bwrap: PathBuf::from("bwrap"),
            system_paths: DEFAULT_SYSTEM_PATHS.iter().map(PathBuf::from).collect(),
            limits: SandboxLimits::default(),
            user: SandboxUser::default(),
        }
    }
}
