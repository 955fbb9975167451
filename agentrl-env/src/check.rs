//! A Gymnasium-style env checker (`check_env`): plays the reference solver and a random policy
//! on test tasks, then sends malformed actions, and reports what happened in a [`CheckReport`].
//!
//! ```
//! use agentrl_env::{check, lookup};
//!
//! let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
//! let report = runtime.block_on(check(lookup("maze")?, 5))?;
//! assert!(report.passed(), "{report}");
//! print!("{report}"); // the lines `agentrl env check maze --tasks 5` prints
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;
use std::sync::Arc;

use agentrl_core::{Error, Message, Result, SeededRng, Split, Step, ToolCall, ToolSpec};
use serde_json::{Value, json};

use crate::{EnvFactory, run_solver_episode};

/// Success rate the reference solver must reach for a check to pass.
pub const MIN_SOLVER_SUCCESS: f64 = 0.95;

/// Seed of the random policy.
const RANDOM_SEED: u64 = 7;

/// What the env answered to one malformed action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MalformedResult {
    /// What is wrong with the action, e.g. `unknown tool name`.
    pub label: &'static str,
    /// `Ok` with the env's invalid-action reason when it answered with an error observation and
    /// went on; `Err` with what went wrong otherwise (an env error, a crash, no flag).
    pub outcome: std::result::Result<String, String>,
}

/// The results of [`check`] on one env.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckReport {
    /// Id of the checked env.
    pub env_id: String,
    /// Number of test tasks each policy played.
    pub tasks: u64,
    /// Share of the test tasks the reference solver solved.
    pub solver_success: f64,
    /// Env errors met by the reference solver, as `task ID: ERROR` (each counted as a failure).
    pub solver_errors: Vec<String>,
    /// Share of the test tasks a uniformly random policy solved (informative; never fails).
    pub random_success: f64,
    /// What the env answered to each malformed action, in the order they were sent.
    pub malformed: Vec<MalformedResult>,
}

impl CheckReport {
    /// Whether the env passed: solver success at least [`MIN_SOLVER_SUCCESS`] and every
    /// malformed action answered with an error observation.
    pub fn passed(&self) -> bool {
        self.failures().is_empty()
    }

    /// One line per failed part: the solver's success first, then each malformed action.
    pub fn failures(&self) -> Vec<String> {
        let mut failures = Vec::new();
        if self.solver_success < MIN_SOLVER_SUCCESS {
            failures.push(format!(
                "reference solver success {:.3} is below {MIN_SOLVER_SUCCESS}",
                self.solver_success
            ));
        }
        for result in &self.malformed {
            if let Err(why) = &result.outcome {
                failures.push(format!("{}: {why}", result.label));
            }
        }
        failures
    }

    /// `Ok` when the env passed, else an env error listing every failure.
    pub fn ensure_passed(&self) -> Result<()> {
        let failures = self.failures();
        if failures.is_empty() {
            Ok(())
        } else {
            Err(Error::env(
                &self.env_id,
                format!("check failed: {}", failures.join("; ")),
            ))
        }
    }
}

/// The lines `agentrl env check` prints: solver errors, both success rates, one line per
/// malformed action and, when the env passed, `ID: ok`.
impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for error in &self.solver_errors {
            writeln!(f, "reference solver: {error}")?;
        }
        let (solver, random, tasks) = (self.solver_success, self.random_success, self.tasks);
        writeln!(
            f,
            "reference solver: success {solver:.3} on {tasks} test tasks"
        )?;
        writeln!(
            f,
            "random policy:    success {random:.3} on {tasks} test tasks"
        )?;
        for MalformedResult { label, outcome } in &self.malformed {
            match outcome {
                Ok(reason) => writeln!(
                    f,
                    "malformed action ({label}): error observation, no crash ({reason})"
                )?,
                Err(why) => writeln!(f, "malformed action ({label}): FAILED: {why}")?,
            }
        }
        if self.passed() {
            writeln!(f, "{}: ok", self.env_id)?;
        }
        Ok(())
    }
}

/// Checks `factory` on its first `tasks` test tasks (at least one): the reference solver's and
/// a random policy's success rates, and four malformed actions (arguments that are not JSON, an
/// unknown tool, wrong argument types, an empty message), each sent to a fresh session.
///
/// Errors only when the env cannot be played at all (a reset or a random step fails); a solver
/// below [`MIN_SOLVER_SUCCESS`] or a badly answered malformed action is a failure in the report.
pub async fn check(factory: Arc<dyn EnvFactory>, tasks: u64) -> Result<CheckReport> {
    let tasks = tasks.max(1);
    let (solver_success, solver_errors) = solver_success(&*factory, tasks).await;
    let random_success = random_success(&*factory, tasks).await?;
    let mut malformed = Vec::new();
    for (label, action) in malformed_actions(first_tool(&*factory).await?) {
        let outcome = malformed_step(&factory, action).await;
        malformed.push(MalformedResult { label, outcome });
    }
    Ok(CheckReport {
        env_id: factory.id().to_string(),
        tasks,
        solver_success,
        solver_errors,
        random_success,
        malformed,
    })
}

/// Share of the first `tasks` test tasks the reference solver solves, and the env errors it
/// met (each counted as a failure).
async fn solver_success(factory: &dyn EnvFactory, tasks: u64) -> (f64, Vec<String>) {
    let mut solver = factory.solver(0);
    let mut solved = 0u64;
    let mut errors = Vec::new();
    for index in 0..tasks {
        let task = factory.task(Split::Test, index);
        match run_solver_episode(factory, &mut *solver, &task).await {
            Ok(episode) => solved += u64::from(episode.success),
            Err(e) => errors.push(format!("task {}: {e}", task.id)),
        }
    }
    (solved as f64 / tasks as f64, errors)
}

