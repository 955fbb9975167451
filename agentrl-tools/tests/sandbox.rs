//! The bubblewrap sandbox really isolates: output, writes, network, CPU, memory, file size,
//! wall clock, output cap, and clear errors (never an unsandboxed run) when bwrap is unusable.

use std::path::{Path, PathBuf};
use std::time::Duration;

use agentrl_tools::sandbox::{RunOutput, Sandbox, SandboxConfig, SandboxError, Termination};

/// A sandbox with default mounts and `edit` applied to its limits.
fn sandbox(edit: impl FnOnce(&mut SandboxConfig)) -> Sandbox {
    let mut config = SandboxConfig::default();
    config.limits.wall_time = Duration::from_secs(20);
    edit(&mut config);
    Sandbox::new(config)
}

fn sh(command: &str) -> Vec<String> {
    vec!["sh".into(), "-c".into(), command.into()]
}

/// Runs `argv`; a sandbox that cannot be built fails the test with bwrap's reason.
async fn run(sandbox: &Sandbox, workspace: &Path, argv: Vec<String>) -> RunOutput {
    sandbox
        .run(workspace, &argv, None)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "the sandbox tests need a working bubblewrap (package `bubblewrap`) and user \
             namespaces on this machine: {e}"
            )
        })
}

fn stdout(out: &RunOutput) -> String {
    String::from_utf8_lossy(&out.stdout.bytes).into_owned()
}

fn stderr(out: &RunOutput) -> String {
    String::from_utf8_lossy(&out.stderr.bytes).into_owned()
}

#[tokio::test]
async fn captures_output_and_exit_status() {
    let ws = tempfile::tempdir().unwrap();
    let out = run(
        &sandbox(|_| {}),
        ws.path(),
        sh("echo hello; echo oops >&2; pwd; exit 3"),
    )
    .await;
    assert_eq!(out.termination, Termination::Exited(3));
    assert_eq!(stdout(&out), "hello\n/workspace\n");
    assert_eq!(stderr(&out), "oops\n");
    assert!(!out.success());
    assert_eq!(
        out.report(),
        "exit status: 3\n--- stdout ---\nhello\n/workspace\n\n--- stderr ---\noops\n"
    );
    let out = run(&sandbox(|_| {}), ws.path(), sh("true")).await;
    assert!(out.success());
    assert_eq!(out.report(), "exit status: 0");
}

#[tokio::test]
async fn stdin_reaches_the_command() {
    let ws = tempfile::tempdir().unwrap();
    let argv = vec!["python3".to_string(), "-".to_string()];
    let code = b"import sys\nprint(6 * 7, sys.version_info[0])\n".to_vec();
    let out = sandbox(|_| {})
        .run(ws.path(), &argv, Some(code))
        .await
        .unwrap();
    assert_eq!(stdout(&out), "42 3\n", "{}", out.report());
}

#[tokio::test]
async fn writes_land_in_the_workspace_only() {
    let ws = tempfile::tempdir().unwrap();
    let marker = format!("agentrl-sandbox-test-{}", std::process::id());
    let script = format!(
        "echo hi > out.txt && mkdir -p sub && echo x > /workspace/sub/y && echo t > /tmp/{marker} \
         && cat /tmp/{marker}; \
         for p in /usr/evil /evil /etc/evil /bin/evil /proc/evil; do \
           (echo x > $p) 2>/dev/null && echo \"wrote $p\"; done; echo done"
    );
    let out = run(&sandbox(|_| {}), ws.path(), sh(&script)).await;
    assert_eq!(stdout(&out), "t\ndone\n", "{}", out.report());
    assert_eq!(
        std::fs::read_to_string(ws.path().join("out.txt")).unwrap(),
        "hi\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("sub/y")).unwrap(),
        "x\n"
    );
    assert!(
        !PathBuf::from("/tmp").join(&marker).exists(),
        "the sandbox /tmp must be private"
    );
    assert!(!Path::new("/usr/evil").exists() && !Path::new("/evil").exists());
}

