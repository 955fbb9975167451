//! Helpers for tests over the HTTP protocol: clients and many expert sessions at once.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use agentrl_core::{Env, Split};
use agentrl_env::EnvFactory;
use agentrl_env::protocol::{ClientConfig, ProtocolClient, RemoteEnvFactory};

use super::check_own_task;

/// A protocol client of the server at `addr`.
pub fn client(addr: SocketAddr) -> ProtocolClient {
    ProtocolClient::new(&addr.to_string(), &ClientConfig::default()).unwrap()
}

/// Opens `n` arith-calc sessions through `factory`, waits until all are open, then plays each
/// with the expert, checking every session saw its own task; returns how many succeeded and
/// prints the sessions per second.
pub async fn expert_sessions_at_once(factory: Arc<RemoteEnvFactory>, n: u64, what: &str) -> usize {
    let barrier = Arc::new(tokio::sync::Barrier::new(n as usize));
    let started = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for index in 0..n {
        let factory = factory.clone();
        let barrier = barrier.clone();
        set.spawn(async move {
            let task = factory.task(Split::Test, index);
            let mut env = factory.make();
            let obs = env.reset(&task).await.unwrap();
            // Every session is live before anyone steps.
            barrier.wait().await;
            let mut history = obs.messages.clone();
            let mut expert = factory.solver(0);
            loop {
                let action = expert.act(&task, &history);
                history.push(action.clone());
                let step = env.step(&action).await.unwrap();
                history.extend(step.messages.iter().cloned());
                if step.done() {
                    check_own_task(&task, &obs, &history);
                    return step.info.success == Some(true);
                }
            }
        });
    }
    let mut solved = 0;
    while let Some(joined) = set.join_next().await {
        solved += usize::from(joined.unwrap());
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{n} concurrent sessions {what} in {secs:.3} s: {:.0} sessions/s",
        n as f64 / secs
    );
    solved
}
