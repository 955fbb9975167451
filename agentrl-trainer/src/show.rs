//! `agentrl show`: one saved episode rendered readably in the terminal — who said what, the
//! tool calls with their arguments, the tool results, the reward breakdown, and which policy
//! (and version) wrote each turn — so a user can see why an agent fails.
//!
//! ```no_run
//! use agentrl_trainer::show::{ShowArgs, show};
//!
//! let args = ShowArgs {
//!     file: "runs/demo/samples/eval_after_rl.jsonl".into(),
//!     index: 0,
//!     failed: true,
//!     env: None,
//! };
//! show(&args, &mut std::io::stdout())?;
//! # Ok::<(), agentrl_core::Error>(())
//! ```

use std::io::{BufRead, Write};
use std::path::PathBuf;

use agentrl_core::{Error, Message, Result, Role, Trajectory, Turn};
use clap::Args;

/// `agentrl show`: render one episode of a trajectories file.
#[derive(Args, Debug, Clone)]
pub struct ShowArgs {
    /// Trajectories file (JSONL: samples/*.jsonl, demos.jsonl, eval episodes).
    pub file: PathBuf,
    /// Which matching episode to show, counting from 0.
    #[arg(long, default_value_t = 0)]
    pub index: usize,
    /// Only failed episodes count.
    #[arg(long)]
    pub failed: bool,
    /// Only episodes of this env count.
    #[arg(long)]
    pub env: Option<String>,
}

/// Finds the episode `args` selects (reading the file line by line, so a large file is not
/// loaded whole) and renders it to `out`. Lines that are not trajectories are skipped with a
/// warning; no match is an error saying how many episodes matched.
pub fn show(args: &ShowArgs, out: &mut dyn Write) -> Result<()> {
    let path = &args.file;
    let file = std::fs::File::open(path).map_err(|e| Error::io("opening", path, e))?;
    let mut matched = 0usize;
    let mut bad_lines = 0usize;
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| Error::io("reading", path, e))?;
        if line.trim().is_empty() {
            continue;
        }
        let episode: Trajectory = match serde_json::from_str(&line) {
            Ok(t) => t,
            Err(e) => {
                bad_lines += 1;
                tracing::warn!("{}:{}: not a trajectory: {e}", path.display(), i + 1);
                continue;
            }
        };
        let wanted = !(args.failed && episode.success)
            && args.env.as_deref().is_none_or(|env| episode.env_id == env);
        if !wanted {
            continue;
        }
        if matched == args.index {
            let heading = format!("{}:{} (match {})", path.display(), i + 1, args.index);
            return render(&episode, &heading, out)
                .map_err(|e| Error::io("writing the episode of", path, e));
        }
        matched += 1;
    }
    let filter = match (args.failed, &args.env) {
        (false, None) => String::new(),
        (failed, env) => {
            let mut parts = Vec::new();
            if failed {
                parts.push("failed".to_string());
            }
            if let Some(env) = env {
                parts.push(format!("env `{env}`"));
            }
            format!(" ({})", parts.join(", "))
        }
    };
    Err(Error::Config(format!(
        "{} holds {matched} matching episodes{filter} (and {bad_lines} unreadable lines); \
         --index {} is past the end",
        path.display(),
        args.index
    )))
}

/// Writes `episode` as text: a header, then each message, assistant messages with the turn
/// that produced them.
pub fn render(episode: &Trajectory, heading: &str, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out, "== {heading}")?;
    writeln!(
        out,
        "env {}  task {}  split {:?}  group {}",
        episode.env_id, episode.task_id, episode.split, episode.group_id
    )?;
    let verdict = if episode.success { "SUCCESS" } else { "FAILED" };
    writeln!(
        out,
        "{verdict}  outcome {:?}  reward {:.4}  turns {}  tool calls {} ({} errors)  invalid actions {}",
        episode.outcome,
        episode.reward,
        episode.turns.len(),
        episode.tool_calls,
        episode.tool_errors,
        episode.invalid_actions()
    )?;
    if let Some(score) = episode.score {
        writeln!(out, "score {score:.4}")?;
    }
    for (name, value) in &episode.reward_parts {
        writeln!(out, "  reward/{name} = {value:.4}")?;
    }
    let mut turns = episode.turns.iter();
    for message in &episode.messages {
        writeln!(out)?;
        let turn = (message.role == Role::Assistant)
            .then(|| turns.next())
            .flatten();
        render_message(message, turn, out)?;
    }
    Ok(())
}

/// One message: a role line (with the producing turn for the assistant), its text indented,
/// and its tool calls with pretty-printed arguments.
fn render_message(
    message: &Message,
    turn: Option<&Turn>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let mut role = match message.role {
        Role::System => "[system]".to_string(),
        Role::User => "[user]".to_string(),
        Role::Assistant => "[assistant]".to_string(),
        Role::Tool => "[tool]".to_string(),
    };
    if let Some(name) = &message.name {
        role.push_str(&format!(" name={name}"));
    }
    if let Some(id) = &message.tool_call_id {
        role.push_str(&format!(" answers {id}"));
    }
    if let Some(turn) = turn {
        role.push_str(&format!(
            "  policy {} v{}  {} tokens  finish {:?}  mean logprob {:.3}",
            turn.policy_name.as_deref().unwrap_or("-"),
            turn.policy_version,
            turn.generated_ids.len(),
            turn.finish,
            mean(&turn.logprobs)
        ));
        if turn.stale {
            role.push_str("  stale: not trained");
        }
    }
    writeln!(out, "{role}")?;
    if let Some(reason) = turn.and_then(|t| t.invalid_action.as_deref()) {
        writeln!(out, "  !! invalid action: {reason}")?;
    }
    let text = message.content.as_deref().unwrap_or("");
    for line in text.lines() {
        writeln!(out, "  {line}")?;
    }
    for call in &message.tool_calls {
        writeln!(out, "  -> call {} ({})", call.function.name, call.id)?;
        let args = match serde_json::from_str::<serde_json::Value>(&call.function.arguments) {
            Ok(value) => serde_json::to_string_pretty(&value).unwrap_or_default(),
            Err(e) => format!("{} (not JSON: {e})", call.function.arguments),
        };
        for line in args.lines() {
            writeln!(out, "     {line}")?;
        }
    }
    Ok(())
}

/// The mean of `values` (0 when empty).
fn mean(values: &[f32]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.iter().map(|&v| f64::from(v)).sum::<f64>() / values.len() as f64
}
