//! Dashboard benchmarks over one samples file of `AGENTRL_BENCH_SAMPLES_MB` MiB (default 64)
//! of realistic multi-turn tool-calling episodes, written once to a temp dir: the first page
//! of 50 episodes from a cold index (what the episode browser waits for), and building the
//! whole index of the file.
//!
//! `AGENTRL_BENCH_SAMPLES_MB=1024 cargo bench -p agentrl-trainer --bench dashboard`

use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::Duration;

use agentrl_core::{FinishReason, Message, Outcome, Split, ToolCall, Trajectory, Turn};
use agentrl_trainer::dashboard::episodes::{EpisodeFilter, IndexCache, index_file};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

/// Size of the samples file when `AGENTRL_BENCH_SAMPLES_MB` is not set.
const DEFAULT_MB: u64 = 64;

/// One turn generating `tokens` ids, some of them an invalid action.
fn turn(tokens: usize, version: u64, seed: usize) -> Turn {
    Turn {
        injected_ids: (0..tokens / 3)
            .map(|i| (i * 7 + seed) as u32 % 256)
            .collect(),
        generated_ids: (0..tokens).map(|i| (i * 13 + seed) as u32 % 262).collect(),
        logprobs: (0..tokens)
            .map(|i| -(((i * 31 + seed) % 97) as f32) / 37.0)
            .collect(),
        policy_version: version,
        policy_name: seed.is_multiple_of(4).then(|| "stale".to_string()),
        finish: FinishReason::Stop,
        reward: 0.0,
        stale: false,
        invalid_action: seed
            .is_multiple_of(9)
            .then(|| "unknown command".to_string()),
    }
}

/// Episode `i`: a maze-like conversation of 1–8 tool-calling turns.
fn episode(i: usize) -> Trajectory {
    let env = ["arith-calc", "maze", "text-adventure", "spreadsheet-ops"][i % 4];
    let turns = 1 + i % 8;
    let mut messages = vec![
        Message::system("You are an agent. Use the tools to solve the task."),
        Message::user(format!("Task {i}: find the exit of the maze from (0, 0).")),
    ];
    for t in 0..turns {
        let id = format!("call_{i}_{t}");
        let direction = ["north", "east", "south", "west"][t % 4];
        let args = serde_json::json!({ "direction": direction });
        messages.push(Message::assistant_tool_calls(
            None,
            vec![ToolCall::new(&id, "move", &args)],
        ));
        messages.push(Message::tool(
            id,
            format!("You are at ({t}, {}). Walls: north, west.", t + 1),
        ));
    }
    let mut trajectory = Trajectory::new(env, format!("train-{i}"), Split::Train, i as u64 / 8)
        .with_messages(messages)
        .with_turns(
            (0..turns)
                .map(|t| turn(40 + (i * 17 + t * 29) % 120, 30 + t as u64, i + t))
                .collect(),
        )
        .with_outcome(if i.is_multiple_of(3) {
            Outcome::Completed
        } else {
            Outcome::Truncated
        })
        .with_success(i.is_multiple_of(3))
        .with_tool_calls(turns as u32, i.is_multiple_of(5) as u32)
        .with_reward(if i.is_multiple_of(3) { 1.0 } else { 0.1 });
    trajectory.reward_parts = BTreeMap::from([("format".into(), 1.0), ("outcome".into(), 0.0)]);
    trajectory
}

/// Writes about `mb` MiB of episode lines to `path`.
fn write_samples(path: &Path, mb: u64) {
    let lines: Vec<String> = (0..256)
        .map(|i| serde_json::to_string(&episode(i)).expect("episode serialises"))
        .collect();
    let file = std::fs::File::create(path).expect("create the samples file");
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let target = mb << 20;
    let mut written = 0u64;
    for line in lines.iter().cycle() {
        if written >= target {
            break;
        }
        out.write_all(line.as_bytes()).expect("write");
        out.write_all(b"\n").expect("write");
        written += line.len() as u64 + 1;
    }
    out.flush().expect("flush");
}

fn dashboard_index(c: &mut Criterion) {
    let mb = std::env::var("AGENTRL_BENCH_SAMPLES_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_MB);
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("rl_step_000001.jsonl");
    write_samples(&path, mb);
    let bytes = std::fs::metadata(&path).expect("samples file").len();
    let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
    let filter = EpisodeFilter::default();

    let mut g = c.benchmark_group(format!("dashboard_{mb}MiB"));
    g.sample_size(10);
    g.bench_function("first_page_50_cold_index", |b| {
        b.iter(|| {
            let cache = IndexCache::new();
            let page = rt
                .block_on(cache.page(&path, &filter, 0, 50, Duration::from_secs(600)))
                .expect("page");
            assert_eq!(page.episodes.len(), 50);
        })
    });
    g.throughput(Throughput::Bytes(bytes));
    g.measurement_time(Duration::from_secs(5));
    g.bench_function("full_index_build", |b| {
        b.iter(|| {
            let index = index_file(&path).expect("index");
            assert!(index.episodes.len() > 50);
        })
    });
    g.finish();
}

criterion_group!(benches, dashboard_index);
criterion_main!(benches);
