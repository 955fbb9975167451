//! How bubblewrap is started, so that starting a sandbox costs the same whatever the size of
//! the process that starts it.
//!
//! The sandbox user and its process limit must be set between fork and exec. Set from Rust
//! (`Command::uid`, a `pre_exec` hook), they make std `fork()` the whole host process, since
//! `posix_spawn` cannot run code in the child: for a multi-gigabyte trainer that copies its
//! page tables, and every page it writes afterwards faults once. So where util-linux's
//! `prlimit` and `setpriv` are installed, they do it, exec'd one after the other
//! (`prlimit --nproc=N:N -- setpriv --reuid=ID --regid=ID --clear-groups -- bwrap …`), this
//! process sets nothing in the child, and std starts the chain with `posix_spawn` (a vfork
//! that shares the address space). Without them the fork path stays.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use tokio::process::Command;

use super::error::SandboxError;
use super::user::RunIdentity;

/// The util-linux programs that set a run's identity and limit after exec.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Helpers {
    /// `prlimit`: sets `RLIMIT_NPROC`, then execs the rest.
    pub(crate) prlimit: Option<PathBuf>,
    /// `setpriv`: switches user and group, clears supplementary groups, then execs the rest.
    pub(crate) setpriv: Option<PathBuf>,
}

impl Helpers {
    /// The helpers found in `PATH` when first asked (looked up once per process).
    pub(crate) fn installed() -> &'static Helpers {
        static FOUND: OnceLock<Helpers> = OnceLock::new();
        FOUND.get_or_init(|| Helpers {
            prlimit: find_program(Path::new("prlimit")),
            setpriv: find_program(Path::new("setpriv")),
        })
    }
}

/// The command that starts `bwrap` as `identity` with its process limit, before bubblewrap's
/// own arguments are added: the helper chain when `helpers` has what `identity` needs, else
/// `bwrap` itself with the switch made in a forked child.
pub(crate) fn bwrap_command(
    bwrap: &Path,
    identity: RunIdentity,
    helpers: &Helpers,
) -> Result<Command, SandboxError> {
    let limit = identity.process_limit.map(clamp_to_hard_limit);
    let prlimit = match (limit, &helpers.prlimit) {
        (None, _) => None,
        (Some(limit), Some(program)) => Some((limit, program)),
        (Some(_), None) => return Ok(forked(bwrap, identity.switch_to, limit)),
    };
    let setpriv = match (identity.switch_to, &helpers.setpriv) {
        (None, _) => None,
        (Some(id), Some(program)) => Some((id, program)),
        (Some(_), None) => return Ok(forked(bwrap, identity.switch_to, limit)),
    };
    if prlimit.is_none() && setpriv.is_none() {
        return Ok(Command::new(bwrap));
    }
    // The helpers exec bwrap, so a missing bwrap would only show as a failed setup: name it
    // now, as a direct start would.
    let bwrap = find_program(bwrap).ok_or_else(|| SandboxError::BwrapNotFound {
        program: bwrap.to_path_buf(),
    })?;
    let mut chain: Vec<OsString> = Vec::new();
    if let Some((limit, program)) = prlimit {
        chain.push(program.into());
        chain.push(format!("--nproc={limit}:{limit}").into());
        chain.push("--".into());
    }
    if let Some((id, program)) = setpriv {
        chain.push(program.into());
        chain.push(format!("--reuid={id}").into());
        chain.push(format!("--regid={id}").into());
        chain.push("--clear-groups".into());
        chain.push("--".into());
    }
    chain.push(bwrap.into());
    let mut cmd = Command::new(&chain[0]);
    cmd.args(&chain[1..]);
    Ok(cmd)
}

/// `bwrap` started by a forked child that switches to `switch_to` and sets `limit` itself.
fn forked(bwrap: &Path, switch_to: Option<u32>, limit: Option<u64>) -> Command {
    let mut cmd = Command::new(bwrap);
    if let Some(id) = switch_to {
        cmd.uid(id).gid(id);
    }
    if let Some(limit) = limit {
        let rlimit = rustix::process::Rlimit {
            current: Some(limit),
            maximum: Some(limit),
        };
        // SAFETY: the closure runs in the forked child before exec and only makes the
        // setrlimit system call, which is async-signal-safe; it allocates nothing.
        unsafe {
            cmd.pre_exec(move || {
                rustix::process::setrlimit(rustix::process::Resource::Nproc, rlimit)
                    .map_err(std::io::Error::from)
            });
        }
    }
    cmd
}