#[tokio::test]
async fn there_is_no_network() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let ws = tempfile::tempdir().unwrap();
    let code = format!(
        "import socket\n\
         for addr in [('127.0.0.1', {port}), ('1.1.1.1', 53)]:\n\
         \x20   try:\n\
         \x20       socket.create_connection(addr, timeout=2)\n\
         \x20       print('connected', addr)\n\
         \x20   except OSError as e:\n\
         \x20       print('blocked', type(e).__name__)\n"
    );
    let argv = vec!["python3".to_string(), "-".to_string()];
    let out = sandbox(|_| {})
        .run(ws.path(), &argv, Some(code.into_bytes()))
        .await
        .unwrap();
    let text = stdout(&out);
    assert_eq!(text.matches("blocked").count(), 2, "{}", out.report());
    assert!(!text.contains("connected"), "{}", out.report());
    // The host listener saw nothing.
    let accepted = tokio::time::timeout(Duration::from_millis(200), listener.accept()).await;
    assert!(accepted.is_err(), "the sandbox reached a host port");

    let out = run(&sandbox(|_| {}), ws.path(), sh("getent hosts example.com")).await;
    assert_ne!(out.termination, Termination::Exited(0), "{}", out.report());
}

#[tokio::test]
async fn cpu_time_limit_kills_a_busy_loop() {
    let ws = tempfile::tempdir().unwrap();
    let sb = sandbox(|c| c.limits.cpu_seconds = 1);
    let out = run(&sb, ws.path(), sh("while :; do :; done")).await;
    assert_eq!(
        out.termination,
        Termination::Signalled(24),
        "{}",
        out.report()
    );
    assert!(out.elapsed < Duration::from_secs(10));
    assert!(
        out.status_line()
            .contains("(SIGXCPU): CPU time limit of 1 s exceeded"),
        "{}",
        out.status_line()
    );
}

#[tokio::test]
async fn memory_limit_stops_a_large_allocation() {
    let ws = tempfile::tempdir().unwrap();
    let sb = sandbox(|c| c.limits.memory_bytes = 512 << 20);
    let code = "try:\n    b = bytearray(2 * 1024**3)\n    print('allocated', len(b))\nexcept MemoryError:\n    print('MemoryError')\n";
    let argv = vec!["python3".to_string(), "-".to_string()];
    let out = sb
        .run(ws.path(), &argv, Some(code.as_bytes().to_vec()))
        .await
        .unwrap();
    assert_eq!(stdout(&out), "MemoryError\n", "{}", out.report());
}

#[tokio::test]
async fn file_size_limit() {
    let ws = tempfile::tempdir().unwrap();
    let sb = sandbox(|c| c.limits.file_size_bytes = 1 << 20);
    let out = run(&sb, ws.path(), sh("exec head -c 3000000 /dev/zero > big")).await;
    assert_eq!(
        out.termination,
        Termination::Signalled(25),
        "{}",
        out.report()
    );
    let size = std::fs::metadata(ws.path().join("big")).unwrap().len();
    assert!(size <= 1 << 20, "{size}");
}

#[tokio::test]
async fn wall_clock_timeout_kills_every_process() {
    let ws = tempfile::tempdir().unwrap();
    let sb = sandbox(|c| c.limits.wall_time = Duration::from_millis(500));
    let out = run(
        &sb,
        ws.path(),
        sh("echo started; (sleep 2; echo late > late.txt) & sleep 30"),
    )
    .await;
    assert_eq!(out.termination, Termination::TimedOut);
    assert!(out.elapsed < Duration::from_secs(5), "{:?}", out.elapsed);
    assert_eq!(stdout(&out), "started\n");
    assert!(
        out.status_line().starts_with("timed out: killed after 0."),
        "{}",
        out.status_line()
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        !ws.path().join("late.txt").exists(),
        "a background process outlived the time-out"
    );
}

#[tokio::test]
async fn output_is_capped() {
    let ws = tempfile::tempdir().unwrap();
    let sb = sandbox(|c| c.limits.max_output_bytes = 1000);
    let out = run(
        &sb,
        ws.path(),
        sh("yes | head -c 100000; yes e | head -c 5000 >&2"),
    )
    .await;
    assert!(out.success(), "{}", out.report());
    assert_eq!((out.stdout.bytes.len(), out.stdout.total), (1000, 100_000));
    assert_eq!((out.stderr.bytes.len(), out.stderr.total), (1000, 5000));
    assert!(
        out.stdout
            .text()
            .ends_with("[output truncated: 99000 more bytes dropped]")
    );
}

