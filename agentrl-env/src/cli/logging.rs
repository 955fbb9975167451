//! How an AgentRL binary logs: the `--quiet` and `--log-format` flags every binary shares, and
//! the tracing subscriber they set up.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::writer::BoxMakeWriter;

/// Shape of the log lines on stderr.
#[derive(clap::ValueEnum, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines (coloured only on a terminal without `NO_COLOR`).
    #[default]
    Text,
    /// One JSON object per line (timestamp, level, target, fields), for log collectors.
    Json,
}

/// The logging flags of an AgentRL binary; flatten them into its clap parser.
#[derive(clap::Args, Debug, Clone, Copy, Default)]
pub struct LogArgs {
    /// Only warnings and errors on stderr, and no progress output (results still go to stdout).
    #[arg(long, global = true)]
    pub quiet: bool,
    /// Log lines as human-readable `text` or one JSON object per line (`json`).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// Everything [`run_binary_with`](super::run_binary_with) needs to set up logging.
pub struct LogOptions {
    /// The command line's logging flags.
    pub args: LogArgs,
    /// Where log lines go (default: stderr). A binary that draws progress bars passes a writer
    /// that clears them before a line is printed.
    pub writer: BoxMakeWriter,
}

impl Default for LogOptions {
    fn default() -> Self {
        LogOptions::new(LogArgs::default())
    }
}

impl LogOptions {
    /// Logging as `args` say, to stderr.
    pub fn new(args: LogArgs) -> Self {
        LogOptions {
            args,
            writer: BoxMakeWriter::new(std::io::stderr),
        }
    }

    /// The same options writing through `writer`.
    pub fn with_writer(self, writer: BoxMakeWriter) -> Self {
        LogOptions { writer, ..self }
    }

    /// The filter: `RUST_LOG` when set, else `warn` when quiet, else `info`.
    fn filter(&self) -> EnvFilter {
        EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| EnvFilter::new(if self.args.quiet { "warn" } else { "info" }))
    }

    /// Installs the global tracing subscriber (a no-op when one is already installed).
    pub fn init_tracing(self) {
        let filter = self.filter();
        let builder = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(self.writer);
        let installed = match self.args.log_format {
            LogFormat::Text => builder.with_ansi(colour_on_stderr()).try_init(),
            LogFormat::Json => builder.json().with_ansi(false).try_init(),
        };
        // A subscriber already installed (a test harness, an embedding program) keeps its place.
        drop(installed);
    }
}

/// True when stderr is a terminal and `NO_COLOR` is unset.
fn colour_on_stderr() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        log: LogArgs,
    }

    #[test]
    fn flags_parse_and_bad_format_is_refused() {
        let cli = Cli::try_parse_from(["x", "--quiet", "--log-format", "json"]).unwrap();
        assert!(cli.log.quiet);
        assert_eq!(cli.log.log_format, LogFormat::Json);
        let cli = Cli::try_parse_from(["x"]).unwrap();
        assert!(!cli.log.quiet);
        assert_eq!(cli.log.log_format, LogFormat::Text);
        let err = Cli::try_parse_from(["x", "--log-format", "xml"])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("xml"), "{err}");
    }
}