/// `limit`, but never above the inherited hard limit: only root could raise it.
fn clamp_to_hard_limit(limit: u64) -> u64 {
    let hard = rustix::process::getrlimit(rustix::process::Resource::Nproc).maximum;
    hard.map_or(limit, |hard| limit.min(hard))
}

/// `program` as an executable file: itself when it names a path, else the first match in
/// `PATH`.
fn find_program(program: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |path: &Path| {
        path.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.components().count() > 1 || program.is_absolute() {
        return executable(program).then(|| program.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| executable(candidate))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(cmd: &Command) -> Vec<String> {
        let std = cmd.as_std();
        std::iter::once(std.get_program())
            .chain(std.get_args())
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    fn helpers() -> Helpers {
        Helpers {
            prlimit: Some(PathBuf::from("/usr/bin/prlimit")),
            setpriv: Some(PathBuf::from("/usr/bin/setpriv")),
        }
    }

    /// An executable that exists everywhere, standing in for bwrap.
    fn sh() -> PathBuf {
        PathBuf::from("/bin/sh")
    }

    #[test]
    fn a_switched_limited_run_goes_through_both_helpers() {
        let identity = RunIdentity {
            switch_to: Some(2_147_000_005),
            process_limit: Some(16),
        };
        let cmd = bwrap_command(&sh(), identity, &helpers()).expect("a command");
        let limit = clamp_to_hard_limit(16);
        assert_eq!(
            argv(&cmd),
            [
                "/usr/bin/prlimit".to_string(),
                format!("--nproc={limit}:{limit}"),
                "--".into(),
                "/usr/bin/setpriv".into(),
                "--reuid=2147000005".into(),
                "--regid=2147000005".into(),
                "--clear-groups".into(),
                "--".into(),
                "/bin/sh".into(),
            ]
        );
    }

    #[test]
    fn a_limit_alone_needs_only_prlimit_and_nothing_starts_bwrap_directly() {
        let limited = RunIdentity {
            switch_to: None,
            process_limit: Some(40),
        };
        let only_prlimit = Helpers {
            setpriv: None,
            ..helpers()
        };
        let cmd = bwrap_command(&sh(), limited, &only_prlimit).expect("a command");
        assert_eq!(argv(&cmd)[0], "/usr/bin/prlimit");
        assert_eq!(argv(&cmd).last().map(String::as_str), Some("/bin/sh"));
        let free = RunIdentity {
            switch_to: None,
            process_limit: None,
        };
        let cmd = bwrap_command(Path::new("bwrap"), free, &helpers()).expect("a command");
        assert_eq!(argv(&cmd), ["bwrap"]);
    }

    #[test]
    fn without_the_helpers_bwrap_starts_directly() {
        let identity = RunIdentity {
            switch_to: Some(2_147_000_005),
            process_limit: Some(16),
        };
        for missing in [
            Helpers::default(),
            Helpers {
                setpriv: None,
                ..helpers()
            },
        ] {
            let cmd = bwrap_command(&sh(), identity, &missing).expect("a command");
            assert_eq!(argv(&cmd), ["/bin/sh"], "{missing:?}");
        }
    }

    #[test]
    fn a_missing_bwrap_is_named_before_anything_starts() {
        let identity = RunIdentity {
            switch_to: None,
            process_limit: Some(16),
        };
        let err = bwrap_command(Path::new("/nonexistent/bwrap"), identity, &helpers())
            .expect_err("no such program");
        assert!(matches!(err, SandboxError::BwrapNotFound { .. }), "{err:?}");
        assert!(find_program(Path::new("sh")).is_some());
        assert!(find_program(Path::new("no-such-program-here")).is_none());
    }
}