#[tokio::test]
async fn missing_bwrap_is_a_clear_error_and_nothing_runs() {
    let ws = tempfile::tempdir().unwrap();
    let sb = sandbox(|c| c.bwrap = PathBuf::from("/nonexistent/bin/bwrap"));
    let err = sb.run(ws.path(), &sh("touch ran"), None).await.unwrap_err();
    assert!(matches!(err, SandboxError::BwrapNotFound { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("bubblewrap (`/nonexistent/bin/bwrap`) was not found")
            && text.contains("the command was not run"),
        "{text}"
    );
    assert!(!ws.path().join("ran").exists());
}

#[tokio::test]
async fn a_sandbox_that_never_started_is_a_setup_error() {
    // Programs that exit without starting the sandbox: the command must not count as run.
    let ws = tempfile::tempdir().unwrap();
    for fake in ["/bin/false", "/bin/echo"] {
        let sb = sandbox(|c| c.bwrap = PathBuf::from(fake));
        let err = sb.run(ws.path(), &sh("touch ran"), None).await.unwrap_err();
        assert!(matches!(err, SandboxError::Setup { .. }), "{fake}: {err:?}");
        assert!(err.to_string().contains("could not be set up"), "{err}");
    }
    assert!(!ws.path().join("ran").exists());
}

#[tokio::test]
async fn missing_workspace_is_an_error() {
    let err = sandbox(|_| {})
        .run(Path::new("/nonexistent/workspace"), &sh("true"), None)
        .await
        .unwrap_err();
    assert!(matches!(err, SandboxError::Workspace { .. }), "{err:?}");
    assert!(err.to_string().contains("/nonexistent/workspace"), "{err}");
}

/// Processes whose real user id is `uid`, from the host's `/proc`.
fn host_processes_of(uid: u32) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read_to_string(e.path().join("status")).ok())
        .filter(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|ids| ids.split_whitespace().next())
                .and_then(|id| id.parse::<u32>().ok())
                == Some(uid)
        })
        .count()
}

/// A bounded fork bomb (a spawn loop of 300 sleepers) dies inside at the process limit; the
/// host's process table never sees more than the budget, and nothing is left afterwards.
#[tokio::test]
async fn a_spawn_loop_stops_at_the_process_limit() {
    let ws = tempfile::tempdir().unwrap();
    let budget = 16;
    let out = run(
        &sandbox(|c| c.limits.max_processes = budget),
        ws.path(),
        sh("i=0; while [ $i -lt 300 ]; do sleep 30 & i=$((i+1)); echo $i; done"),
    )
    .await;
    let started: u64 = stdout(&out)
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or(0);
    assert!(
        started < budget,
        "{started} sleepers started with a budget of {budget}: {}",
        out.report()
    );
    assert!(stderr(&out).contains("fork"), "{}", out.report());
    assert!(!out.success(), "{}", out.report());
    // As root the command ran as an unprivileged id of its own: none of its processes remain.
    let is_root = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:\t0\t"));
    if is_root {
        let owner = {
            use std::os::unix::fs::MetadataExt;
            std::fs::metadata(ws.path()).unwrap().uid()
        };
        assert!(
            owner >= agentrl_tools::sandbox::DEFAULT_FIRST_UID,
            "{owner}"
        );
        // The kernel kills the pid namespace's processes as its init exits; reaping them
        // takes a moment.
        let mut left = host_processes_of(owner);
        for _ in 0..50 {
            if left == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            left = host_processes_of(owner);
        }
        assert_eq!(left, 0, "sandbox processes left behind");
    }
}

/// A command that starts a few processes (a pipeline) works under the default limit, and the
/// workspace stays writable by the command.
#[tokio::test]
async fn ordinary_pipelines_fit_the_default_process_limit() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("data.txt"), "b\na\nc\n").unwrap();
    let out = run(
        &sandbox(|_| {}),
        ws.path(),
        sh("sort data.txt | uniq | tr a-z A-Z > out.txt && cat out.txt && echo ok >> data.txt"),
    )
    .await;
    assert!(out.success(), "{}", out.report());
    assert_eq!(stdout(&out), "A\nB\nC\n");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("data.txt")).unwrap(),
        "b\na\nc\nok\n"
    );
}
