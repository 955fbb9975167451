//! The one error type shared by all AgentRL crates.

use std::path::PathBuf;

/// Result with the AgentRL [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong, each variant saying what and where.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read or written.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done (e.g. "reading").
        action: &'static str,
        /// Which file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A JSON document (or line) could not be parsed.
    #[error("invalid JSON in {context}: {source}")]
    Json {
        /// Where the JSON came from (file and line, request, ...).
        context: String,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// A configuration value is missing or wrong.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// An environment failed (not a bad action: those are observations).
    #[error("environment `{env}`: {message}")]
    Env {
        /// Env id.
        env: String,
        /// What happened.
        message: String,
    },
    /// A tool failed in a way the caller must handle.
    #[error("tool `{tool}`: {message}")]
    Tool {
        /// Tool name.
        tool: String,
        /// What happened.
        message: String,
    },
    /// A policy (model backend) failed.
    #[error("policy: {0}")]
    Policy(String),
    /// A reward function failed.
    #[error("reward `{name}`: {message}")]
    Reward {
        /// Reward function name.
        name: String,
        /// What happened.
        message: String,
    },
    /// Training failed.
    #[error("trainer: {0}")]
    Trainer(String),
    /// The operation was cancelled.
    #[error("cancelled: {0}")]
    Cancelled(String),
}

impl Error {
    /// An I/O error while doing `action` on `path`.
    pub fn io(action: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            action,
            path: path.into(),
            source,
        }
    }

    /// A JSON error with a description of where the JSON came from.
    pub fn json(context: impl Into<String>, source: serde_json::Error) -> Self {
        Error::Json {
            context: context.into(),
            source,
        }
    }

    /// An environment error.
    pub fn env(env: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Env {
            env: env.into(),
            message: message.into(),
        }
    }
}

/// The text of `error` followed by each of its causes not already in the text, joined by `: `
/// (an HTTP client's top-level message alone, say, rarely tells what went wrong).
pub fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = cause.source();
    }
    text
}

/// The text of a caught panic's payload (`std::panic::catch_unwind`'s error), or a placeholder
/// when it carries none.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic without a message")
}

#[cfg(test)]
mod tests {
    use super::with_causes;

    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<Layer>>);

    impl std::fmt::Display for Layer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for Layer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|l| l as _)
        }
    }

    #[test]
    fn causes_follow_the_message_once_each() {
        let refused = Layer("connection refused", None);
        let connect = Layer(
            "error trying to connect: connection refused",
            Some(Box::new(refused)),
        );
        let top = Layer("error sending request", Some(Box::new(connect)));
        assert_eq!(
            with_causes(&top),
            "error sending request: error trying to connect: connection refused"
        );
        assert_eq!(with_causes(&Layer("plain", None)), "plain");
    }
}
