//! `agentrl dashboard` end to end: a realistic runs folder written here (a real run is too
//! slow), the server on 127.0.0.1:0, its JSON API checked with reqwest (status badges, metrics
//! read live from a byte offset, evals, the episode index with filters and malformed lines,
//! episode lines, path safety), then the page itself rendered by a real headless Chromium.
//!
//! The browser test needs `chromium` (or `chromium-browser`, `google-chrome`; the env var
//! `AGENTRL_CHROMIUM` names another). Without one it is skipped, except under CI (env `CI`)
//! where it fails. `AGENTRL_WRITE_SCREENSHOT=1` also writes the run view to
//! `docs/dashboard.png`.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use agentrl_core::{FinishReason, Message, Outcome, Split, ToolCall, Trajectory, Turn};
use agentrl_trainer::run_status::RunStatus;
use serde_json::{Value, json};
use tokio::sync::oneshot;

/// The finished multi-task run of the fixture.
const RUN: &str = "demo-multitask";
/// The run whose status says running in this (live) process.
const LIVE_RUN: &str = "live-run";
/// The run whose status says running in a process that does not exist.
const DEAD_RUN: &str = "killed-run";
/// RL steps of the fixture run.
const RL_STEPS: u64 = 40;
/// Envs of the fixture run.
const ENVS: [&str; 2] = ["arith-calc", "maze"];
/// Reward of the first (tool-calling) episode of `eval_after_rl.jsonl`.
const FIRST_REWARD: f64 = 0.85;

/// A deterministic wobble in [-0.5, 0.5) for curve `seed` at `step`.
fn wobble(seed: u64, step: u64) -> f64 {
    let x = (step.wrapping_mul(2_654_435_761) ^ seed.wrapping_mul(40_503)) % 1000;
    x as f64 / 1000.0 - 0.5
}

/// The per-task object of an `rl_step` or `eval` record at `step`.
fn per_task(step: u64, episodes: u64) -> Value {
    let mut tasks = serde_json::Map::new();
    for (i, env) in ENVS.iter().enumerate() {
        let base = [0.2, 0.05][i] + [0.012, 0.008][i] * step as f64;
        let rate = (base + 0.08 * wobble(i as u64 + 1, step)).clamp(0.0, 1.0);
        tasks.insert(
            env.to_string(),
            json!({
                "episodes": episodes,
                "success_rate": rate,
                "success_low": (rate - 0.1).max(0.0),
                "success_high": (rate + 0.1).min(1.0),
                "reward_mean": rate * 0.9 + 0.05,
                "turns_mean": 1.5 + i as f64 * 5.0,
                "tool_calls_per_episode": 0.8 + i as f64 * 5.0,
            }),
        );
    }
    Value::Object(tasks)
}

/// An eval record.
fn eval_record(label: &str, step: u64) -> Value {
    json!({
        "kind": "eval", "label": label, "step": step, "tasks": 100,
        "success_rate": 0.1 + step as f64 * 0.01, "success_low": 0.05, "success_high": 0.2,
        "mean_turns": 4.2, "per_task": per_task(step, 50),
    })
}

/// `metrics.jsonl` lines: SFT steps, an eval, RL steps with two envs, an eval.
fn metrics_lines() -> Vec<Value> {
    let mut lines: Vec<Value> = (1..=8)
        .map(|i| json!({"kind": "sft_step", "step": i * 25, "loss": 1.0 / i as f64, "lr": 3e-3}))
        .collect();
    lines.push(eval_record("after_sft", 0));
    for step in 1..=RL_STEPS {
        let tasks = per_task(step, 48);
        let rate = (tasks["arith-calc"]["success_rate"].as_f64().unwrap_or(0.0)
            + tasks["maze"]["success_rate"].as_f64().unwrap_or(0.0))
            / 2.0;
        lines.push(json!({
            "kind": "rl_step", "step": step, "success_rate": rate, "reward_mean": rate * 0.9,
            "loss": 0.5 - step as f64 * 0.005, "policy_version": step, "per_task": tasks,
        }));
    }
    lines.push(eval_record("after_rl", RL_STEPS));
    lines
}

