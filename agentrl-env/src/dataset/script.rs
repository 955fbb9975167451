//! The `python` and `shell` checkers: the row's script runs in the bubblewrap sandbox (no
//! network, a private workspace holding only the script) with the agent's final answer on
//! stdin and the reference in `$REFERENCE`; exit status 0 means solved.

use agentrl_core::{Error, Result};
use agentrl_tools::Sandbox;

use super::checker::{CheckerKind, Verdict};

/// Name of the environment variable holding the reference answer.
pub const REFERENCE_VAR: &str = "REFERENCE";

/// Characters of the script's output kept in the feedback of a failed check.
const FEEDBACK_CHARS: usize = 300;

/// Runs checker `kind` (`python` or `shell`) with `script` on `answer` against `reference`;
/// an [`Error::Env`] naming `env_id` when the sandbox cannot run it at all.
pub async fn run_script_checker(
    env_id: &str,
    kind: CheckerKind,
    script: &str,
    answer: &str,
    reference: &str,
) -> Result<Verdict> {
    let (file, interpreter) = match kind {
        CheckerKind::Python => ("check.py", "python3"),
        CheckerKind::Shell => ("check.sh", "sh"),
        other => {
            return Err(Error::env(
                env_id,
                format!("checker `{}` runs no script", other.name()),
            ));
        }
    };
    let fail = |what: String| Error::env(env_id, format!("{} checker: {what}", kind.name()));
    let workspace = tempfile::Builder::new()
        .prefix("agentrl-check-")
        .tempdir()
        .map_err(|e| fail(format!("cannot create its workspace: {e}")))?;
    std::fs::write(workspace.path().join(file), script)
        .map_err(|e| fail(format!("cannot write the script: {e}")))?;
    let argv = [
        "env".to_string(),
        format!("{REFERENCE_VAR}={reference}"),
        interpreter.to_string(),
        file.to_string(),
    ];
    let output = Sandbox::default()
        .run(workspace.path(), &argv, Some(answer.as_bytes().to_vec()))
        .await
        .map_err(|e| fail(format!("could not run: {e}")))?;
    if output.success() {
        return Ok(Verdict::solved());
    }
    let mut feedback = output.report();
    if let Some((cut, _)) = feedback.char_indices().nth(FEEDBACK_CHARS) {
        feedback.truncate(cut);
    }
    Ok(Verdict::wrong(format!("checker said: {feedback}")))
}
