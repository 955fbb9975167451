//! Evaluating agents that are not a checkpoint of ours, on the same tasks and with the same
//! report: any OpenAI-compatible chat endpoint (vLLM, SGLang, `agentrl serve`, a hosted API)
//! driving the envs through chat completions with native `tools`/`tool_calls`, or each env's
//! reference solver. `agentrl eval --endpoint URL --model NAME --suite all` puts a served model
//! beside the reference solvers and a trained checkpoint on every env, AgentBench-style.
//!
//! ```no_run
//! use agentrl_trainer::agent_eval::{Agent, SuiteOptions, evaluate_agent};
//! use agentrl_policy::http::{HttpPolicy, HttpPolicyConfig};
//!
//! # async fn go() -> agentrl_core::Result<()> {
//! let policy = HttpPolicy::new(HttpPolicyConfig::new("http://127.0.0.1:8000", "my-model"))?;
//! let agent = Agent::endpoint(policy, agentrl_core::SamplingParams::greedy(512));
//! let envs = vec![agentrl_env::lookup("arith-calc")?];
//! let (report, _episodes) = evaluate_agent(&agent, &envs, &SuiteOptions::default()).await?;
//! println!("{}", report.markdown_table());
//! # Ok(()) }
//! ```

use std::sync::Arc;

use agentrl_core::{
    Error, FinishReason, Message, Outcome, Result, SamplingParams, Split, Task, Trajectory, Turn,
};
use agentrl_env::{EnvFactory, run_solver_episode};
use agentrl_policy::http::HttpPolicy;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::eval::EvalReport;

/// Who plays the episodes.
#[derive(Clone)]
pub enum Agent {
    /// A chat-completions endpoint, asked with these sampling parameters.
    Endpoint {
        /// The endpoint's client (retries, time limits, concurrency).
        policy: Arc<HttpPolicy>,
        /// Temperature, token limit and the rest of each request.
        params: SamplingParams,
    },
    /// Each env's reference solver.
    Reference,
}

impl Agent {
    /// The endpoint behind `policy`, asked with `params`.
    pub fn endpoint(policy: HttpPolicy, params: SamplingParams) -> Self {
        Agent::Endpoint {
            policy: Arc::new(policy),
            params,
        }
    }

    /// The name recorded as the policy of every turn.
    fn name(&self) -> String {
        match self {
            Agent::Endpoint { policy, .. } => policy.config().model.clone(),
            Agent::Reference => "reference".to_string(),
        }
    }
}

/// How many tasks, samples and episodes at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuiteOptions {
    /// Test tasks per env (indices `0..tasks_per_env`).
    pub tasks_per_env: usize,
    /// Episodes per task (pass@k when more than one).
    pub samples: usize,
    /// Episodes in flight at once over the whole suite.
    pub concurrency: usize,
}

impl Default for SuiteOptions {
    /// 20 tasks per env, one sample each, 8 episodes at once.
    fn default() -> Self {
        SuiteOptions {
            tasks_per_env: 20,
            samples: 1,
            concurrency: 8,
        }
    }
}

/// Plays `options.tasks_per_env` test tasks of every env in `envs` with `agent` and reports
/// them like a checkpoint's evaluation. An episode whose endpoint fails (after the client's
/// retries) or whose env fails counts as unsolved with outcome `env_error` and a warning; one
/// whose conversation outgrows the endpoint's context ends `truncated`; neither stops the
/// suite.
pub async fn evaluate_agent(
    agent: &Agent,
    envs: &[Arc<dyn EnvFactory>],
    options: &SuiteOptions,
) -> Result<(EvalReport, Vec<Trajectory>)> {
    if envs.is_empty() {
        return Err(Error::Config("no env to evaluate on".into()));
    }
    if let Agent::Reference = agent
        && let Some(env) = envs.iter().find(|e| !e.has_solver())
    {
        return Err(Error::Config(format!(
            "env `{}` has no reference solver here, so `--reference` cannot play it",
            env.id()
        )));
    }
    let gate = Arc::new(Semaphore::new(options.concurrency.max(1)));
    let mut set = JoinSet::new();
    let mut slot = 0usize;
    for env in envs {
        for index in 0..options.tasks_per_env as u64 {
            let task = env.task(Split::Test, index);
            for sample in 0..options.samples.max(1) as u64 {
                let (env, agent, gate, task) = (
                    Arc::clone(env),
                    agent.clone(),
                    Arc::clone(&gate),
                    task.clone(),
                );
                let order = slot;
                slot += 1;
                set.spawn(async move {
                    let _permit = gate.acquire_owned().await;
                    let seed = index.wrapping_mul(1_000_003).wrapping_add(sample);
                    (order, play(&agent, env.as_ref(), &task, index, seed).await)
                });
            }
        }
    }
    let mut episodes: Vec<Option<Trajectory>> = vec![None; slot];
    while let Some(joined) = set.join_next().await {
        let (order, episode) =
            joined.map_err(|e| Error::Trainer(format!("evaluation task failed: {e}")))?;
        episodes[order] = Some(episode);
    }
    let episodes: Vec<Trajectory> = episodes.into_iter().flatten().collect();
    Ok((EvalReport::of(&episodes), episodes))
}

/// One episode of `task` (group `group`) by `agent`; failures become unsolved episodes.
async fn play(
    agent: &Agent,
    env: &dyn EnvFactory,
    task: &Task,
    group: u64,
    seed: u64,
) -> Trajectory {
    let name = agent.name();
    let played = match agent {
        Agent::Endpoint { policy, params } => {
            let mut params = params.clone();
            if params.temperature > 0.0 {
                params.seed = Some(seed);
            }
            Ok(play_with_endpoint(policy, &params, env, task, group).await)
        }
        Agent::Reference => play_with_reference(env, task, group, seed).await,
    };
    match played {
        Ok(mut episode) => {
            for turn in &mut episode.turns {
                turn.policy_name = Some(name.clone());
            }
            episode
        }
        Err(e) => {
            tracing::warn!(env = env.id(), task = %task.id, "episode failed: {e}");
            failed_episode(task, group, Vec::new(), format!("{e}"))
        }
    }
}