/// A turn generating `text` (byte ids) after `injected` ids.
fn turn(text: &str, injected: usize, version: u64, invalid: Option<&str>) -> Turn {
    let generated_ids: Vec<u32> = text.bytes().map(u32::from).chain([261]).collect();
    let logprobs = (0..generated_ids.len())
        .map(|i| -0.02 - (i % 5) as f32 * 0.6)
        .collect();
    Turn {
        injected_ids: vec![259; injected],
        generated_ids,
        logprobs,
        policy_version: version,
        policy_name: (version % 2 == 1).then(|| "stale".to_string()),
        finish: FinishReason::Stop,
        reward: 0.0,
        stale: false,
        invalid_action: invalid.map(str::to_string),
    }
}

/// The multi-turn episode: a calculator call, its result, the answer.
fn tool_episode() -> Trajectory {
    let call = ToolCall::new("call_0_0", "calculator", &json!({"expression": "44+89+70"}));
    let mut t = Trajectory::new("arith-calc", "test-1", Split::Test, 1)
        .with_messages(vec![
            Message::system("You can call calculator(expression)."),
            Message::user("Compute 44+89+70"),
            Message::assistant_tool_calls(None, vec![call]),
            Message::tool("call_0_0", "203"),
            Message::assistant("203"),
        ])
        .with_turns(vec![
            turn("calculator{\"expression\":\"44+89+70\"}", 40, 38, None),
            turn("203", 6, 39, None),
        ])
        .with_outcome(Outcome::Completed)
        .with_success(true)
        .with_tool_calls(1, 0)
        .with_reward(FIRST_REWARD);
    t.reward_parts = BTreeMap::from([("format".to_string(), 0.5), ("outcome".to_string(), 1.0)]);
    t
}

/// A one-turn episode of `env`.
fn short_episode(env: &str, i: u64, success: bool, invalid: bool) -> Trajectory {
    let invalid = invalid.then_some("unknown command");
    Trajectory::new(env, format!("test-{i}"), Split::Test, i)
        .with_messages(vec![Message::user("Go north"), Message::assistant("north")])
        .with_turns(vec![turn("north", 12, 40, invalid)])
        .with_outcome(if invalid.is_some() {
            Outcome::InvalidAction
        } else {
            Outcome::Truncated
        })
        .with_success(success)
        .with_reward(if success { 1.0 } else { 0.0 })
}

/// JSON lines of `episodes`.
fn jsonl(episodes: &[Trajectory]) -> String {
    episodes
        .iter()
        .map(|t| serde_json::to_string(t).expect("trajectory serialises") + "\n")
        .collect()
}

/// Writes the finished multi-task run under `runs`.
fn write_finished_run(runs: &Path) -> PathBuf {
    let dir = runs.join(RUN);
    std::fs::create_dir_all(dir.join("samples")).expect("mkdir samples");
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/demo.toml");
    std::fs::copy(&config, dir.join("config.toml")).expect("copy configs/demo.toml");
    let metrics: String = metrics_lines()
        .iter()
        .map(|l| l.to_string() + "\n")
        .collect();
    std::fs::write(dir.join("metrics.jsonl"), metrics).expect("write metrics");
    std::fs::write(
        dir.join("summary.json"),
        r#"{"eval_success_after_rl":0.5,"rl_steps":40}"#,
    )
    .expect("write summary");
    let mut evals = vec![tool_episode()];
    evals.extend(
        (2..12).map(|i| short_episode(ENVS[(i % 2) as usize], i, i.is_multiple_of(3), i == 7)),
    );
    let mut eval_text = jsonl(&evals);
    eval_text.insert_str(
        eval_text.find('\n').expect("a line") + 1,
        "{\"truncated\": \n",
    );
    std::fs::write(dir.join("samples/eval_after_rl.jsonl"), eval_text).expect("write evals");
    let rl: Vec<Trajectory> = (0..6)
        .map(|i| short_episode("maze", 100 + i, i == 0, false))
        .collect();
    std::fs::write(dir.join("samples/rl_step_000040.jsonl"), jsonl(&rl)).expect("write rl");
    std::fs::write(dir.join("demos.jsonl"), jsonl(&[tool_episode()])).expect("write demos");
    let started = RunStatus::running("demo");
    started
        .ended::<()>(&Ok(()))
        .write(&dir)
        .expect("write status");
    dir
}

/// Writes a run whose status says running in process `pid`.
fn write_running_run(runs: &Path, name: &str, pid: u32) -> PathBuf {
    let dir = runs.join(name);
    let status = RunStatus {
        pid,
        ..RunStatus::running("train")
    };
    status.write(&dir).expect("write status");
    std::fs::write(dir.join("metrics.jsonl"), "").expect("write metrics");
    dir
}

