//! The Python env SDK (`python/agentrl_env`) against the Rust protocol client: its example env
//! (`guess-number`) served by `python3 -m agentrl_env.serve` on port 0 and played through
//! `RemoteEnv`/`ProtocolClient` (also 50 at once), the same error answers as the Rust env server
//! for the same malformed requests, the Python port of `arith-calc` giving the same episodes as
//! the Rust env through `RemoteEnvFactory`, registration behind the Rust controller, and the
//! Python unit tests.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use agentrl_core::{Env, Message, Role, Split, Task, ToolCall};
use agentrl_env::protocol::{
    ClientConfig, ControllerConfig, ProtocolClient, RemoteEnv, RemoteEnvFactory, SampleStatus,
    ServerConfig, serve, serve_controller,
};
use agentrl_env::{EnvFactory, lookup, run_solver_episode};
use serde_json::{Value, json};

const ENV: &str = "guess-number";

#[path = "support/python_server.rs"]
mod python_server;
use python_server::{PyServer, python3};

fn guess(id: &str, arguments: &str) -> Message {
    let mut call = ToolCall::new(id, "guess", &json!({}));
    call.function.arguments = arguments.to_string();
    Message::assistant_tool_calls(None, vec![call])
}

/// The upper bound in the task statement `... between 1 and HIGH. ...`.
fn high_of(statement: &str) -> i64 {
    let rest = statement.split("between 1 and ").nth(1).unwrap();
    rest.split('.').next().unwrap().parse().unwrap()
}

/// Plays one episode with binary search through `env` (already reset with `statement`);
/// returns the final step's reward, success and number of steps.
async fn binary_search(env: &mut RemoteEnv, statement: &str) -> (f64, Option<bool>, usize) {
    let (mut low, mut high) = (1, high_of(statement));
    for steps in 1..=30 {
        let action = if low == high {
            Message::assistant(format!("answer: {low}"))
        } else {
            let mid = (low + high) / 2;
            guess(
                &format!("call_{steps}"),
                &json!({ "number": mid }).to_string(),
            )
        };
        let step = env.step(&action).await.unwrap();
        if step.done() {
            assert!(step.terminated, "{step:?}");
            return (step.reward, step.info.success, steps);
        }
        let text = step.messages[0].text().to_string();
        let mid = (low + high) / 2;
        if text.ends_with("too low") {
            low = mid + 1;
        } else if text.ends_with("too high") {
            high = mid - 1;
        } else {
            assert_eq!(text, format!("{mid} is correct"));
            (low, high) = (mid, mid);
        }
    }
    panic!("binary search did not finish");
}

