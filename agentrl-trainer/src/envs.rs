//! The env factory of a run, from its `[env]` config: a registered env in process, an env on an
//! env server or controller (registered, or known only to the server, e.g. written in Python),
//! or a weighted mixture of such envs ([`EnvMix`]) for multi-task runs.
//!
//! ```toml
//! [env]                                   # one env, in process
//! id = "arith-calc"
//!
//! [[env.mix]]                             # or several, each with a share of the tasks
//! id = "arith-calc"
//! weight = 3.0
//! [[env.mix]]
//! id = "guess-number"                     # a Python env behind a controller
//! server = "http://127.0.0.1:5020"
//! token = "secret"
//! timeout_secs = 30                       # a reset or step that takes longer: env error
//! max_turns = 8
//!
//! [env]                                   # an env with options (`agentrl env list` shows them)
//! id = "dataset"
//! [env.options]
//! path = "examples/data/gsm8k-tiny.jsonl"
//! answer_pattern = "#### (.*)$"
//! ```
//!
//! `max_turns` caps the episodes of any env: a registered env's own limit can be lowered (to
//! 1 for a single-turn run) but not raised; an env only its server knows gets 16 unless set.

use std::sync::Arc;
use std::time::Duration;

use agentrl_core::{Error, Result, Split, Task};
use agentrl_env::dataset::EnvOptions;
use agentrl_env::protocol::{ClientConfig, ProtocolClient, RemoteEnvFactory};
use agentrl_env::{EnvFactory, EnvMix, TurnCapped, lookup, lookup_with_options};

use serde::{Deserialize, Serialize};

/// Which env(s) to train on: one env (`id`, in process or on `server`) or a weighted
/// mixture (`mix`); see this module.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvConfig {
    /// Registry id (see `agentrl env list`), or the env's name on `server`; empty with `mix`.
    #[serde(default)]
    pub id: String,
    /// Env server or controller to run the sessions on (`http://HOST:PORT`); default: in
    /// process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// Bearer token of `server`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// Longest wait, in seconds, for one request to `server` (a reset or a step; default 120):
    /// an env that takes longer ends its episode as an env error, which is not trained on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<f64>,
    /// Most steps per episode: lowers a registered env's own limit (e.g. 1 for single-turn),
    /// or sets the limit of an env only `server` knows (default 16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<usize>,
    /// The env's options (`[env.options]`), e.g. the `dataset` env's file and column mapping;
    /// `agentrl env list` shows each env's.
    #[serde(default, skip_serializing_if = "EnvOptions::is_empty")]
    pub options: EnvOptions,
    /// Several envs, each drawn with its weight (a multi-task run); replaces `id`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mix: Vec<EnvSource>,
}

/// One env of a mixture: the fields of [`EnvConfig`] for one env, and its weight.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvSource {
    /// Registry id, or the env's name on `server`.
    pub id: String,
    /// Env server or controller to run the sessions on; default: in process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// Bearer token of `server`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// Longest wait for one request to `server` (see [`EnvConfig::timeout_secs`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<f64>,
    /// Most steps per episode (see [`EnvConfig::max_turns`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<usize>,
    /// The env's options (see [`EnvConfig::options`]).
    #[serde(default, skip_serializing_if = "EnvOptions::is_empty")]
    pub options: EnvOptions,
    /// Relative share of the tasks (default 1).
    #[serde(default = "default_weight")]
    pub weight: f64,
}

fn default_weight() -> f64 {
    1.0
}

/// Turn limit of an env only the server knows, unless its config sets one.
pub const DEFAULT_SERVED_MAX_TURNS: usize = 16;

/// The envs `config` names, with their weights (one env: weight 1).
pub fn sources(config: &EnvConfig) -> Result<Vec<EnvSource>> {
    match (config.id.trim().is_empty(), config.mix.is_empty()) {
        (false, true) => Ok(vec![EnvSource {
            id: config.id.clone(),
            server: config.server.clone(),
            token: config.token.clone(),
            timeout_secs: config.timeout_secs,
            max_turns: config.max_turns,
            options: config.options.clone(),
            weight: 1.0,
        }]),
        (true, false)
            if config.server.is_none()
                && config.token.is_none()
                && config.timeout_secs.is_none()
                && config.options.is_empty() =>
        {
            Ok(config.mix.clone())
        }
        (true, false) => Err(Error::Config(
            "env.server, env.token, env.timeout_secs and env.options apply to env.id; with \
             env.mix, set them per entry"
                .into(),
        )),
        (false, false) => Err(Error::Config(
            "set either env.id (one env) or [[env.mix]] entries (several), not both".into(),
        )),
        (true, true) => Err(Error::Config(
            "env.id is empty and there is no [[env.mix]]: name the env to train on".into(),
        )),
    }
}

