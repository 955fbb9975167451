//! Progress of the long phases of a run (demonstrations, SFT, RL, evaluation).
//!
//! On a terminal (with text logs and without `--quiet`) each phase draws one progress bar with
//! its rate and ETA, and log lines are printed above the bars; otherwise (a file, a pipe,
//! `--log-format json`) a phase logs a plain line at most every [`LINE_EVERY`], and with
//! `--quiet` it prints nothing. The binary chooses once with [`init`]; a program that never
//! calls it gets bars on a terminal and lines elsewhere.
//!
//! ```
//! use agentrl_trainer::progress;
//!
//! let phase = progress::phase("SFT", 100);
//! for _ in 0..100 {
//!     phase.inc(1);
//! }
//! phase.finish();
//! ```

use std::io::{IsTerminal, Write};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use agentrl_env::cli::{LogArgs, LogFormat};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};
use tracing_subscriber::fmt::writer::BoxMakeWriter;

/// How often a phase logs a plain progress line when it draws no bar.
pub const LINE_EVERY: Duration = Duration::from_secs(10);

/// How phases report themselves in this process.
#[derive(Clone)]
enum Output {
    /// Progress bars on stderr, under one [`MultiProgress`].
    Bars(MultiProgress),
    /// Periodic `info` log lines.
    Lines,
    /// Nothing (`--quiet`).
    Silent,
}

static OUTPUT: OnceLock<Output> = OnceLock::new();

/// Chooses how phases report from the command line's logging flags and returns the writer
/// tracing should log through (it clears the bars before a line and redraws them after).
/// Only the first call decides.
pub fn init(args: &LogArgs) -> BoxMakeWriter {
    let chosen = if args.quiet {
        Output::Silent
    } else if args.log_format == LogFormat::Text && std::io::stderr().is_terminal() {
        Output::Bars(MultiProgress::with_draw_target(ProgressDrawTarget::stderr()))
    } else {
        Output::Lines
    };
    match OUTPUT.get_or_init(|| chosen).clone() {
        Output::Bars(bars) => BoxMakeWriter::new(move || AboveBars {
            bars: bars.clone(),
            line: Vec::new(),
        }),
        Output::Lines | Output::Silent => BoxMakeWriter::new(std::io::stderr),
    }
}

/// The output chosen by [`init`], or the default for a program that did not call it.
fn output() -> &'static Output {
    OUTPUT.get_or_init(|| {
        if std::io::stderr().is_terminal() {
            Output::Bars(MultiProgress::with_draw_target(ProgressDrawTarget::stderr()))
        } else {
            Output::Lines
        }
    })
}

/// A log line being written while bars are drawn: buffered, then printed above the bars.
struct AboveBars {
    bars: MultiProgress,
    line: Vec<u8>,
}

impl Write for AboveBars {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.line.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.line.is_empty() {
            return Ok(());
        }
        let line = std::mem::take(&mut self.line);
        self.bars
            .suspend(|| std::io::stderr().lock().write_all(&line))
    }
}

impl Drop for AboveBars {
    fn drop(&mut self) {
        // A log line that cannot reach stderr has nowhere better to go.
        let _ = self.flush();
    }
}

/// One phase's progress: `inc` as work completes, `finish` at the end (also on drop).
pub struct Phase {
    label: String,
    len: u64,
    started: Instant,
    shown: PhaseDisplay,
}

/// What a [`Phase`] draws on.
enum PhaseDisplay {
    Bar(ProgressBar),
    Lines(Mutex<LineState>),
    Silent,
}

/// Position and message of a phase that reports by log lines.
struct LineState {
    pos: u64,
    message: String,
    last_line: Instant,
    finished: bool,
}

