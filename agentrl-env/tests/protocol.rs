//! The env HTTP protocol against real servers on 127.0.0.1: episodes through `RemoteEnv`,
//! every malformed request, malformed actions, expiry, 200 concurrent sessions, a panicking env
//! and a server that dies mid-episode.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentrl_core::{Env, Error, Message, Observation, Split, Step, Task, ToolCall};
use agentrl_env::protocol::{
    ClientConfig, InteractResponse, ProtocolClient, RemoteEnv, RemoteEnvFactory, SampleStatus,
    ServerConfig, ServerHandle, serve,
};
use agentrl_env::{EnvFactory, Solver, TurnLimit, lookup, run_solver_episode};
use async_trait::async_trait;
use serde_json::{Value, json};

use crate::common::{
    assert_error, client, expert_sessions_at_once, hostile, loopback, raw_text, wait_until,
};

async fn arith_server(config: ServerConfig) -> (SocketAddr, ServerHandle) {
    serve(loopback(), vec![lookup("arith-calc").unwrap()], config)
        .await
        .unwrap()
}

async fn start(http: &reqwest::Client, base: &str, body: Value) -> String {
    let resp = http
        .post(format!("{base}/api/start_sample"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    resp.headers()["session_id"].to_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expert_solves_every_task_through_remote_env() {
    let (addr, handle) = arith_server(ServerConfig::default()).await;
    let factory =
        RemoteEnvFactory::connect(&format!("http://{addr}"), "arith-calc", &Default::default())
            .await
            .unwrap();
    let local = lookup("arith-calc").unwrap();
    let mut solved = 0;
    for index in 0..20 {
        let task = factory.task(Split::Test, index);
        let mut expert = factory.solver(0);
        let remote = run_solver_episode(&factory, &mut *expert, &task)
            .await
            .unwrap();
        let local_ep = run_solver_episode(&*local, &mut *local.solver(0), &task)
            .await
            .unwrap();
        assert_eq!(remote, local_ep, "remote and local episodes differ");
        solved += usize::from(remote.success);
    }
    assert_eq!(solved, 20, "success rate {}", solved as f64 / 20.0);

    // Starting by index gives the server's generated task, the same as the local one.
    let mut env = RemoteEnv::new(client(addr), "arith-calc");
    let obs = env.reset_index(Split::Test, 7).await.unwrap();
    let local_obs = local
        .make()
        .reset(&local.task(Split::Test, 7))
        .await
        .unwrap();
    assert_eq!(obs, local_obs);
    drop(env);
    // The dropped env cancels its running session in the background.
    wait_until("sessions cancelled", || {
        handle.server().session_count() == 0
    })
    .await;
    handle.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_get_json_4xx_with_a_message() {
    use reqwest::Method;
    let (addr, handle) = arith_server(ServerConfig::default()).await;
    let base = format!("http://{addr}");
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let post = |route: &str, session: Option<&str>, body: Option<&str>| {
        let url = format!("{base}{route}");
        let (session, body) = (session.map(String::from), body.map(String::from));
        async move { raw_text(Method::POST, url, session.as_deref(), None, body.as_deref()).await }
    };

    // get_indices
    let ok = raw_text(
        Method::GET,
        format!("{base}/api/get_indices?name=arith-calc"),
        None,
        None,
        None,
    )
    .await;
    assert_eq!(ok.0, 200);
    assert_eq!(ok.1.as_array().unwrap().len(), 200);
    assert_eq!(ok.1[0], 0);
    let train = raw_text(
        Method::GET,
        format!("{base}/api/get_indices?name=arith-calc&split=train"),
        None,
        None,
        None,
    )
    .await;
    assert_eq!(train.0, 200);
    assert_error(
        &raw_text(
            Method::GET,
            format!("{base}/api/get_indices?name=nope"),
            None,
            None,
            None,
        )
        .await,
        400,
        "arith-calc",
    );
    assert_error(
        &raw_text(
            Method::GET,
            format!("{base}/api/get_indices"),
            None,
            None,
            None,
        )
        .await,
        400,
        "name",
    );
    assert_error(
        &raw_text(
            Method::GET,
            format!("{base}/api/get_indices?name=arith-calc&split=dev"),
            None,
            None,
            None,
        )
        .await,
        400,
        "split",
    );

    // start_sample
    assert_error(
        &post("/api/start_sample", None, Some("{not json")).await,
        400,
        "invalid start_sample body",
    );
    assert_error(
        &post("/api/start_sample", None, Some("")).await,
        400,
        "start_sample",
    );
    assert_error(
        &post("/api/start_sample", None, Some(r#"{"index": 0}"#)).await,
        422,
        "name",
    );
    assert_error(
        &post(
            "/api/start_sample",
            None,
            Some(r#"{"name": "arith-calc", "index": "x"}"#),
        )
        .await,
        422,
        "expected u64",
    );
    assert_error(
        &post("/api/start_sample", None, Some(r#"{"name": "arith-calc"}"#)).await,
        422,
        "custom_task",
    );
    let unknown = post(
        "/api/start_sample",
        None,
        Some(r#"{"name": "chess", "index": 0}"#),
    )
    .await;
    assert_error(&unknown, 400, "unknown env `chess`");
    assert_error(&unknown, 400, "arith-calc");
    let mut foreign = lookup("arith-calc").unwrap().task(Split::Test, 0);
    foreign.env_id = "other".into();
    let body = json!({"name": "arith-calc", "custom_task": foreign}).to_string();
    assert_error(
        &post("/api/start_sample", None, Some(&body)).await,
        400,
        "belongs to env `other`",
    );
    let mut broken = lookup("arith-calc").unwrap().task(Split::Test, 0);
    broken.data = json!({"expression": "1+"});
    let body = json!({"name": "arith-calc", "custom_task": broken}).to_string();
    assert_error(
        &post("/api/start_sample", None, Some(&body)).await,
        422,
        "refused custom_task",
    );

    // interact / cancel on sessions that do not exist
    let action = json!({"messages": [{"role": "assistant", "content": "42"}]}).to_string();
    assert_error(
        &post("/api/interact", None, Some(&action)).await,
        400,
        "session_id",
    );
    assert_error(
        &post("/api/interact", Some("999999"), Some(&action)).await,
        404,
        "unknown session id 999999",
    );
    assert_error(
        &post("/api/interact", Some("abc"), Some(&action)).await,
        404,
        "unknown session",
    );
    assert_error(
        &post("/api/cancel", Some("999999"), None).await,
        404,
        "unknown session",
    );
    assert_error(&post("/api/cancel", None, None).await, 400, "session_id");

    // bad interact bodies on a live session
    let sid = start(&http, &base, json!({"name": "arith-calc", "index": 3})).await;
    assert_error(
        &post("/api/interact", Some(&sid), Some("[[")).await,
        400,
        "invalid interact body",
    );
    assert_error(
        &post("/api/interact", Some(&sid), Some(r#"{"msgs": []}"#)).await,
        422,
        "messages",
    );
    assert_error(
        &post("/api/interact", Some(&sid), Some(r#"{"messages": []}"#)).await,
        422,
        "exactly one",
    );
    let two = json!({"messages": [{"role": "assistant", "content": "1"}, {"role": "assistant", "content": "2"}]}).to_string();
    assert_error(
        &post("/api/interact", Some(&sid), Some(&two)).await,
        422,
        "exactly one",
    );
    assert_error(
        &post(
            "/api/interact",
            Some(&sid),
            Some(r#"{"messages": [{"role": "robot"}]}"#),
        )
        .await,
        422,
        "robot",
    );

    // interact after cancel
    let cancelled = post("/api/cancel", Some(&sid), None).await;
    assert_eq!(cancelled.0, 200);
    assert_eq!(cancelled.1["status"], "cancelled");
    assert_error(
        &post("/api/interact", Some(&sid), Some(&action)).await,
        404,
        "was cancelled",
    );
    assert_error(
        &post("/api/cancel", Some(&sid), None).await,
        404,
        "was cancelled",
    );

    // interact after completion
    let sid = start(&http, &base, json!({"name": "arith-calc", "index": 4})).await;
    let done = post("/api/interact", Some(&sid), Some(&action)).await;
    assert_eq!(done.0, 200);
    assert_eq!(done.1["finish"], true);
    assert_eq!(done.1["status"], "completed");
    assert_error(
        &post("/api/interact", Some(&sid), Some(&action)).await,
        409,
        "already finished (completed)",
    );

    // unknown route
    assert_error(
        &raw_text(Method::GET, format!("{base}/api/nothing"), None, None, None).await,
        404,
        "no such route",
    );

    // listings
    let workers = raw_text(
        Method::GET,
        format!("{base}/api/list_workers"),
        None,
        None,
        None,
    )
    .await;
    assert_eq!(workers.0, 200);
    assert_eq!(workers.1[0]["envs"], json!(["arith-calc"]));
    let sessions = raw_text(
        Method::GET,
        format!("{base}/api/list_sessions"),
        None,
        None,
        None,
    )
    .await;
    assert_eq!(sessions, (200, json!([])));
    handle.shutdown().await.unwrap();
}

fn tool_action(name: &str, arguments: &str) -> Message {
    let mut call = ToolCall::new("call_0", name, &json!({}));
    call.function.arguments = arguments.to_string();
    Message::assistant_tool_calls(None, vec![call])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_actions_are_error_observations_and_the_episode_goes_on() {
    let (addr, handle) = arith_server(ServerConfig::default()).await;
    let c = client(addr);
    let local = lookup("arith-calc").unwrap();
    let task = local.task(Split::Test, 11);
    let (sid, _) = c
        .start_sample(&agentrl_env::protocol::StartSampleRequest {
            name: "arith-calc".into(),
            index: None,
            split: None,
            custom_task: Some(task.clone()),
        })
        .await
        .unwrap();
    let bad_actions = [
        tool_action("calculator", "{\"expression\": "),
        tool_action("teleport", "{}"),
        Message::assistant(""),
    ];
    for action in &bad_actions {
        let r: InteractResponse = c.interact("arith-calc", &sid, action).await.unwrap();
        assert_eq!(r.status, SampleStatus::AgentInvalidAction, "{r:?}");
        assert!(!r.finish);
        assert!(r.metrics.invalid_action.is_some());
        assert_eq!(r.messages.len(), 1, "one error observation");
        assert!(r.messages[0].text().contains("error"), "{r:?}");
    }
    let answer = task.data["answer"].as_str().unwrap();
    let r = c
        .interact("arith-calc", &sid, &Message::assistant(answer))
        .await
        .unwrap();
    assert_eq!(
        (r.status, r.finish, r.reward),
        (SampleStatus::Completed, true, 1.0)
    );

    // Four invalid actions exhaust the turn limit: task_limit_reached on the fourth.
    let mut env = RemoteEnv::new(c.clone(), "arith-calc");
    env.reset(&task).await.unwrap();
    let mut last: Option<Step> = None;
    for _ in 0..local.max_turns() {
        let sid = env.session_id().unwrap().to_string();
        let r = c
            .interact("arith-calc", &sid, &Message::assistant(" "))
            .await
            .unwrap();
        if r.finish {
            assert_eq!(r.status, SampleStatus::TaskLimitReached);
            last = r.to_step();
            break;
        }
    }
    let last = last.unwrap();
    assert!(last.truncated && !last.terminated);
    drop(env);
    handle.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sessions_expire() {
    let config = ServerConfig {
        session_ttl: Duration::from_millis(800),
        ..ServerConfig::default()
    };
    let (addr, handle) = arith_server(config).await;
    let c = client(addr);
    let mut idle = RemoteEnv::new(c.clone(), "arith-calc");
    idle.reset_index(Split::Test, 0).await.unwrap();
    let mut busy = RemoteEnv::new(c.clone(), "arith-calc");
    busy.reset_index(Split::Test, 1).await.unwrap();
    assert_eq!(c.list_sessions().await.unwrap().len(), 2);
    // Keep `busy` in use (invalid actions do not end it) while `idle` sits.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let sessions = c.list_sessions().await.unwrap();
        if sessions.len() == 1 {
            assert_eq!(Some(sessions[0].session_id.as_str()), busy.session_id());
            break;
        }
        assert!(Instant::now() < deadline, "idle session never expired");
        tokio::time::sleep(Duration::from_millis(40)).await;
        // Using `busy` (here: restarting its episode) keeps it alive.
        busy.reset_index(Split::Test, 1).await.unwrap();
    }
    let err = idle.step(&Message::assistant("1")).await.unwrap_err();
    assert!(matches!(err, Error::Env { .. }));
    assert!(err.to_string().contains("expired"), "{err}");
    assert!(err.to_string().contains("404"), "{err}");
    handle.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_concurrent_sessions_never_mix() {
    let (addr, handle) = arith_server(ServerConfig::default()).await;
    let factory = Arc::new(RemoteEnvFactory::new(
        client(addr),
        lookup("arith-calc").unwrap(),
    ));
    let n = 200u64;
    let solved = expert_sessions_at_once(factory, n, "on one env server").await;
    assert_eq!(solved, n as usize);
    assert_eq!(
        handle.server().session_count(),
        0,
        "finished sessions are removed"
    );
    handle.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_sessions_is_enforced() {
    let config = ServerConfig {
        max_sessions: 2,
        ..ServerConfig::default()
    };
    let (addr, handle) = arith_server(config).await;
    let c = client(addr);
    let mut envs: Vec<RemoteEnv> = (0..2)
        .map(|_| RemoteEnv::new(c.clone(), "arith-calc"))
        .collect();
    for env in &mut envs {
        env.reset_index(Split::Test, 0).await.unwrap();
    }
    let mut third = RemoteEnv::new(c.clone(), "arith-calc");
    let err = third.reset_index(Split::Test, 0).await.unwrap_err();
    assert!(
        err.to_string().contains("503") && err.to_string().contains("maximum of 2"),
        "{err}"
    );
    envs[0].step(&Message::assistant("0")).await.unwrap(); // finishes: frees a slot
    third.reset_index(Split::Test, 0).await.unwrap();
    drop((envs, third));
    handle.shutdown().await.unwrap();
}

/// An env that panics on its first step, to check the server survives it.
struct Panicky;

#[async_trait]
impl Env for Panicky {
    fn id(&self) -> &str {
        "panicky"
    }
    async fn reset(&mut self, _task: &Task) -> agentrl_core::Result<Observation> {
        Ok(Observation {
            messages: vec![Message::user("go")],
            tools: Vec::new(),
        })
    }
    async fn step(&mut self, action: &Message) -> agentrl_core::Result<Step> {
        if action.text() == "fail" {
            return Err(Error::env("panicky", "the env broke"));
        }
        panic!("the env panicked on purpose");
    }
}

struct PanickyFactory;

impl EnvFactory for PanickyFactory {
    fn id(&self) -> &str {
        "panicky"
    }
    fn task(&self, split: Split, index: u64) -> Task {
        Task {
            env_id: "panicky".into(),
            id: format!("{split}-{index}"),
            split,
            data: Value::Null,
        }
    }
    fn make(&self) -> Box<dyn Env> {
        Box::new(TurnLimit::new(Panicky, 3))
    }
    fn max_turns(&self) -> usize {
        3
    }
    fn solver(&self, _seed: u64) -> Box<dyn Solver> {
        unimplemented!("not needed")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn env_errors_and_panics_are_task_errors() {
    let envs: Vec<Arc<dyn EnvFactory>> =
        vec![Arc::new(PanickyFactory), lookup("arith-calc").unwrap()];
    let (addr, handle) = serve(loopback(), envs, ServerConfig::default())
        .await
        .unwrap();
    let c = client(addr);
    let task = PanickyFactory.task(Split::Test, 0);
    for (action, needle) in [("fail", "the env broke"), ("boom", "panicked")] {
        let mut env = RemoteEnv::new(c.clone(), "panicky");
        env.reset(&task).await.unwrap();
        let sid = env.session_id().unwrap().to_string();
        let err = env.step(&Message::assistant(action)).await.unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("task_error") && text.contains(needle),
            "{text}"
        );
        // The session is gone with its reason; the server still serves.
        let late = c
            .interact("panicky", &sid, &Message::assistant("x"))
            .await
            .unwrap_err();
        assert!(
            late.to_string().contains("409") && late.to_string().contains("task_error"),
            "{late}"
        );
    }
    assert_eq!(
        c.get_indices("arith-calc", Split::Train)
            .await
            .unwrap()
            .len(),
        200
    );
    handle.shutdown().await.unwrap();
}

#[test]
fn a_dead_server_mid_episode_is_a_clear_env_error() {
    // The server runs on its own runtime, so that dropping the runtime kills it like a crash
    // (listener and open connections gone at once).
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let (addr, _handle) = arith_server(ServerConfig::default()).await;
            addr_tx.send(addr).unwrap();
            let _ = stop_rx.await;
        });
        rt.shutdown_background();
    });
    let addr = addr_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let config = ClientConfig {
            request_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(2),
        };
        let c = ProtocolClient::new(&addr.to_string(), &config).unwrap();
        let factory = lookup("arith-calc").unwrap();
        let task = factory.task(Split::Test, 5);
        let mut env = RemoteEnv::new(c, "arith-calc");
        let obs = env.reset(&task).await.unwrap();
        let mut expert = factory.solver(0);
        let mut history = obs.messages;
        let action = expert.act(&task, &history);
        history.push(action.clone());
        let step = env.step(&action).await.unwrap();
        assert!(!step.done());
        history.extend(step.messages);

        stop_tx.send(()).unwrap();
        server.join().unwrap();

        let action = expert.act(&task, &history);
        let err = env.step(&action).await.unwrap_err();
        assert!(matches!(err, Error::Env { .. }), "{err}");
        let text = err.to_string();
        // Refused at once, not left to the 5 s request timeout.
        assert!(!text.contains("timed out"), "{text}");
        assert!(text.contains("/api/interact"), "{text}");
        assert!(
            text.contains("unreachable") || text.contains("connection"),
            "{text}"
        );
        // The episode is over on this side: no further step on a lost session.
        let again = env.step(&action).await.unwrap_err();
        assert!(again.to_string().contains("before reset"), "{again}");
        // Starting a new episode fails clearly too.
        let err = env.reset(&task).await.unwrap_err().to_string();
        assert!(err.contains("/api/start_sample"), "{err}");
        assert!(
            err.contains("unreachable") || err.contains("connection"),
            "{err}"
        );
    });
}

/// Hostile requests: a 100 MB body is refused with 413 before it is read whole, a 10,000-deep
/// JSON array is a 400 (not a stack overflow), oversized heads (a 1 MiB header, 10,000
/// headers, a 1 MiB URL) are 431/414, and the server answers normally afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_and_deeply_nested_bodies_are_4xx_and_the_server_survives() {
    use reqwest::Method;
    let (addr, handle) = arith_server(ServerConfig::default()).await;
    let base = format!("http://{addr}");
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let huge = vec![b' '; 100 << 20];
    match http
        .post(format!("{base}/api/start_sample"))
        .header("content-type", "application/json")
        .body(huge)
        .send()
        .await
    {
        Ok(resp) => assert_eq!(resp.status(), 413, "a 100 MB body"),
        // The server may answer 413 and close before the client has sent everything.
        Err(e) => assert!(e.is_request() || e.is_body(), "a 100 MB body: {e}"),
    }
    let deep = "[".repeat(10_000) + &"]".repeat(10_000);
    for route in ["/api/start_sample", "/api/interact"] {
        let answer = raw_text(
            Method::POST,
            format!("{base}{route}"),
            Some("1"),
            None,
            Some(&deep),
        )
        .await;
        assert!(
            (400..500).contains(&answer.0),
            "{route} with a 10,000-deep array: {answer:?}"
        );
    }
    hostile::assert_oversized_heads_refused(Method::GET, &format!("{base}/api/list_sessions"), &[])
        .await;
    hostile::assert_oversized_heads_refused(Method::POST, &format!("{base}/api/start_sample"), &[])
        .await;
    let session = start(&http, &base, json!({"name": "arith-calc", "index": 0})).await;
    assert!(!session.is_empty());
    drop(handle);
}

#[tokio::test]
async fn an_answer_larger_than_the_cap_is_refused_not_buffered() {
    // A hostile "env server" that answers every request with 20 MiB (and one that does not
    // say how long its answer is, so only the chunk-by-chunk count can stop it).
    for declare_length in [true, false] {
        let app = axum::Router::new().fallback(move || async move {
            let huge = vec![b' '; 20 << 20];
            if declare_length {
                axum::response::Response::new(axum::body::Body::from(huge))
            } else {
                let stream = futures_util::stream::iter(
                    huge.chunks(1 << 16)
                        .map(|c| Ok::<_, std::io::Error>(axum::body::Bytes::copy_from_slice(c)))
                        .collect::<Vec<_>>(),
                );
                axum::response::Response::new(axum::body::Body::from_stream(stream))
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move { axum::serve(listener, app).await });
        let client = ProtocolClient::new(&addr.to_string(), &ClientConfig::default()).unwrap();
        let err = client
            .get_indices("arith-calc", Split::Test)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("larger than") && err.contains("MiB"),
            "{declare_length}: {err}"
        );
        server.abort();
    }
}
