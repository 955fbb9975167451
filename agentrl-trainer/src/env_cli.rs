//! `agentrl env`: list the registered envs, and check one: reference solver and random-policy
//! success rates on test tasks, and malformed actions answered with error observations.

use std::sync::Arc;

use agentrl_core::{Env, Error, Message, Result, SeededRng, Split, Step, ToolCall, ToolSpec};
use agentrl_env::{EnvFactory, env_ids, lookup, run_solver_episode};
use clap::Subcommand;
use serde_json::{Value, json};

/// Success rate the reference solver must reach for `env check` to pass.
const MIN_SOLVER_SUCCESS: f64 = 0.95;

/// Seed of the random policy.
const RANDOM_SEED: u64 = 7;

/// The `agentrl env` subcommands.
#[derive(Subcommand, Debug)]
pub enum EnvCommand {
    /// List the env ids, each with a one-line description.
    List,
    /// Run the reference solver and a random policy on test tasks, then malformed actions;
    /// fails if the solver is below 0.95 or a malformed action is not answered with an error.
    Check {
        /// Env id.
        id: String,
        /// Number of test tasks for each policy.
        #[arg(long, default_value_t = 100)]
        tasks: u64,
    },
}

/// Runs an `agentrl env` subcommand, printing to stdout.
pub async fn run(command: EnvCommand) -> Result<()> {
    match command {
        EnvCommand::List => {
            for id in env_ids() {
                println!("{id:<16} {}", lookup(id)?.description());
            }
            Ok(())
        }
        EnvCommand::Check { id, tasks } => check(&id, tasks).await,
    }
}

/// The whole `env check`: prints every result, then fails if any part failed.
async fn check(id: &str, tasks: u64) -> Result<()> {
    let factory = lookup(id)?;
    let tasks = tasks.max(1);
    let solver_rate = solver_success(&*factory, tasks).await;
    println!("reference solver: success {solver_rate:.3} on {tasks} test tasks");
    let random_rate = random_success(&*factory, tasks).await?;
    println!("random policy:    success {random_rate:.3} on {tasks} test tasks");
    let mut failures = Vec::new();
    if solver_rate < MIN_SOLVER_SUCCESS {
        failures.push(format!(
            "reference solver success {solver_rate:.3} is below {MIN_SOLVER_SUCCESS}"
        ));
    }
    for (label, action) in malformed_actions(first_tool(&*factory).await?) {
        match malformed_step(&factory, action).await {
            Ok(reason) => {
                println!("malformed action ({label}): error observation, no crash ({reason})")
            }
            Err(why) => {
                println!("malformed action ({label}): FAILED: {why}");
                failures.push(format!("{label}: {why}"));
            }
        }
    }
    if failures.is_empty() {
        println!("{id}: ok");
        Ok(())
    } else {
        Err(Error::env(
            id,
            format!("check failed: {}", failures.join("; ")),
        ))
    }
}

/// Share of the first `tasks` test tasks the reference solver solves (an env error counts as
/// a failure and is printed).
async fn solver_success(factory: &dyn EnvFactory, tasks: u64) -> f64 {
    let mut solver = factory.solver(0);
    let mut solved = 0u64;
    for index in 0..tasks {
        let task = factory.task(Split::Test, index);
        match run_solver_episode(factory, &mut *solver, &task).await {
            Ok(episode) => solved += u64::from(episode.success),
            Err(e) => println!("reference solver: task {}: {e}", task.id),
        }
    }
    solved as f64 / tasks as f64
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