fn custom_task(high: u64, secret: u64) -> Task {
    Task {
        env_id: ENV.into(),
        id: format!("custom-{high}-{secret}"),
        split: Split::Train,
        data: json!({ "high": high, "secret": secret }),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn episodes_through_remote_env_reward_right_answers_only() {
    let server = PyServer::start(&[]);
    let mut env = RemoteEnv::new(server.client(), ENV);
    for index in 0..10 {
        let obs = env.reset_index(Split::Test, index).await.unwrap();
        assert_eq!(obs.tools[0].function.name, "guess");
        let (reward, success, steps) = binary_search(&mut env, obs.messages[0].text()).await;
        assert_eq!((reward, success), (1.0, Some(true)), "task {index}");
        assert!(steps <= 12, "{steps} steps");
    }
    // A custom task with a known secret: a wrong final answer fails, the right one succeeds.
    env.reset(&custom_task(100, 42)).await.unwrap();
    let wrong = env.step(&Message::assistant("answer: 41")).await.unwrap();
    assert!(wrong.terminated && wrong.reward == 0.0 && wrong.info.success == Some(false));
    env.reset(&custom_task(100, 42)).await.unwrap();
    let right = env.step(&Message::assistant("it is 42")).await.unwrap();
    assert!(right.terminated && right.reward == 1.0 && right.info.success == Some(true));
    // A refused custom task is a clear error.
    let err = env
        .reset(&custom_task(10, 11))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("422") && err.contains("secret <= high"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_tool_calls_are_error_observations_and_the_episode_goes_on() {
    let server = PyServer::start(&[]);
    let c = server.client();
    let task = custom_task(7, 5);
    let request = agentrl_env::protocol::StartSampleRequest {
        name: ENV.into(),
        index: None,
        split: None,
        custom_task: Some(task),
    };
    let (sid, _) = c.start_sample(&request).await.unwrap();
    let bad = [
        guess("c1", "{\"number\": "),
        guess("c2", "{\"number\": \"five\"}"),
        {
            let mut m = guess("c3", "{}");
            m.tool_calls[0].function.name = "teleport".into();
            m
        },
        Message::assistant(" "),
    ];
    for action in &bad {
        let r = c.interact(ENV, &sid, action).await.unwrap();
        assert_eq!(r.status, SampleStatus::AgentInvalidAction, "{r:?}");
        assert!(!r.finish && r.metrics.invalid_action.is_some());
        assert_eq!(r.messages.len(), 1);
        assert!(r.messages[0].text().starts_with("error: "), "{r:?}");
    }
    let r = c
        .interact(ENV, &sid, &guess("c4", "{\"number\": 5}"))
        .await
        .unwrap();
    assert_eq!(r.status, SampleStatus::Running);
    assert_eq!(r.messages[0].role, Role::Tool);
    assert_eq!(r.messages[0].text(), "5 is correct");
    let r = c
        .interact(ENV, &sid, &Message::assistant("answer: 5"))
        .await
        .unwrap();
    assert_eq!(
        (r.status, r.finish, r.reward),
        (SampleStatus::Completed, true, 1.0)
    );

    // Invalid actions until the turn limit: task_limit_reached, a truncated step.
    let (sid, _) = c.start_sample(&request).await.unwrap();
    let last = loop {
        let r = c
            .interact(ENV, &sid, &Message::assistant(""))
            .await
            .unwrap();
        if r.finish {
            break r;
        }
    };
    assert_eq!(last.status, SampleStatus::TaskLimitReached);
    let step = last.to_step().unwrap();
    assert!(step.truncated && !step.terminated);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_episodes_never_mix() {
    let server = PyServer::start(&[]);
    let episodes = (0..50).map(|index| {
        let client = server.client();
        tokio::spawn(async move {
            let mut env = RemoteEnv::new(client, ENV);
            let obs = env.reset_index(Split::Train, index).await.unwrap();
            binary_search(&mut env, obs.messages[0].text()).await
        })
    });
    let mut solved = 0;
    for episode in episodes.collect::<Vec<_>>() {
        let (reward, success, _) = episode.await.unwrap();
        solved += usize::from(reward == 1.0 && success == Some(true));
    }
    assert_eq!(solved, 50);
    assert!(server.client().list_sessions().await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_and_unknown_sessions() {
    let server = PyServer::start(&[]);
    let c = server.client();
    let mut env = RemoteEnv::new(c.clone(), ENV);
    env.reset_index(Split::Train, 3).await.unwrap();
    let sid = env.session_id().unwrap().to_string();
    assert_eq!(c.list_sessions().await.unwrap()[0].task_id, "train-3");
    let cancelled = c.cancel(ENV, &sid).await.unwrap();
    assert_eq!(
        (cancelled.session_id.as_str(), cancelled.status),
        (sid.as_str(), SampleStatus::Cancelled)
    );
    let err = env
        .step(&Message::assistant("1"))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("404") && err.contains("was cancelled"),
        "{err}"
    );
    let err = c
        .interact(ENV, "424242", &Message::assistant("1"))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("404") && err.contains("unknown session id 424242"),
        "{err}"
    );
    let err = c.cancel(ENV, "424242").await.unwrap_err().to_string();
    assert!(err.contains("404"), "{err}");
    // A dropped RemoteEnv cancels its running session in the background.
    env.reset_index(Split::Train, 4).await.unwrap();
    assert_eq!(c.list_sessions().await.unwrap().len(), 1);
    drop(env);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !c.list_sessions().await.unwrap().is_empty() {
        assert!(
            Instant::now() < deadline,
            "the dropped session was never cancelled"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Sends one raw request; returns the status and the JSON body.
async fn raw(
    base: &str,
    method: &str,
    route: &str,
    session: Option<&str>,
    body: Option<&str>,
) -> (u16, Value) {
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let mut req = http.request(method.parse().unwrap(), format!("{base}{route}"));
    if let Some(s) = session {
        req = req.header("session_id", s);
    }
    if let Some(b) = body {
        req = req
            .header("content-type", "application/json")
            .body(b.to_string());
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// The answers of one server to a fixed list of malformed requests, for env `env` whose
/// task `refused` the env refuses.
async fn error_answers(base: &str, env: &str, refused: Value) -> Vec<(String, u16, Value)> {
    let start = |body: Value| async move {
        raw(
            base,
            "POST",
            "/api/start_sample",
            None,
            Some(&body.to_string()),
        )
        .await
    };
    let act = json!({"messages": [{"role": "assistant", "content": "7"}]}).to_string();
    let mut out = Vec::new();
    let mut push =
        |what: &str, answer: (u16, Value)| out.push((what.to_string(), answer.0, answer.1));
    push(
        "indices",
        raw(
            base,
            "GET",
            &format!("/api/get_indices?name={env}&split=train"),
            None,
            None,
        )
        .await,
    );
    push(
        "indices unknown env",
        raw(base, "GET", "/api/get_indices?name=nope", None, None).await,
    );
    push(
        "indices no name",
        raw(base, "GET", "/api/get_indices", None, None).await,
    );
    push(
        "indices bad split",
        raw(
            base,
            "GET",
            &format!("/api/get_indices?name={env}&split=dev"),
            None,
            None,
        )
        .await,
    );
    push(
        "start not json",
        raw(base, "POST", "/api/start_sample", None, Some("{not json")).await,
    );
    push(
        "start empty",
        raw(base, "POST", "/api/start_sample", None, Some("")).await,
    );
    push("start no name", start(json!({"index": 0})).await);
    push(
        "start bad index",
        start(json!({"name": env, "index": "x"})).await,
    );
    push(
        "start negative index",
        start(json!({"name": env, "index": -1})).await,
    );
    push("start no index", start(json!({"name": env})).await);
    push(
        "start unknown env",
        start(json!({"name": "chess", "index": 0})).await,
    );
    push("start foreign task", start(json!({"name": env, "custom_task": {"env_id": "other", "id": "x", "split": "test", "data": {}}})).await);
    push(
        "start refused task",
        start(json!({"name": env, "custom_task": refused})).await,
    );
    push(
        "start bad split",
        start(json!({"name": env, "index": 0, "split": "dev"})).await,
    );
    push(
        "interact no header",
        raw(base, "POST", "/api/interact", None, Some(&act)).await,
    );
    push(
        "interact unknown",
        raw(base, "POST", "/api/interact", Some("999999"), Some(&act)).await,
    );
    push(
        "interact not an id",
        raw(base, "POST", "/api/interact", Some("abc"), Some(&act)).await,
    );
    push(
        "cancel unknown",
        raw(base, "POST", "/api/cancel", Some("999999"), None).await,
    );
    push(
        "cancel no header",
        raw(base, "POST", "/api/cancel", None, None).await,
    );
    let started = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .post(format!("{base}/api/start_sample"))
        .json(&json!({"name": env, "index": 3}))
        .send()
        .await
        .unwrap();
    let sid = started.headers()["session_id"]
        .to_str()
        .unwrap()
        .to_string();
    let s = Some(sid.as_str());
    push(
        "interact not json",
        raw(base, "POST", "/api/interact", s, Some("[[")).await,
    );
    push(
        "interact no messages",
        raw(base, "POST", "/api/interact", s, Some(r#"{"msgs": []}"#)).await,
    );
    push(
        "interact zero messages",
        raw(
            base,
            "POST",
            "/api/interact",
            s,
            Some(r#"{"messages": []}"#),
        )
        .await,
    );
    push(
        "interact bad role",
        raw(
            base,
            "POST",
            "/api/interact",
            s,
            Some(r#"{"messages": [{"role": "robot"}]}"#),
        )
        .await,
    );
    push("interact object arguments", raw(base, "POST", "/api/interact", s, Some(r#"{"messages": [{"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {}}}]}]}"#)).await);
    push("cancel", raw(base, "POST", "/api/cancel", s, None).await);
    push(
        "interact cancelled",
        raw(base, "POST", "/api/interact", s, Some(&act)).await,
    );
    push(
        "cancel cancelled",
        raw(base, "POST", "/api/cancel", s, None).await,
    );
    push(
        "unknown route",
        raw(base, "GET", "/api/nothing", None, None).await,
    );
    push(
        "wrong method",
        raw(base, "GET", "/api/interact", None, None).await,
    );
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_get_the_same_answers_as_from_the_rust_server() {
    let py = PyServer::start(&[]);
    let (addr, handle) = serve(
        "127.0.0.1:0".parse::<SocketAddr>().unwrap(),
        vec![lookup("arith-calc").unwrap()],
        ServerConfig::default(),
    )
    .await
    .unwrap();
    let mut arith_refused = lookup("arith-calc").unwrap().task(Split::Test, 0);
    arith_refused.data = json!({"expression": "1+"});
    let rust = error_answers(
        &format!("http://{addr}"),
        "arith-calc",
        json!(arith_refused),
    )
    .await;
    let refused = json!(custom_task(10, 11));
    let python = error_answers(&py.base(), ENV, refused).await;
    for ((what, rust_status, rust_body), (_, py_status, py_body)) in rust.iter().zip(&python) {
        assert_eq!(
            rust_status, py_status,
            "{what}: rust {rust_body} / python {py_body}"
        );
        if *rust_status >= 400 && *rust_status != 405 {
            let (r, p) = (
                rust_body["error"].as_str().unwrap(),
                py_body["error"].as_str().unwrap(),
            );
            // The same message, up to the env names and the JSON parsers' wording.
            let head = |m: &str| m.split([':', '`', '(']).next().unwrap_or("").to_string();
            assert_eq!(head(r), head(p), "{what}: rust {r:?} / python {p:?}");
        }
    }
    assert_eq!(rust.len(), python.len());
    assert_eq!(python[0].2, json!((0..200).collect::<Vec<u64>>()));
    handle.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_server_with_its_own_token_registers_with_the_rust_controller_and_heartbeats() {
    let config = ControllerConfig {
        token: Some("tok".into()),
        heartbeat_timeout: Duration::from_millis(1500),
        ..ControllerConfig::default()
    };
    let (addr, controller) = serve_controller("127.0.0.1:0".parse().unwrap(), config)
        .await
        .unwrap();
    let url = format!("http://{addr}");
    let py = PyServer::start(&[
        "--controller",
        &url,
        "--controller-token",
        "tok",
        "--token",
        "py-tok",
        "--heartbeat-secs",
        "0.15",
    ]);
    // Registration is done before the port is printed.
    assert_eq!(controller.controller().worker_count(), 1);
    // The Python server refuses requests without its own token (the controller's included);
    // the controller passes it on, as the worker registered it.
    for token in [None, Some("tok")] {
        let err = match token {
            Some(t) => py.client().with_token(t),
            None => py.client(),
        }
        .list_workers()
        .await
        .unwrap_err()
        .to_string();
        assert!(err.contains("401"), "{err}");
    }
    let own = py
        .client()
        .with_token("py-tok")
        .list_workers()
        .await
        .unwrap();
    assert_eq!(own[0].envs, vec![ENV.to_string()]);
    let client = ProtocolClient::new(&url, &ClientConfig::default())
        .unwrap()
        .with_token("tok");
    let workers = client.list_workers().await.unwrap();
    assert_eq!(workers[0].envs, vec![ENV.to_string()]);
    assert!(workers[0].id.contains(&py.port.to_string()), "{workers:?}");
    assert!(!format!("{workers:?}").contains("py-tok"), "{workers:?}");
    let mut env = RemoteEnv::new(client.clone(), ENV);
    // Heartbeats (ten per timeout) keep the worker alive across several heartbeat timeouts.
    for index in 0..4 {
        let obs = env.reset_index(Split::Test, index).await.unwrap();
        let (reward, _, _) = binary_search(&mut env, obs.messages[0].text()).await;
        assert_eq!(reward, 1.0);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert_eq!(controller.controller().worker_count(), 1);
    // Once the Python server is gone, the controller drops it after the heartbeat timeout.
    drop(py);
    let deadline = Instant::now() + Duration::from_secs(60);
    while controller.controller().worker_count() != 0 {
        assert!(
            Instant::now() < deadline,
            "the dead worker was never dropped"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let err = env
        .reset_index(Split::Test, 0)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("503") && err.contains(ENV), "{err}");
    controller.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_side_plays_a_python_port_exactly_like_the_rust_env() {
    let py = PyServer::start_env("arith_calc:ArithCalc", &[]);
    let local = lookup("arith-calc").unwrap();
    // What the trainer does with a remote env: tasks, turn limit and solver from the local
    // factory, sessions on the (Python) server.
    let remote = RemoteEnvFactory::connect(&py.base(), "arith-calc", &ClientConfig::default())
        .await
        .unwrap();
    let mut solved = 0;
    for (split, index) in (0..15).flat_map(|i| [(Split::Train, i), (Split::Test, i)]) {
        let task = remote.task(split, index);
        let on_python = run_solver_episode(&remote, &mut *remote.solver(0), &task)
            .await
            .unwrap();
        let in_process = run_solver_episode(&*local, &mut *local.solver(0), &task)
            .await
            .unwrap();
        assert_eq!(on_python, in_process, "task {}", task.id);
        solved += usize::from(on_python.success);
    }
    assert_eq!(solved, 30);
    // Malformed actions and wrong answers are scored as in Rust, turn limit included.
    let task = local.task(Split::Test, 5);
    for actions in [
        vec![
            guess("c", "{}"),
            Message::assistant(""),
            Message::user("hi"),
            Message::assistant(task.data["answer"].as_str().unwrap()),
        ],
        vec![Message::assistant("0"), Message::assistant("1")],
        vec![Message::assistant(" "); 5],
    ] {
        let mut steps = Vec::new();
        for make in [&remote as &dyn EnvFactory, &*local] {
            let mut env = make.make();
            env.reset(&task).await.unwrap();
            let mut trace = Vec::new();
            for action in &actions {
                let step = env.step(action).await.unwrap();
                trace.push(format!("{step:?}"));
                if step.done() {
                    break;
                }
            }
            steps.push(trace);
        }
        assert_eq!(steps[0], steps[1], "python vs rust for {actions:?}");
        assert!(steps[0].last().unwrap().contains("terminated: true") || steps[0].len() == 4);
    }
}

#[test]
fn python_unit_tests_pass() {
    let out = python3()
        .args(["-m", "unittest", "discover", "-s", "tests", "-t", "tests"])
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the Python unit tests failed:\n{log}");
    assert!(log.contains("OK"), "{log}");
}