/// Share of the first `tasks` test tasks a uniformly random policy solves.
async fn random_success(factory: &dyn EnvFactory, tasks: u64) -> Result<f64> {
    let mut rng = SeededRng::new(RANDOM_SEED);
    let mut solved = 0u64;
    for index in 0..tasks {
        let task = factory.task(Split::Test, index);
        let mut env = factory.make();
        let observation = env.reset(&task).await?;
        let mut history = observation.messages;
        for _ in 0..factory.max_turns() {
            let action = random_action(&mut rng, &observation.tools, &history);
            let step = env.step(&action).await?;
            history.push(action);
            history.extend(step.messages.iter().cloned());
            if step.done() {
                solved += u64::from(step.info.success == Some(true));
                break;
            }
        }
    }
    Ok(solved as f64 / tasks as f64)
}

/// A random action: mostly a call of a random tool with arguments drawn from its schema,
/// otherwise text of random words from the conversation or a random number.
fn random_action(rng: &mut SeededRng, tools: &[ToolSpec], history: &[Message]) -> Message {
    if let Some(tool) = rng.choose(tools).filter(|_| rng.chance(0.7)) {
        let args = random_arguments(rng, &tool.function.parameters, history);
        let call = ToolCall::new(format!("call_{}", history.len()), tool.name(), &args);
        return Message::assistant_tool_calls(None, vec![call]);
    }
    if rng.chance(0.5) {
        Message::assistant(rng.range(0, 200).to_string())
    } else {
        Message::assistant(random_words(rng, history))
    }
}

/// One or two words picked from the conversation's text.
fn random_words(rng: &mut SeededRng, history: &[Message]) -> String {
    let words: Vec<&str> = history
        .iter()
        .flat_map(|m| m.text().split(|c: char| !c.is_ascii_alphabetic()))
        .filter(|w| !w.is_empty())
        .collect();
    let count = rng.range(1, 2);
    (0..count)
        .filter_map(|_| rng.choose(&words).copied())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Arguments for a tool with JSON Schema `schema`: enum values, words or numbers by type.
fn random_arguments(rng: &mut SeededRng, schema: &Value, history: &[Message]) -> Value {
    let mut args = serde_json::Map::new();
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, spec) in properties {
            let value = match spec.get("enum").and_then(Value::as_array) {
                Some(options) => rng.choose(options).cloned().unwrap_or(Value::Null),
                None => match spec.get("type").and_then(Value::as_str) {
                    Some("integer" | "number") => json!(rng.range(0, 200)),
                    Some("boolean") => json!(rng.chance(0.5)),
                    _ => json!(random_words(rng, history)),
                },
            };
            args.insert(name.clone(), value);
        }
    }
    Value::Object(args)
}

/// Labelled malformed actions aimed at the tool `spec` (a made-up one for tool-less envs).
fn malformed_actions(spec: Option<ToolSpec>) -> Vec<(&'static str, Message)> {
    let name = spec.as_ref().map_or("tool", |s| s.name()).to_string();
    let wrong_types = spec
        .as_ref()
        .and_then(|s| {
            s.function
                .parameters
                .get("properties")?
                .as_object()
                .cloned()
        })
        .map(|props| {
            let wrong = props.iter().map(|(k, v)| {
                let is_string = v.get("type").and_then(Value::as_str) == Some("string");
                let value = if is_string {
                    json!(12345)
                } else {
                    json!("wrong")
                };
                (k.clone(), value)
            });
            Value::Object(wrong.collect())
        })
        .unwrap_or_else(|| json!({ "x": 1 }));
    let raw = |tool: &str, arguments: String| {
        let mut call = ToolCall::new("call_check", tool, &json!({}));
        call.function.arguments = arguments;
        Message::assistant_tool_calls(None, vec![call])
    };
    vec![
        ("arguments are not JSON", raw(&name, "{not json".into())),
        ("unknown tool name", raw("no_such_tool", "{}".into())),
        ("wrong argument types", raw(&name, wrong_types.to_string())),
        ("empty message", Message::assistant("")),
    ]
}

/// The first tool the env offers on its first test task, if any.
async fn first_tool(factory: &dyn EnvFactory) -> Result<Option<ToolSpec>> {
    let mut env = factory.make();
    let observation = env.reset(&factory.task(Split::Test, 0)).await?;
    Ok(observation.tools.into_iter().next())
}

/// Sends `action` to a fresh session on a separate task (so a panic is caught); `Ok` with the
/// invalid-action reason when the env answered with an error observation and went on.
async fn malformed_step(
    factory: &Arc<dyn EnvFactory>,
    action: Message,
) -> std::result::Result<String, String> {
    let factory = Arc::clone(factory);
    let handle = tokio::spawn(async move {
        let mut env = factory.make();
        env.reset(&factory.task(Split::Test, 0)).await?;
        env.step(&action).await
    });
    let step: Step = match handle.await {
        Ok(Ok(step)) => step,
        Ok(Err(e)) => return Err(format!("the env returned an error: {e}")),
        Err(e) => return Err(format!("the env crashed: {e}")),
    };
    match step.info.invalid_action {
        Some(reason) if !step.done() && !step.messages.is_empty() => Ok(reason),
        Some(_) => Err("flagged as invalid, but the episode ended or no message came back".into()),
        None => Err("not flagged as an invalid action".into()),
    }
}
