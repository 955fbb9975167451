//! `serve` (`agentrl-env serve`, `agentrl env-server`): serves registered envs over the env HTTP
//! protocol until Ctrl-C.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use agentrl_core::{Error, Result};
use clap::Args;

use crate::protocol::{ChaosConfig, ServerConfig, WorkerRegistration, register_worker, serve};
use crate::{EnvFactory, lookup};

/// The `--help` section of the fault-injection flags.
const CHAOS_HEADING: &str =
    "Chaos testing (faults on purpose, see agentrl_env::protocol::chaos; off by default)";

/// Arguments of `agentrl-env serve` and `agentrl env-server`.
#[derive(Args, Debug, Clone)]
pub struct EnvServerArgs {
    /// Env ids to serve (repeat the flag or separate ids with commas).
    #[arg(long = "env", required = true, num_args = 1.., value_delimiter = ',')]
    pub envs: Vec<String>,
    /// Address to listen on; port 0 picks a free port (the bound address is printed).
    #[arg(long, default_value = "127.0.0.1:8000")]
    pub addr: SocketAddr,
    /// Seconds of idleness after which a session expires.
    #[arg(long, default_value_t = 600)]
    pub session_ttl_secs: u64,
    /// Most sessions held at once.
    #[arg(long, default_value_t = 4096)]
    pub max_sessions: usize,
    /// Task indices listed by /api/get_indices per split.
    #[arg(long, default_value_t = 200)]
    pub task_count: u64,
    /// Bearer token this server requires on every request (`Authorization: Bearer TOKEN`);
    /// with --controller it is sent in the registration, so the controller can reach the server.
    #[arg(long)]
    pub token: Option<String>,
    /// Controller to register with (heartbeats every 2 s while serving).
    #[arg(long)]
    pub controller: Option<String>,
    /// Bearer token of the controller (sent with the registration and every heartbeat).
    #[arg(long, requires = "controller")]
    pub controller_token: Option<String>,
    /// Base URL the controller should use to reach this server (default: `http://` + the bound
    /// address; set it when listening on 0.0.0.0 or behind NAT).
    #[arg(long, requires = "controller")]
    pub advertise: Option<String>,
    /// Chaos testing only: every N-th interact is answered --chaos-delay-ms late (0: never).
    #[arg(long, default_value_t = 0, help_heading = CHAOS_HEADING)]
    pub chaos_delay_every: u64,
    /// Chaos testing only: how late a delayed answer comes, in milliseconds.
    #[arg(long, default_value_t = 500, help_heading = CHAOS_HEADING)]
    pub chaos_delay_ms: u64,
    /// Chaos testing only: every N-th interact is carried out and its answer cut off (0: never).
    #[arg(long, default_value_t = 0, help_heading = CHAOS_HEADING)]
    pub chaos_drop_every: u64,
    /// Chaos testing only: every N-th env step hangs --chaos-hang-ms before it runs, as a step
    /// whose tool has no time limit would (0: never).
    #[arg(long, default_value_t = 0, help_heading = CHAOS_HEADING)]
    pub chaos_hang_every: u64,
    /// Chaos testing only: how long a hung step waits, in milliseconds.
    #[arg(long, default_value_t = 30_000, help_heading = CHAOS_HEADING)]
    pub chaos_hang_ms: u64,
}

impl EnvServerArgs {
    /// The faults the `--chaos-*` flags ask for (none by default).
    pub fn chaos(&self) -> ChaosConfig {
        ChaosConfig {
            delay_every: self.chaos_delay_every,
            delay: Duration::from_millis(self.chaos_delay_ms),
            drop_every: self.chaos_drop_every,
            hang_every: self.chaos_hang_every,
            hang: Duration::from_millis(self.chaos_hang_ms),
        }
    }
}

/// Serves `args.envs` until Ctrl-C, then lets requests in flight finish.
pub async fn run_env_server(args: EnvServerArgs) -> Result<()> {
    if args.session_ttl_secs == 0 {
        return Err(Error::Config(
            "--session-ttl-secs must be at least 1".into(),
        ));
    }
    let envs = args
        .envs
        .iter()
        .map(|id| lookup(id.trim()))
        .collect::<Result<Vec<Arc<dyn EnvFactory>>>>()?;
    for env in &envs {
        env.preflight().await?;
    }
    let config = ServerConfig {
        worker_id: format!("env-server@{}", args.addr),
        session_ttl: Duration::from_secs(args.session_ttl_secs),
        max_sessions: args.max_sessions,
        task_count: args.task_count,
        token: args.token.clone(),
        chaos: args.chaos(),
    };
    let chaos = (!config.chaos.is_off()).then(|| config.chaos.describe());
    let max_sessions = config.max_sessions;
    let (bound, handle) = serve(args.addr, envs, config).await?;
    let _registration = match &args.controller {
        Some(controller) => {
            let server = handle.server().clone();
            let registration = register_worker(
                WorkerRegistration {
                    controller: controller.clone(),
                    address: args
                        .advertise
                        .clone()
                        .unwrap_or_else(|| format!("http://{bound}")),
                    envs: args.envs.iter().map(|e| e.trim().to_string()).collect(),
                    capacity: Some(max_sessions),
                    token: args.controller_token.clone(),
                    worker_token: args.token.clone(),
                    interval: Duration::from_secs(2),
                },
                Some(Arc::new(move || server.session_count())),
            )
            .await?;
            println!(
                "registered with the controller at {controller} as {}",
                registration.worker_id()
            );
            Some(registration)
        }
        None => None,
    };
    println!(
        "env server listening on http://{bound} (envs: {}; token {}; session ttl {} s; Ctrl-C \
         stops it)",
        args.envs.join(", "),
        if args.token.is_some() {
            "required"
        } else {
            "off"
        },
        args.session_ttl_secs
    );
    if let Some(faults) = chaos {
        println!("CHAOS TESTING: this server fails on purpose: {faults}");
    }
    handle.shutdown_on(super::ctrl_c()).await?;
    println!("env server stopped");
    Ok(())
}