/// Starts the progress of a phase of `len` units called `label` (e.g. `"SFT"`, `"eval"`).
pub fn phase(label: &str, len: u64) -> Phase {
    let shown = match output() {
        Output::Bars(bars) => {
            let bar = bars.add(ProgressBar::new(len));
            if let Ok(style) = ProgressStyle::with_template(
                "{prefix:>5} [{bar:30}] {pos}/{len} {rate:>9} ETA {eta:>4} {msg}",
            ) {
                bar.set_style(style.progress_chars("=> ").with_key(
                    "rate",
                    |state: &ProgressState, out: &mut dyn std::fmt::Write| {
                        // Nothing to report if the terminal cannot take the text.
                        let _ = write!(out, "{:.2}/s", state.per_sec());
                    },
                ));
            }
            bar.set_prefix(label.to_string());
            PhaseDisplay::Bar(bar)
        }
        Output::Lines => PhaseDisplay::Lines(Mutex::new(LineState {
            pos: 0,
            message: String::new(),
            last_line: Instant::now(),
            finished: false,
        })),
        Output::Silent => PhaseDisplay::Silent,
    };
    Phase {
        label: label.to_string(),
        len,
        started: Instant::now(),
        shown,
    }
}

impl Phase {
    /// Marks `n` more units done.
    pub fn inc(&self, n: u64) {
        match &self.shown {
            PhaseDisplay::Bar(bar) => bar.inc(n),
            PhaseDisplay::Lines(state) => {
                let mut state = lock(state);
                state.pos += n;
                if state.last_line.elapsed() >= LINE_EVERY {
                    state.last_line = Instant::now();
                    self.log_line(&state);
                }
            }
            PhaseDisplay::Silent => {}
        }
    }

    /// Sets the short status shown after the counts (e.g. `loss 0.41`).
    pub fn set_message(&self, message: String) {
        match &self.shown {
            PhaseDisplay::Bar(bar) => bar.set_message(message),
            PhaseDisplay::Lines(state) => lock(state).message = message,
            PhaseDisplay::Silent => {}
        }
    }

    /// Ends the phase: the bar stays with its final counts, or a last line is logged.
    pub fn finish(&self) {
        match &self.shown {
            PhaseDisplay::Bar(bar) => {
                if !bar.is_finished() {
                    bar.finish();
                }
            }
            PhaseDisplay::Lines(state) => {
                let mut state = lock(state);
                if !state.finished {
                    state.finished = true;
                    self.log_line(&state);
                }
            }
            PhaseDisplay::Silent => {}
        }
    }

    /// Logs `LABEL pos/len (rate/s, ETA ..) message`.
    fn log_line(&self, state: &LineState) {
        let secs = self.started.elapsed().as_secs_f64();
        let rate = if secs > 0.0 {
            state.pos as f64 / secs
        } else {
            0.0
        };
        let left = self.len.saturating_sub(state.pos);
        let eta = if rate > 0.0 && left > 0 {
            format!(", ETA {}", human_seconds(left as f64 / rate))
        } else {
            String::new()
        };
        tracing::info!(
            "{} {}/{} ({rate:.2}/s{eta}, {} elapsed) {}",
            self.label,
            state.pos,
            self.len,
            human_seconds(secs),
            state.message
        );
    }
}

impl Drop for Phase {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Locks a phase's line state; a panic elsewhere while it was held does not stop progress.
fn lock(state: &Mutex<LineState>) -> std::sync::MutexGuard<'_, LineState> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `75s`, `12m05s`, `3h02m`.
fn human_seconds(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    match s {
        0..=99 => format!("{s}s"),
        100..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_people_write_them() {
        assert_eq!(human_seconds(0.2), "0s");
        assert_eq!(human_seconds(75.0), "75s");
        assert_eq!(human_seconds(725.0), "12m05s");
        assert_eq!(human_seconds(10_920.0), "3h02m");
        assert_eq!(human_seconds(-3.0), "0s");
    }

    #[test]
    fn a_line_phase_counts_and_finishes_once() {
        let phase = Phase {
            label: "eval".into(),
            len: 4,
            started: Instant::now(),
            shown: PhaseDisplay::Lines(Mutex::new(LineState {
                pos: 0,
                message: String::new(),
                last_line: Instant::now(),
                finished: false,
            })),
        };
        phase.inc(3);
        phase.set_message("success 0.5".into());
        phase.finish();
        phase.finish();
        let PhaseDisplay::Lines(state) = &phase.shown else {
            panic!("not a line phase")
        };
        let state = lock(state);
        assert_eq!((state.pos, state.finished), (3, true));
        assert_eq!(state.message, "success 0.5");
    }
}