/// The protocol client of a source's server (`None`: the env runs in process).
fn client_of(source: &EnvSource) -> Result<Option<ProtocolClient>> {
    let Some(server) = &source.server else {
        for (set, field) in [
            (source.token.is_some(), "token"),
            (source.timeout_secs.is_some(), "timeout_secs"),
        ] {
            if set {
                return Err(Error::Config(format!(
                    "env `{}`: {field} only applies with a server",
                    source.id
                )));
            }
        }
        return Ok(None);
    };
    let mut config = ClientConfig::default();
    if let Some(secs) = source.timeout_secs {
        config.request_timeout = Duration::try_from_secs_f64(secs)
            .ok()
            .filter(|d| !d.is_zero())
            .ok_or_else(|| {
                Error::Config(format!(
                    "env `{}`: timeout_secs must be a positive number of seconds, not {secs}",
                    source.id
                ))
            })?;
    }
    let client = ProtocolClient::new(server, &config)?;
    Ok(Some(match &source.token {
        Some(token) => client.with_token(token.clone()),
        None => client,
    }))
}

/// The factory of one env source, capped at its `max_turns` when set.
fn source_factory(source: &EnvSource) -> Result<Arc<dyn EnvFactory>> {
    let cap = |factory: Arc<dyn EnvFactory>| -> Result<Arc<dyn EnvFactory>> {
        match source.max_turns {
            Some(n) => Ok(Arc::new(TurnCapped::new(factory, n)?)),
            None => Ok(factory),
        }
    };
    let Some(client) = client_of(source)? else {
        return cap(lookup_with_options(&source.id, &source.options)?);
    };
    match lookup(&source.id) {
        Ok(_) => {
            let local = lookup_with_options(&source.id, &source.options)?;
            cap(Arc::new(RemoteEnvFactory::new(client, local)))
        }
        Err(_) if !source.options.is_empty() => Err(Error::Config(format!(
            "env `{}`: options apply to envs known in process, not to one only its server knows",
            source.id
        ))),
        Err(_) => Ok(Arc::new(RemoteEnvFactory::served(
            client,
            &source.id,
            source.max_turns.unwrap_or(DEFAULT_SERVED_MAX_TURNS),
        ))),
    }
}

/// One factory per env the config names (each capped at its `max_turns`), unmixed: what an
/// evaluation of every env plays.
pub fn source_factories(config: &EnvConfig) -> Result<Vec<Arc<dyn EnvFactory>>> {
    sources(config)?.iter().map(source_factory).collect()
}

/// The run's env factory (nothing checked yet: see [`check_envs`]).
pub fn env_factory(config: &EnvConfig) -> Result<Arc<dyn EnvFactory>> {
    let sources = sources(config)?;
    if let [one] = sources.as_slice()
        && config.mix.is_empty()
    {
        return source_factory(one);
    }
    let parts = sources
        .iter()
        .map(|s| Ok((source_factory(s)?, s.weight)))
        .collect::<Result<Vec<_>>>()?;
    Ok(Arc::new(EnvMix::new(parts)?))
}

/// The held-out tasks an evaluation plays: test tasks `0..n` of every env of the run, so each
/// env of a mixture is measured on `n` tasks of its own (a mixture's task stream would give
/// each env only its share).
pub fn eval_tasks(config: &EnvConfig, n: usize) -> Result<Vec<Task>> {
    let mut tasks = Vec::new();
    for source in sources(config)? {
        let factory = source_factory(&source)?;
        tasks.extend((0..n as u64).map(|i| factory.task(Split::Test, i)));
    }
    Ok(tasks)
}

/// Checks that every env of `config` can play here before any episode: each env server serves
/// its env (a wrong address or env name), and `factory`, the run's own (from
/// [`env_factory`]), finds what its local envs need on this machine
/// ([`EnvFactory::preflight`]: e.g. a sandbox that starts). Without it, a missing piece would
/// fail every episode instead of stopping the run once.
pub async fn check_envs(config: &EnvConfig, factory: &dyn EnvFactory) -> Result<()> {
    for source in sources(config)? {
        let Some(client) = client_of(&source)? else {
            continue;
        };
        RemoteEnvFactory::served(client, &source.id, 1)
            .check_served()
            .await
            .map_err(|e| Error::Config(format!("env `{}`: {e}", source.id)))?;
    }
    factory.preflight().await
}
