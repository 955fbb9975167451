//! A Python env server for tests: `python3 -m agentrl_env.serve` from the repository's
//! `python/` folder on port 0, killed on drop. Shared by agentrl-env's Python SDK tests and
//! agentrl-trainer's training test on a Python env.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use agentrl_env::protocol::{ClientConfig, ProtocolClient};

/// The repository's `python/` directory.
pub fn python_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("python")
}

/// `python3`, checked to exist and to be 3.10 or newer (with a clear failure otherwise).
pub fn python3() -> Command {
    let out = Command::new("python3")
        .args([
            "-c",
            "import sys; print('%d.%d' % sys.version_info[:2]); sys.exit(sys.version_info < (3, 10))",
        ])
        .output()
        .unwrap_or_else(|e| {
            panic!("python3 is needed by the Python SDK tests but cannot be run ({e}); install Python 3.11")
        });
    assert!(
        out.status.success(),
        "the Python SDK needs Python 3.10+, python3 is {}",
        String::from_utf8_lossy(&out.stdout).trim()
    );
    let mut cmd = Command::new("python3");
    cmd.env("PYTHONPATH", python_dir())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .current_dir(python_dir());
    cmd
}

/// A `python3 -m agentrl_env.serve` child serving the example env; killed on drop.
pub struct PyServer {
    child: Child,
    /// The port it listens on (127.0.0.1).
    pub port: u16,
}

impl PyServer {
    /// Starts the server for the example env with `extra` arguments and waits for the port.
    pub fn start(extra: &[&str]) -> PyServer {
        Self::start_env("guess_number:GuessNumber", extra)
    }

    /// Starts the server for `env` (`MODULE:CLASS` in `python/examples`) and waits for the
    /// port it prints.
    pub fn start_env(env: &str, extra: &[&str]) -> PyServer {
        let examples = python_dir().join("examples");
        let mut child = python3()
            .args(["-m", "agentrl_env.serve", "--path"])
            .arg(&examples)
            .args(["--env", env, "--port", "0", "--print-port"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawning python3 -m agentrl_env.serve");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(Duration::from_secs(60)).unwrap_or_default();
        let Ok(port) = line.trim().parse() else {
            let status = child.try_wait();
            let _ = child.kill();
            panic!("the Python server printed {line:?} instead of its port (exit: {status:?})");
        };
        PyServer { child, port }
    }

    /// Its base URL.
    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// A protocol client of it.
    pub fn client(&self) -> ProtocolClient {
        ProtocolClient::new(&self.base(), &ClientConfig::default()).unwrap()
    }
}

impl Drop for PyServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
