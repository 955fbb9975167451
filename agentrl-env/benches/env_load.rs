//! Load benchmark of the env protocol: one `agentrl-env controller` process in front of four
//! `agentrl-env serve` processes on loopback holds 1,000 `arith-calc` sessions open at once,
//! then every session is played to the end by the reference solver through the controller.
//!
//! It checks that no session is lost or mixed up (each one sees its own task, its own tool
//! results and reward 1) and prints sessions per second and interact latency percentiles.
//! Run it with `cargo xtask bench` (or `cargo bench -p agentrl-env --features cli --bench env_load`);
//! `AGENTRL_LOAD_SESSIONS` and `AGENTRL_LOAD_SERVERS` change the load.

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentrl_core::{Message, Role, Split, Task};
use agentrl_env::protocol::{ClientConfig, ProtocolClient, StartSampleRequest};
use agentrl_env::{EnvFactory, lookup};
use tokio::sync::Barrier;

const ENV: &str = "arith-calc";

/// A child process killed (and reaped) when dropped, so a failed run leaves no servers behind.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `agentrl-env ARGS` and waits for the stdout line that contains `marker`; returns the
/// process and the `http://...` address printed on that line.
fn start(args: &[&str], marker: &str) -> Result<(Process, String), String> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_agentrl-env"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .env(
            "RUST_LOG",
            std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .spawn()
        .map_err(|e| format!("starting agentrl-env {args:?}: {e}"))?;
    let stdout: ChildStdout = child
        .stdout
        .take()
        .ok_or_else(|| format!("agentrl-env {args:?}: no stdout"))?;
    let process = Process(child);
    let mut lines = BufReader::new(stdout).lines();
    let mut address = None;
    for line in lines.by_ref() {
        let line = line.map_err(|e| format!("reading agentrl-env {args:?}: {e}"))?;
        if let Some(at) = line.find("http://") {
            let rest = &line[at..];
            let end = rest.find([' ', ')']).unwrap_or(rest.len());
            address.get_or_insert_with(|| rest[..end].to_string());
        }
        if line.contains(marker) {
            // Keep draining stdout so the child never blocks on a full pipe.
            std::thread::spawn(move || lines.for_each(drop));
            return address
                .map(|a| (process, a))
                .ok_or_else(|| format!("agentrl-env {args:?} printed no address"));
        }
    }
    Err(format!(
        "agentrl-env {args:?} exited before printing `{marker}`"
    ))
}

fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Timings of one session.
struct SessionRun {
    start: Duration,
    interacts: Vec<Duration>,
}

/// Opens session `index` and checks its first message is its own task's.
async fn open_session(
    client: &ProtocolClient,
    task: &Task,
    index: u64,
) -> Result<(String, Vec<Message>), String> {
    let request = StartSampleRequest {
        name: ENV.into(),
        index: Some(index),
        split: Some(Split::Test),
        custom_task: None,
    };
    let (sid, first) = client
        .start_sample(&request)
        .await
        .map_err(|e| format!("session {index}: start: {e}"))?;
    let expression = task.data["expression"].as_str().unwrap_or_default();
    let expected = format!("Compute {expression}");
    if first.messages.first().map(Message::text) != Some(expected.as_str()) {
        return Err(format!(
            "session {index} got another task: {:?}",
            first.messages.first()
        ));
    }
    Ok((sid, first.messages))
}

/// Opens session `index`, waits until every session is open and counted, then plays it to the end and
/// checks it saw its own task.
async fn session(
    client: ProtocolClient,
    local: Arc<dyn EnvFactory>,
    index: u64,
    all_open: Arc<Barrier>,
    go: Arc<Barrier>,
) -> Result<SessionRun, String> {
    let task = local.task(Split::Test, index);
    let t0 = Instant::now();
    let opened = open_session(&client, &task, index).await;
    let start = t0.elapsed();
    // Wait even after a failure, or the other sessions would wait for this one forever.
    all_open.wait().await;
    go.wait().await;
    let (sid, mut history) = opened?;
    let mut solver = local.solver(index);
    let mut interacts = Vec::new();
    loop {
        let action = solver.act(&task, &history);
        let t = Instant::now();
        let answer = client
            .interact(ENV, &sid, &action)
            .await
            .map_err(|e| format!("session {index}: interact: {e}"))?;
        interacts.push(t.elapsed());
        history.push(action);
        history.extend(answer.messages);
        if answer.finish {
            if answer.reward != 1.0 {
                return Err(format!(
                    "session {index} ended with reward {}",
                    answer.reward
                ));
            }
            break;
        }
        if interacts.len() > local.max_turns() {
            return Err(format!("session {index} never finished"));
        }
    }
    let result = task.data["answer"].as_str().unwrap_or_default();
    let tool_result = history
        .iter()
        .find(|m| m.role == Role::Tool)
        .map(Message::text);
    if tool_result.map(str::trim) != Some(result) {
        return Err(format!("session {index} got another session's tool result"));
    }
    Ok(SessionRun { start, interacts })
}

