//! What a sandboxed command did, and its report for the model.

use std::time::Duration;

use super::capture::Captured;

/// How a sandboxed command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Termination {
    /// It exited with this status.
    Exited(i32),
    /// It was killed by this signal (bubblewrap reports signal `N` as exit status `128 + N`,
    /// as shells do, so an explicit `exit 137` also reads as signal 9).
    Signalled(i32),
    /// It ran past the wall-clock limit and the sandbox was killed.
    TimedOut,
}

impl Termination {
    /// Interprets bubblewrap's exit status (`None` when bubblewrap itself died by a signal).
    pub(crate) fn from_status(code: Option<i32>, signal: Option<i32>) -> Self {
        match (code, signal) {
            (Some(c), _) if (129..=128 + 64).contains(&c) => Termination::Signalled(c - 128),
            (Some(c), _) => Termination::Exited(c),
            (None, Some(s)) => Termination::Signalled(s),
            (None, None) => Termination::Signalled(0),
        }
    }
}

/// The result of a command that ran in the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOutput {
    /// How it ended.
    pub termination: Termination,
    /// Its standard output (capped).
    pub stdout: Captured,
    /// Its standard error (capped).
    pub stderr: Captured,
    /// Wall-clock time it took.
    pub elapsed: Duration,
    /// The CPU-time limit it ran under, in seconds (to explain `SIGXCPU`).
    pub cpu_limit_seconds: u64,
}

impl RunOutput {
    /// Whether the command exited with status 0.
    pub fn success(&self) -> bool {
        self.termination == Termination::Exited(0)
    }

    /// One line saying how the command ended.
    pub fn status_line(&self) -> String {
        match self.termination {
            Termination::Exited(code) => format!("exit status: {code}"),
            Termination::Signalled(sig) => {
                let mut line = format!("killed by signal {sig}");
                if let Some(name) = signal_name(sig) {
                    line.push_str(&format!(" ({name})"));
                }
                if sig == SIGXCPU {
                    line.push_str(&format!(
                        ": CPU time limit of {} s exceeded",
                        self.cpu_limit_seconds
                    ));
                }
                line
            }
            Termination::TimedOut => format!(
                "timed out: killed after {:.1} s of wall-clock time",
                self.elapsed.as_secs_f64()
            ),
        }
    }

    /// The report shown to the model: the status line, then stdout and stderr when not empty.
    pub fn report(&self) -> String {
        let mut report = self.status_line();
        for (name, stream) in [("stdout", &self.stdout), ("stderr", &self.stderr)] {
            if stream.total > 0 {
                report.push_str(&format!("\n--- {name} ---\n{}", stream.text()));
            }
        }
        report
    }
}

/// `SIGXCPU` on Linux.
const SIGXCPU: i32 = 24;

/// The name of the common signals a command dies of.
fn signal_name(sig: i32) -> Option<&'static str> {
    Some(match sig {
        1 => "SIGHUP",
        2 => "SIGINT",
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        15 => "SIGTERM",
        24 => "SIGXCPU",
        25 => "SIGXFSZ",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines() {
        assert_eq!(
            Termination::from_status(Some(152), None),
            Termination::Signalled(24)
        );
        assert_eq!(
            Termination::from_status(Some(3), None),
            Termination::Exited(3)
        );
        let out = RunOutput {
            termination: Termination::Signalled(24),
            stdout: Captured::default(),
            stderr: Captured {
                bytes: b"x".to_vec(),
                total: 1,
            },
            elapsed: Duration::from_secs(1),
            cpu_limit_seconds: 2,
        };
        assert_eq!(
            out.report(),
            "killed by signal 24 (SIGXCPU): CPU time limit of 2 s exceeded\n--- stderr ---\nx"
        );
    }
}
