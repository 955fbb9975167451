//! `controller` (`agentrl-env controller`, `agentrl controller`): the central controller in front
//! of env servers, until Ctrl-C.

use std::net::SocketAddr;
use std::time::Duration;

use agentrl_core::{Error, Result};
use clap::Args;

use crate::protocol::{ControllerConfig, serve_controller};

/// Arguments of `agentrl-env controller` and `agentrl controller`.
#[derive(Args, Debug, Clone)]
pub struct ControllerArgs {
    /// Address to listen on; port 0 picks a free port (the bound address is printed).
    #[arg(long, default_value = "127.0.0.1:5020")]
    pub addr: SocketAddr,
    /// Bearer token every client and worker request must carry.
    #[arg(long)]
    pub token: Option<String>,
    /// Seconds without a heartbeat after which a worker is dropped with its sessions.
    #[arg(long, default_value_t = 10)]
    pub heartbeat_timeout_secs: u64,
    /// Seconds of idleness after which a session expires.
    #[arg(long, default_value_t = 600)]
    pub session_ttl_secs: u64,
}

/// Runs the controller until Ctrl-C, then lets requests in flight finish.
pub async fn run_controller(args: ControllerArgs) -> Result<()> {
    if args.heartbeat_timeout_secs == 0 || args.session_ttl_secs == 0 {
        return Err(Error::Config(
            "--heartbeat-timeout-secs and --session-ttl-secs must be at least 1".into(),
        ));
    }
    let config = ControllerConfig {
        token: args.token.clone(),
        heartbeat_timeout: Duration::from_secs(args.heartbeat_timeout_secs),
        session_ttl: Duration::from_secs(args.session_ttl_secs),
        ..ControllerConfig::default()
    };
    let (bound, handle) = serve_controller(args.addr, config).await?;
    println!(
        "controller listening on http://{bound} (token {}; heartbeat timeout {} s; session ttl {} s; Ctrl-C stops it)",
        if args.token.is_some() {
            "required"
        } else {
            "off"
        },
        args.heartbeat_timeout_secs,
        args.session_ttl_secs
    );
    handle.shutdown_on(super::ctrl_c()).await?;
    println!("controller stopped");
    Ok(())
}
