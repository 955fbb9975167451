//! The `bwrap` command line: namespaces, read-only system, workspace, limits wrapper.

use std::ffi::OsString;
use std::path::Path;

use super::config::SandboxConfig;

/// Where the session workspace appears inside the sandbox (and the working directory).
pub const WORKSPACE_INSIDE: &str = "/workspace";

/// `PATH` inside the sandbox.
const SANDBOX_PATH: &str = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin";

/// Written to stderr by the wrapper once the sandbox is up and the limits are applied, right
/// before the command starts; its absence means the command never ran.
pub(crate) const READY_MARKER: &[u8] = b"<<agentrl sandbox ready>>\n";

/// Applies the limits (`$1` soft and `$2` hard CPU seconds; soft first, so it never exceeds
/// the hard one, `$3` KiB of address space, `$4`
/// 512-byte blocks of file size), prints the ready marker and execs the command.
const LIMITS_WRAPPER: &str = "ulimit -S -t \"$1\" && ulimit -H -t \"$2\" && ulimit -v \"$3\" \
     && ulimit -f \"$4\" || { echo 'could not apply the resource limits' >&2; exit 125; }
shift 4
printf '%s\\n' '<<agentrl sandbox ready>>' >&2
exec \"$@\"";

/// The arguments to `bwrap` that run `argv` in the sandbox with `workspace` (a canonical host
/// directory) mounted read-write at [`WORKSPACE_INSIDE`].
pub(crate) fn bwrap_args(
    config: &SandboxConfig,
    workspace: &Path,
    argv: &[String],
) -> Vec<OsString> {
    let mut args: Vec<OsString> = Vec::new();
    let mut push = |items: &[&str]| args.extend(items.iter().map(OsString::from));
    push(&["--unshare-all", "--die-with-parent", "--new-session"]);
    push(&["--cap-drop", "ALL", "--hostname", "sandbox", "--clearenv"]);
    push(&["--setenv", "PATH", SANDBOX_PATH]);
    push(&["--setenv", "HOME", WORKSPACE_INSIDE]);
    push(&["--setenv", "TMPDIR", "/tmp"]);
    push(&["--setenv", "LANG", "C.UTF-8"]);
    for path in &config.system_paths {
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            continue;
        };
        if meta.file_type().is_symlink() {
            if let Ok(target) = std::fs::read_link(path) {
                args.extend([
                    OsString::from("--symlink"),
                    target.into_os_string(),
                    path.clone().into_os_string(),
                ]);
            }
        } else {
            args.extend([
                OsString::from("--ro-bind"),
                path.clone().into_os_string(),
                path.clone().into_os_string(),
            ]);
        }
    }
    let mut push = |items: &[&str]| args.extend(items.iter().map(OsString::from));
    push(&["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]);
    args.extend([
        OsString::from("--bind"),
        workspace.as_os_str().to_owned(),
        OsString::from(WORKSPACE_INSIDE),
    ]);
    let limits = &config.limits;
    let cpu = limits.cpu_seconds.max(1);
    let wrapper = [
        "--chdir".to_string(),
        WORKSPACE_INSIDE.to_string(),
        "--remount-ro".to_string(),
        "/".to_string(),
        "--".to_string(),
        "/bin/sh".to_string(),
        "-c".to_string(),
        LIMITS_WRAPPER.to_string(),
        "sh".to_string(),
        cpu.to_string(),
        (cpu + 1).to_string(),
        (limits.memory_bytes / 1024).max(1).to_string(),
        (limits.file_size_bytes / 512).max(1).to_string(),
    ];
    args.extend(wrapper.into_iter().map(OsString::from));
    args.extend(argv.iter().map(OsString::from));
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_matches_the_wrapper() {
        let printed = "<<agentrl sandbox ready>>\n";
        assert_eq!(READY_MARKER, printed.as_bytes());
        assert!(LIMITS_WRAPPER.contains(printed.trim_end()));
    }
}