/// An unsolved episode with outcome `env_error` whose last turn records `why`.
fn failed_episode(task: &Task, group: u64, messages: Vec<Message>, why: String) -> Trajectory {
    let mut episode = Trajectory::for_task(task, group).with_messages(messages);
    episode.outcome = Outcome::EnvError;
    episode
        .turns
        .push(text_turn(FinishReason::Stop, 0, Some(why)));
    episode
}

/// A turn of a text-level agent: no token ids (the endpoint renders and parses).
fn text_turn(finish: FinishReason, version: u64, invalid: Option<String>) -> Turn {
    Turn {
        injected_ids: Vec::new(),
        generated_ids: Vec::new(),
        logprobs: Vec::new(),
        policy_version: version,
        policy_name: None,
        finish,
        reward: 0.0,
        stale: false,
        invalid_action: invalid,
    }
}

/// Plays `task` with chat completions: the env's messages and tools go to the endpoint, its
/// assistant message (text or tool calls) goes to the env, until the env ends the episode or
/// its turn limit is reached.
async fn play_with_endpoint(
    policy: &HttpPolicy,
    params: &SamplingParams,
    factory: &dyn EnvFactory,
    task: &Task,
    group: u64,
) -> Trajectory {
    let mut env = factory.make();
    let observation = match env.reset(task).await {
        Ok(observation) => observation,
        Err(e) => return failed_episode(task, group, Vec::new(), format!("env reset: {e}")),
    };
    let mut episode = Trajectory::for_task(task, group).with_messages(observation.messages);
    episode.outcome = Outcome::Truncated;
    for _ in 0..factory.max_turns() {
        let reply = match policy
            .chat(&episode.messages, &observation.tools, params)
            .await
        {
            Ok(reply) => reply,
            Err(e) if is_context_overflow(&e) => {
                // The conversation outgrew the server's context: the agent ran out of room,
                // as an in-process rollout does at `max_seq_len`, and the env did nothing wrong.
                if episode.turns.is_empty() {
                    tracing::warn!(
                        env = factory.id(),
                        task = %task.id,
                        "the first prompt is over the endpoint's context: {e}"
                    );
                }
                episode.outcome = Outcome::Truncated;
                break;
            }
            Err(e) => {
                let messages = std::mem::take(&mut episode.messages);
                let mut failed = failed_episode(task, group, messages, format!("endpoint: {e}"));
                failed
                    .turns
                    .splice(0..0, std::mem::take(&mut episode.turns));
                tracing::warn!(env = factory.id(), task = %task.id, "endpoint failed: {e}");
                return failed;
            }
        };
        let finish = match reply.finish_reason.as_str() {
            "length" => FinishReason::Length,
            _ => FinishReason::Stop,
        };
        let version = reply.policy_version.unwrap_or(0);
        episode.messages.push(reply.message.clone());
        let step = match env.step(&reply.message).await {
            Ok(step) => step,
            Err(e) => {
                episode
                    .turns
                    .push(text_turn(finish, version, Some(format!("env error: {e}"))));
                episode.outcome = Outcome::EnvError;
                return episode;
            }
        };
        let mut turn = text_turn(finish, version, step.info.invalid_action.clone());
        turn.reward = step.reward;
        episode.turns.push(turn);
        episode.tool_calls += step.info.tool_calls;
        episode.tool_errors += step.info.tool_errors;
        episode.messages.extend(step.messages.iter().cloned());
        if step.done() {
            episode.outcome = if step.terminated {
                Outcome::Completed
            } else {
                Outcome::Truncated
            };
            episode.success = step.info.success.unwrap_or(false);
            episode.score = step.info.score;
            break;
        }
    }
    episode.reward = if episode.success { 1.0 } else { 0.0 };
    episode
}

/// Whether `error` is an endpoint's refusal of a prompt longer than its context: an HTTP 400
/// whose message speaks of the context, as vLLM ("maximum context length"), SGLang ("longer
/// than the model's context length"), OpenAI (`context_length_exceeded`) and `agentrl serve`
/// ("the model's context is N tokens") word it.
fn is_context_overflow(error: &Error) -> bool {
    let Error::Policy(message) = error else {
        return false;
    };
    let message = message.to_ascii_lowercase();
    message
        .split_once("http 400")
        .is_some_and(|(_, answer)| answer.contains("context"))
}

/// Plays `task` with the env's reference solver.
async fn play_with_reference(
    factory: &dyn EnvFactory,
    task: &Task,
    group: u64,
    seed: u64,
) -> Result<Trajectory> {
    let mut solver = factory.solver(seed);
    let played = run_solver_episode(factory, solver.as_mut(), task).await?;
    let tool_calls = played
        .messages
        .iter()
        .map(|m| m.tool_calls.len())
        .sum::<usize>();
    let mut episode = Trajectory::for_task(task, group)
        .with_messages(played.messages)
        .with_success(played.success)
        .with_reward(if played.success { 1.0 } else { 0.0 });
    episode.outcome = if played.truncated {
        Outcome::Truncated
    } else {
        Outcome::Completed
    };
    episode.tool_calls = u32::try_from(tool_calls).unwrap_or(u32::MAX);
    episode.turns = (0..played.steps)
        .map(|_| text_turn(FinishReason::Stop, 0, None))
        .collect();
    Ok(episode)
}