fn main() -> Result<(), String> {
    let sessions = env_count("AGENTRL_LOAD_SESSIONS", 1000);
    let servers = env_count("AGENTRL_LOAD_SERVERS", 4);
    let (_controller, base) = start(
        &[
            "controller",
            "--addr",
            "127.0.0.1:0",
            "--heartbeat-timeout-secs",
            "60",
        ],
        "controller listening",
    )?;
    let mut workers = Vec::new();
    for _ in 0..servers {
        let (worker, _) = start(
            &[
                "serve",
                "--env",
                ENV,
                "--addr",
                "127.0.0.1:0",
                "--max-sessions",
                &sessions.to_string(),
                "--task-count",
                &sessions.to_string(),
                "--controller",
                &base,
            ],
            "registered with the controller",
        )?;
        workers.push(worker);
    }
    let runtime = tokio::runtime::Runtime::new().map_err(|e| format!("tokio: {e}"))?;
    runtime.block_on(async move {
        let config = ClientConfig::default();
        let client = ProtocolClient::new(&base, &config).map_err(|e| e.to_string())?;
        let local = lookup(ENV).map_err(|e| e.to_string())?;
        let all_open = Arc::new(Barrier::new(sessions + 1));
        let go = Arc::new(Barrier::new(sessions + 1));
        let began = Instant::now();
        let tasks: Vec<_> = (0..sessions as u64)
            .map(|i| {
                let (client, local) = (client.clone(), local.clone());
                tokio::spawn(session(client, local, i, all_open.clone(), go.clone()))
            })
            .collect();
        all_open.wait().await;
        let opened = began.elapsed();
        let open = client.list_sessions().await.map_err(|e| e.to_string())?;
        let spread: Vec<usize> = client
            .list_workers()
            .await
            .map_err(|e| e.to_string())?
            .iter()
            .map(|w| w.sessions)
            .collect();
        go.wait().await;
        let mut starts = Vec::new();
        let mut interacts = Vec::new();
        let mut failures = Vec::new();
        for task in tasks {
            match task.await {
                Ok(Ok(run)) => {
                    starts.push(run.start);
                    interacts.extend(run.interacts);
                }
                Ok(Err(e)) => failures.push(e),
                Err(e) => failures.push(format!("a session task panicked: {e}")),
            }
        }
        let total = began.elapsed();
        starts.sort();
        interacts.sort();
        println!("env_load: {sessions} sessions over {servers} env-server processes behind one controller");
        println!("  held open at once:   {} (per server: {spread:?})", open.len());
        println!("  all opened in:       {:.2} s", opened.as_secs_f64());
        println!("  all finished in:     {:.2} s", total.as_secs_f64());
        println!("  sessions/s:          {:.0}", sessions as f64 / total.as_secs_f64());
        println!("  interacts:           {}", interacts.len());
        println!(
            "  start_sample p50/p99: {:.1} / {:.1} ms",
            percentile(&starts, 50.0).as_secs_f64() * 1e3,
            percentile(&starts, 99.0).as_secs_f64() * 1e3
        );
        println!(
            "  interact p50/p99:     {:.1} / {:.1} ms",
            percentile(&interacts, 50.0).as_secs_f64() * 1e3,
            percentile(&interacts, 99.0).as_secs_f64() * 1e3
        );
        println!("  lost or mixed up:    {}", failures.len());
        if open.len() != sessions || !failures.is_empty() {
            let first: Vec<_> = failures.iter().take(5).collect();
            return Err(format!(
                "{} sessions failed, {} of {sessions} were open at once; first failures: {first:?}",
                failures.len(),
                open.len()
            ));
        }
        Ok(())
    })
}