/// A dashboard serving `runs` on a free port until the sender is dropped or used.
async fn start_dashboard(runs: &Path) -> (String, oneshot::Sender<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("local addr");
    let (stop, stopped) = oneshot::channel::<()>();
    let runs = runs.to_path_buf();
    tokio::spawn(async move {
        let shutdown = async {
            let _ = stopped.await;
        };
        agentrl_trainer::dashboard::serve(listener, runs, shutdown)
            .await
            .expect("dashboard serves");
    });
    (format!("http://{addr}"), stop)
}

/// GET `url` as JSON, asserting the status.
async fn get_json(client: &reqwest::Client, url: &str, status: u16) -> Value {
    let response = client.get(url).send().await.expect("request");
    assert_eq!(response.status().as_u16(), status, "GET {url}");
    response.json().await.expect("JSON body")
}

/// The runs folder with the three runs.
fn runs_fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    write_finished_run(dir.path());
    write_running_run(dir.path(), LIVE_RUN, std::process::id());
    write_running_run(dir.path(), DEAD_RUN, 999_999_999);
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_serves_runs_metrics_evals_and_episodes() {
    let runs = runs_fixture();
    let (base, _stop) = start_dashboard(runs.path()).await;
    let client = reqwest::Client::new();

    let list = get_json(&client, &format!("{base}/api/runs"), 200).await;
    let by_name: BTreeMap<&str, &Value> = list["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|r| (r["name"].as_str().expect("name"), r))
        .collect();
    assert_eq!(by_name.len(), 3);
    assert_eq!(by_name[RUN]["status"]["state"], "finished");
    assert_eq!(by_name[RUN]["last_step"], RL_STEPS);
    assert_eq!(by_name[RUN]["last"]["eval"]["label"], "after_rl");
    assert_eq!(by_name[RUN]["last"]["rl_step"]["step"], RL_STEPS);
    assert_eq!(by_name[LIVE_RUN]["status"]["state"], "running");
    assert_eq!(by_name[DEAD_RUN]["status"]["state"], "failed");
    assert_eq!(by_name[DEAD_RUN]["status"]["detail"], "interrupted");

    let run = get_json(&client, &format!("{base}/api/runs/{RUN}"), 200).await;
    assert!(run["config"].as_str().expect("config").contains("[env]"));
    assert_eq!(run["summary"]["rl_steps"], 40);
    let sources: Vec<(&str, Value)> = run["sources"]
        .as_array()
        .expect("sources")
        .iter()
        .map(|s| (s["name"].as_str().expect("name"), s["step"].clone()))
        .collect();
    assert_eq!(
        sources,
        [
            ("demos.jsonl", Value::Null),
            ("eval_after_rl.jsonl", Value::Null),
            ("rl_step_000040.jsonl", json!(40))
        ]
    );

    let evals = get_json(&client, &format!("{base}/api/runs/{RUN}/eval"), 200).await;
    let evals = evals["evals"].as_array().expect("evals");
    assert_eq!(evals.len(), 2);
    assert!(evals[1]["per_task"]["maze"]["success_low"].is_number());

    check_episodes(&client, &base).await;
    check_live_metrics(&client, &base, &runs.path().join(RUN)).await;
    check_path_safety(&client, &base).await;
}

/// The episode index over HTTP: counts, malformed lines, filters, steps, one episode.
async fn check_episodes(client: &reqwest::Client, base: &str) {
    let url = format!("{base}/api/runs/{RUN}/episodes?source=eval_after_rl.jsonl");
    let page = get_json(client, &url, 200).await;
    assert_eq!(page["total_matching"], 11);
    assert_eq!(page["index_complete"], true);
    assert_eq!(page["bad_line_count"], 1);
    assert_eq!(page["bad_lines"][0]["line"], 2);
    let first = &page["episodes"][0];
    assert_eq!(
        (&first["tool_calls"], &first["turns"], &first["reward"]),
        (&json!(1), &json!(2), &json!(FIRST_REWARD))
    );
    assert_eq!(first["policy_versions"], json!([38, 39]));
    assert_eq!(first["policy_names"], json!(["stale"]));

    let maze = get_json(client, &format!("{url}&env=maze&success=false"), 200).await;
    assert!(
        maze["episodes"]
            .as_array()
            .expect("page")
            .iter()
            .all(|e| e["env_id"] == "maze" && e["success"] == false)
    );
    let invalid = get_json(client, &format!("{url}&invalid=true"), 200).await;
    assert_eq!(invalid["total_matching"], 1);
    assert_eq!(invalid["episodes"][0]["outcome"], "invalid_action");
    let paged = get_json(client, &format!("{url}&offset=10&limit=5"), 200).await;
    assert_eq!(paged["episodes"].as_array().expect("page").len(), 1);
    let rewarded = get_json(client, &format!("{url}&min_reward=0.5&max_reward=0.9"), 200).await;
    assert_eq!(rewarded["total_matching"], 1);

    let by_step = format!("{base}/api/runs/{RUN}/episodes?step_min=40&step_max=40");
    let steps = get_json(client, &by_step, 200).await;
    assert_eq!(steps["sources"], json!(["rl_step_000040.jsonl"]));
    assert_eq!(steps["total_matching"], 6);
    assert_eq!(steps["episodes"][0]["source"], "rl_step_000040.jsonl");
    let none = get_json(
        client,
        &format!("{base}/api/runs/{RUN}/episodes?step_max=10"),
        200,
    )
    .await;
    assert_eq!(none["total_matching"], 0);

    let url = format!("{base}/api/runs/{RUN}/episodes/eval_after_rl.jsonl/0");
    let episode = get_json(client, &url, 200).await;
    let episode: Trajectory = serde_json::from_value(episode).expect("a trajectory");
    assert_eq!(episode, tool_episode());
    let url = format!("{base}/api/runs/{RUN}/episodes/eval_after_rl.jsonl/1");
    assert_eq!(get_json(client, &url, 200).await["task_id"], "test-2");
}

/// Metrics since a byte offset while the run appends, a partial last line left for later.
async fn check_live_metrics(client: &reqwest::Client, base: &str, run_dir: &Path) {
    let url = format!("{base}/api/runs/{RUN}/metrics");
    let all = get_json(client, &format!("{url}?since=0"), 200).await;
    let count = metrics_lines().len();
    assert_eq!(all["records"].as_array().expect("records").len(), count);
    let offset = all["next_offset"].as_u64().expect("offset");
    let metrics = run_dir.join("metrics.jsonl");
    assert_eq!(offset, std::fs::metadata(&metrics).expect("metrics").len());

    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&metrics)
        .expect("open metrics");
    write!(file, "{{\"kind\":\"rl_step\",\"step\":41,").expect("append");
    file.flush().expect("flush");
    let partial = get_json(client, &format!("{url}?since={offset}"), 200).await;
    assert_eq!(partial["records"], json!([]));
    assert_eq!(partial["next_offset"], offset);
    writeln!(file, "\"success_rate\":0.9}}").expect("append");
    let grown = get_json(client, &format!("{url}?since={offset}"), 200).await;
    assert_eq!(grown["records"][0]["step"], 41);
    assert!(grown["next_offset"].as_u64().expect("offset") > offset);
    let list = get_json(client, &format!("{base}/api/runs"), 200).await;
    let run = list["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .find(|r| r["name"] == RUN)
        .cloned();
    assert_eq!(run.expect("run")["last_step"], 41);
}

/// Names from URLs must be listed entries: traversal and unknown names are JSON errors.
async fn check_path_safety(client: &reqwest::Client, base: &str) {
    for (path, status) in [
        ("/api/runs/..%2F..", 400),
        ("/api/runs/nope", 404),
        ("/api/runs/%2E%2E%2F%2E%2E", 400),
        (
            "/api/runs/demo-multitask/episodes?source=..%2Fconfig.toml",
            400,
        ),
        ("/api/runs/demo-multitask/episodes?source=config.toml", 404),
        (
            "/api/runs/demo-multitask/episodes/eval_after_rl.jsonl/99",
            404,
        ),
        ("/api/runs/demo-multitask/episodes/..%2Fdemos.jsonl/0", 400),
        (
            "/api/runs/demo-multitask/episodes?source=eval_after_rl.jsonl&limit=x",
            400,
        ),
        ("/api/nothing", 404),
    ] {
        let body = get_json(client, &format!("{base}{path}"), status).await;
        assert!(body["error"].is_string(), "{path}: {body}");
    }
    let page = client.get(base).send().await.expect("page");
    assert_eq!(page.status().as_u16(), 200);
    assert!(page.text().await.expect("html").contains("app.js"));
}

/// The Chromium binary to drive: `AGENTRL_CHROMIUM`, else the first of the usual names on
/// `PATH`.
fn find_chromium() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("AGENTRL_CHROMIUM") {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .flat_map(|name| std::env::split_paths(&path).map(move |dir| dir.join(name)))
        .find(|candidate| candidate.is_file())
}

/// Runs headless `chromium` on `url` with `mode_args`; its stdout (the DOM for `--dump-dom`).
/// Killed after 60 s.
async fn headless(chromium: &Path, profile: &Path, mode_args: &[String], url: &str) -> String {
    let mut command = tokio::process::Command::new(chromium);
    command
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
        ])
        .args([
            "--no-first-run",
            "--hide-scrollbars",
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(mode_args)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let child = command.spawn().expect("start chromium");
    let output = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("chromium finished within 60 s")
        .expect("chromium ran");
    assert!(
        output.status.success(),
        "chromium failed on {url}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_renders_run_list_curves_and_an_episode() {
    let Some(chromium) = find_chromium() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "no Chromium found: .ci/run must install Debian's `chromium` package (or set \
             AGENTRL_CHROMIUM)"
        );
        eprintln!(
            "skipping the dashboard browser test: no chromium, chromium-browser or google-chrome on PATH"
        );
        return;
    };
    let runs = runs_fixture();
    let (base, _stop) = start_dashboard(runs.path()).await;
    let work = tempfile::tempdir().expect("temp dir");
    let dump = |n: usize| {
        (
            work.path().join(format!("profile-{n}")),
            vec!["--dump-dom".to_string()],
        )
    };

    let (profile, args) = dump(0);
    let list = headless(&chromium, &profile, &args, &format!("{base}/#/")).await;
    assert!(
        list.contains("data-testid=\"run-row\" data-run=\"demo-multitask\""),
        "{list}"
    );
    assert!(list.contains("state-finished"), "{list}");
    assert!(list.contains(">failed (interrupted)<"), "{list}");
    assert!(list.contains("state-running"), "{list}");

    let (profile, args) = dump(1);
    let curves = headless(&chromium, &profile, &args, &format!("{base}/#/run/{RUN}")).await;
    assert!(curves.contains("data-testid=\"chart-svg\""), "{curves}");
    assert!(curves.contains("data-series=\"arith-calc\""), "{curves}");
    assert!(curves.contains("data-series=\"maze\""), "{curves}");
    assert!(
        curves.contains("d=\"M"),
        "no SVG path in the chart: {curves}"
    );
    assert!(curves.contains("data-label=\"after_rl\""), "{curves}");

    let (profile, args) = dump(2);
    let url = format!("{base}/#/run/{RUN}/episode/eval_after_rl.jsonl/0");
    let episode = headless(&chromium, &profile, &args, &url).await;
    assert!(
        episode.contains("data-testid=\"tool-call-name\">calculator<"),
        "{episode}"
    );
    assert!(
        episode.contains("data-testid=\"tool-result\">203<"),
        "{episode}"
    );
    assert!(
        episode.contains("data-testid=\"episode-reward\">0.85<"),
        "{episode}"
    );
    assert!(episode.contains("policy v39 (stale)"), "{episode}");

    let shots = [
        ("runs", "#/".to_string()),
        ("curves", format!("#/run/{RUN}")),
        (
            "episode",
            format!("#/run/{RUN}/episode/eval_after_rl.jsonl/0"),
        ),
    ];
    for (i, (name, route)) in shots.iter().enumerate() {
        let png = work.path().join(format!("{name}.png"));
        let args = [
            format!("--screenshot={}", png.display()),
            "--window-size=1280,900".to_string(),
        ];
        headless(
            &chromium,
            &work.path().join(format!("profile-shot-{i}")),
            &args,
            &format!("{base}/{route}"),
        )
        .await;
        let bytes = std::fs::read(&png).expect("screenshot written");
        assert!(bytes.starts_with(b"\x89PNG"), "{name}.png is a PNG");
        if *name == "curves"
            && std::env::var_os("AGENTRL_WRITE_SCREENSHOT").is_some_and(|v| v == "1")
        {
            let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/dashboard.png");
            std::fs::create_dir_all(docs.parent().expect("docs folder")).expect("mkdir docs");
            std::fs::write(&docs, &bytes).expect("write docs/dashboard.png");
        }
    }
}
