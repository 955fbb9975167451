//! Who a sandboxed command runs as, and its process limit.
//!
//! Linux counts `RLIMIT_NPROC` per real user id, system-wide, and never enforces it for root.
//! So when the host process is root, each command runs as an unprivileged user id of its own
//! (drawn from a pool of [`POOL_SIZE`] ids starting at [`SandboxUser::Pool`]'s `first_uid`), the
//! workspace is handed to that id, and the limit is exactly the command's process budget: a
//! fork bomb fails to fork inside and the host keeps its process table. A non-root host runs
//! commands as itself; the limit is then the user's current task count plus the budget
//! (counted from `/proc` just before the run; other programs of the same user starting at that
//! moment can shift it slightly).

use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};

use super::error::SandboxError;

/// How many user ids the unprivileged pool holds.
pub const POOL_SIZE: u32 = 65_536;

/// The first id of the default pool: high enough to stay clear of login users and the usual
/// sub-uid ranges of rootless containers, low enough to be a positive `i32`.
pub const DEFAULT_FIRST_UID: u32 = 2_147_000_000;

/// Which user a sandboxed command runs as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxUser {
    /// When the host runs as root: an unprivileged id from `first_uid .. first_uid +`
    /// [`POOL_SIZE`] (group id the same), a different one for each concurrent command. When
    /// it does not: the host's own user.
    Pool {
        /// The first id of the pool.
        first_uid: u32,
    },
    /// Always the host's own user (as root, the process limit then cannot be enforced).
    Caller,
}

impl Default for SandboxUser {
    fn default() -> Self {
        SandboxUser::Pool {
            first_uid: DEFAULT_FIRST_UID,
        }
    }
}

/// The identity and process limit of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RunIdentity {
    /// User and group id to switch to before starting bubblewrap (None: stay as we are).
    pub(crate) switch_to: Option<u32>,
    /// `RLIMIT_NPROC` to set in the child (None: leave the inherited one).
    pub(crate) process_limit: Option<u64>,
}

/// Rotates through the pool; with the process id mixed in, concurrent trainers on one host
/// rarely draw the same id (and if they do, the two commands only share one budget).
static NEXT_SLOT: AtomicU32 = AtomicU32::new(0);

/// Chooses the identity of a run with a budget of `max_processes` and prepares `workspace`
/// for it (handing it to the pool id when there is one).
pub(crate) fn identity_for_run(
    user: SandboxUser,
    max_processes: u64,
    workspace: &Path,
) -> Result<RunIdentity, SandboxError> {
    let root = rustix::process::getuid().is_root();
    match (user, root) {
        (SandboxUser::Pool { first_uid }, true) => {
            let slot = std::process::id()
                .wrapping_mul(64)
                .wrapping_add(NEXT_SLOT.fetch_add(1, Ordering::Relaxed))
                % POOL_SIZE;
            let id = first_uid.saturating_add(slot);
            hand_over(workspace, id)?;
            Ok(RunIdentity {
                switch_to: Some(id),
                process_limit: Some(max_processes),
            })
        }
        (SandboxUser::Caller, true) => Ok(RunIdentity {
            switch_to: None,
            process_limit: None,
        }),
        (_, false) => Ok(RunIdentity {
            switch_to: None,
            process_limit: Some(own_task_count().saturating_add(max_processes)),
        }),
    }
}

/// Gives `dir` and everything under it (links themselves, not their targets) to user and group
/// `id`, so the command can write its workspace.
fn hand_over(dir: &Path, id: u32) -> Result<(), SandboxError> {
    let fail = |path: &Path, e: std::io::Error| SandboxError::Workspace {
        path: path.to_path_buf(),
        reason: format!("cannot be handed to the sandbox user {id}: {e}"),
    };
    std::os::unix::fs::lchown(dir, Some(id), Some(id)).map_err(|e| fail(dir, e))?;
    let entries = std::fs::read_dir(dir).map_err(|e| fail(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| fail(dir, e))?;
        let path = entry.path();
        let kind = entry.file_type().map_err(|e| fail(&path, e))?;
        if kind.is_dir() {
            hand_over(&path, id)?;
        } else {
            std::os::unix::fs::lchown(&path, Some(id), Some(id)).map_err(|e| fail(&path, e))?;
        }
    }
    Ok(())
}

/// How many tasks (threads included, as `RLIMIT_NPROC` counts them) our real user id has now.
fn own_task_count() -> u64 {
    let uid = rustix::process::getuid().as_raw();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .filter_map(|entry| entry.ok())
        .filter(|entry| entry.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter_map(|entry| std::fs::read_to_string(entry.path().join("status")).ok())
        .filter_map(|status| tasks_of(&status, uid))
        .sum()
}

/// The `Threads:` count of a `/proc/PID/status` text whose real uid is `uid`.
fn tasks_of(status: &str, uid: u32) -> Option<u64> {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .map(str::trim)
    };
    let real_uid: u32 = field("Uid:")?.split_whitespace().next()?.parse().ok()?;
    (real_uid == uid).then_some(())?;
    field("Threads:")?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_file_gives_the_tasks_of_its_owner_only() {
        let status = "Name:\tbash\nUid:\t1000\t1000\t1000\t1000\nThreads:\t3\n";
        assert_eq!(tasks_of(status, 1000), Some(3));
        assert_eq!(tasks_of(status, 0), None);
        assert_eq!(tasks_of("Name:\tx\n", 1000), None);
    }

    #[test]
    fn we_count_at_least_this_thread() {
        assert!(own_task_count() >= 1);
    }

    #[test]
    fn pool_ids_stay_positive_i32s() {
        assert!(u64::from(DEFAULT_FIRST_UID) + u64::from(POOL_SIZE) < i32::MAX as u64);
    }
}
