//! The `agentrl-env` binary: `list`, `check`, and `serve` behind `controller` with bearer
//! tokens (the same functions behind `agentrl env`, `agentrl env-server` and `agentrl controller`);
//! logs to a pipe are plain text.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use agentrl_core::Split;
use agentrl_env::protocol::{ClientConfig, ProtocolClient, RemoteEnvFactory};
use agentrl_env::{EnvFactory, lookup, run_solver_episode};

fn agentrl_env(args: &[&str]) -> (bool, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_agentrl-env"))
        .args(args)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.success(), text)
}

#[test]
fn env_list_shows_every_env_with_a_description() {
    let (ok, text) = agentrl_env(&["list"]);
    assert!(ok, "{text}");
    for id in ["arith-calc", "math-reasoning", "maze", "text-adventure"] {
        let line = text.lines().find(|l| l.starts_with(id)).unwrap();
        assert!(line.len() > id.len() + 10, "{line}");
    }
    // Each env's demonstrator knobs are listed under it (arith-calc has three).
    for knob in [
        "tool_prob_two_operands",
        "tool_prob_three_operands",
        "copy_error_prob",
    ] {
        assert!(
            text.contains(&format!("demonstrator knob {knob}: ")),
            "{text}"
        );
    }
}

#[test]
fn env_check_maze_passes() {
    let (ok, text) = agentrl_env(&["check", "maze", "--tasks", "20"]);
    assert!(ok, "{text}");
    assert!(
        text.contains("reference solver: success 1.000 on 20 test tasks"),
        "{text}"
    );
    assert!(text.contains("random policy:"), "{text}");
    let answered = text.matches("error observation, no crash").count();
    assert_eq!(answered, 4, "{text}");
}

#[test]
fn env_check_of_an_unknown_env_fails() {
    let (ok, text) = agentrl_env(&["check", "nope"]);
    assert!(!ok);
    assert!(text.contains("known env ids"), "{text}");
}

/// A long-running `agentrl-env` subcommand, killed when dropped.
struct Running {
    child: Child,
    /// The `http://` address on the line it printed that `ready` names.
    url: String,
}

impl Running {
    /// Starts `agentrl-env ARGS` and waits (at most a minute) for a stdout line containing `ready`.
    fn start(args: &[&str], ready: &str) -> Running {
        let mut child = Command::new(env!("CARGO_BIN_EXE_agentrl-env"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut running = Running {
            child,
            url: String::new(),
        };
        while running.url.is_empty() {
            let line = rx
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|e| {
                    panic!("`agentrl-env {}` never printed {ready:?}: {e}", args[0])
                });
            if line.contains(ready) {
                running.url = line
                    .split_whitespace()
                    .find(|w| w.starts_with("http://"))
                    .unwrap_or_else(|| panic!("no address in {line:?}"))
                    .to_string();
            }
        }
        running
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Logs written to a pipe (or a file) carry no colour escape codes.
#[test]
fn logs_to_a_pipe_are_plain_text() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_agentrl-env"))
        .args(["controller", "--addr", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let line = loop {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(line) if line.contains("listening") => break line,
            Ok(_) => continue,
            Err(e) => panic!("the controller logged no `listening` line: {e}"),
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    assert!(line.contains("INFO"), "{line:?}");
    assert!(
        !line.contains('\u{1b}'),
        "escape codes in a piped log: {line:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn env_server_with_its_own_token_serves_behind_a_controller_with_another() {
    let controller = Running::start(
        &["controller", "--addr", "127.0.0.1:0", "--token", "ctl-tok"],
        "controller listening",
    );
    let worker = Running::start(
        &[
            "serve",
            "--env",
            "arith-calc",
            "--addr",
            "127.0.0.1:0",
            "--token",
            "own-tok",
            "--controller",
            &controller.url,
            "--controller-token",
            "ctl-tok",
        ],
        "env server listening",
    );
    let config = ClientConfig::default();
    // The env server needs its own token, not the controller's.
    let direct = ProtocolClient::new(&worker.url, &config).unwrap();
    for c in [direct.clone(), direct.clone().with_token("ctl-tok")] {
        let err = c.list_workers().await.unwrap_err().to_string();
        assert!(err.contains("401"), "{err}");
    }
    assert_eq!(
        direct
            .with_token("own-tok")
            .list_workers()
            .await
            .unwrap()
            .len(),
        1
    );
    // Through the controller, with the controller's token, the expert plays.
    let client = ProtocolClient::new(&controller.url, &config)
        .unwrap()
        .with_token("ctl-tok");
    let factory = RemoteEnvFactory::new(client, lookup("arith-calc").unwrap());
    let task = factory.task(Split::Test, 3);
    let episode = run_solver_episode(&factory, &mut *factory.solver(0), &task)
        .await
        .unwrap();
    assert!(episode.success, "{episode:?}");
}
