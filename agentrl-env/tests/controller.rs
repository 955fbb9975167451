//! The central controller against real env servers on 127.0.0.1: expert episodes through
//! `RemoteEnv`, least-loaded placement, a worker that stops heartbeating, expiry, cancel, the
//! bearer tokens (the controller's, and a worker's own one that it registers) and 128
//! concurrent sessions.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use agentrl_core::{Env, Message, Split, Task};
use agentrl_env::protocol::{
    ControllerConfig, ControllerHandle, ProtocolClient, RegistrationHandle, RemoteEnv,
    RemoteEnvFactory, ServerConfig, ServerHandle, StartSampleRequest, WorkerRegistration,
    register_worker, serve, serve_controller,
};
use agentrl_env::{EnvFactory, lookup, run_solver_episode};
use serde_json::{Value, json};

use crate::common::{
    assert_error, client, expert_sessions_at_once, hostile, loopback, raw, wait_until,
};

/// A worker: an arith-calc env server registered with the controller at `ctl`.
struct TestWorker {
    server: ServerHandle,
    registration: RegistrationHandle,
}

/// An arith-calc env server on a free port, not registered anywhere.
async fn arith_server() -> (SocketAddr, ServerHandle) {
    arith_server_with_token(None).await
}

/// An arith-calc env server on a free port that requires `token` (if any).
async fn arith_server_with_token(token: Option<&str>) -> (SocketAddr, ServerHandle) {
    let config = ServerConfig {
        token: token.map(str::to_string),
        ..ServerConfig::default()
    };
    serve(loopback(), vec![lookup("arith-calc").unwrap()], config)
        .await
        .unwrap()
}

/// The registration of the arith-calc server at `addr` with the controller at `ctl`, sending
/// the controller's `token` and the server's own `worker_token`.
fn registration(
    ctl: SocketAddr,
    addr: SocketAddr,
    token: Option<&str>,
    worker_token: Option<&str>,
) -> WorkerRegistration {
    WorkerRegistration {
        controller: format!("http://{ctl}"),
        address: format!("http://{addr}"),
        envs: vec!["arith-calc".into()],
        capacity: None,
        token: token.map(str::to_string),
        worker_token: worker_token.map(str::to_string),
        interval: Duration::from_millis(50),
    }
}

async fn worker(ctl: SocketAddr, token: Option<&str>) -> TestWorker {
    let (addr, server) = arith_server().await;
    let registration = register_worker(registration(ctl, addr, token, None), None)
        .await
        .unwrap();
    TestWorker {
        server,
        registration,
    }
}

async fn controller(config: ControllerConfig) -> (SocketAddr, ControllerHandle) {
    serve_controller(loopback(), config).await.unwrap()
}

/// A controller that drops a worker after 1.5 s without a heartbeat.
async fn controller_with_short_heartbeat() -> (SocketAddr, ControllerHandle) {
    controller(ControllerConfig {
        heartbeat_timeout: Duration::from_millis(1500),
        ..ControllerConfig::default()
    })
    .await
}

/// `n` arith-calc sessions through the controller at `ctl`, on test tasks `0..n`.
async fn open_sessions(ctl: SocketAddr, n: u64) -> Vec<RemoteEnv> {
    let mut open = Vec::new();
    for index in 0..n {
        let mut env = RemoteEnv::new(client(ctl), "arith-calc");
        env.reset_index(Split::Test, index).await.unwrap();
        open.push(env);
    }
    open
}

/// Starts a session on arith-calc test task `index` by the client's `start_sample`; returns
/// its session id.
async fn start_sample(c: &ProtocolClient, index: u64, split: Option<Split>) -> String {
    let request = StartSampleRequest {
        name: "arith-calc".into(),
        index: Some(index),
        split,
        custom_task: None,
    };
    c.start_sample(&request).await.unwrap().0
}

/// A raw `start_sample` for arith-calc task 0 (with `token`, if any).
async fn raw_start(ctl: SocketAddr, token: Option<&str>) -> (u16, Value) {
    raw(
        reqwest::Method::POST,
        format!("http://{ctl}/api/start_sample"),
        None,
        token,
        Some(json!({"name": "arith-calc", "index": 0})),
    )
    .await
}

/// The answer of task `task` as a final assistant message.
fn answer_of(task: &Task) -> Message {
    Message::assistant(task.data["answer"].as_str().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expert_plays_through_the_controller_and_sessions_spread() {
    let (ctl, handle) = controller(ControllerConfig::default()).await;
    let a = worker(ctl, None).await;
    let b = worker(ctl, None).await;
    assert_eq!(handle.controller().worker_count(), 2);
    let factory =
        RemoteEnvFactory::connect(&format!("http://{ctl}"), "arith-calc", &Default::default())
            .await
            .unwrap();
    assert_eq!(factory.client().list_workers().await.unwrap().len(), 2);
    let indices = factory
        .client()
        .get_indices("arith-calc", Split::Test)
        .await
        .unwrap();
    assert_eq!(indices.len(), 200);
    let local = lookup("arith-calc").unwrap();
    let episodes = 20;
    let mut solved = 0;
    for index in 0..episodes {
        let task = factory.task(Split::Test, index);
        let remote = run_solver_episode(&factory, &mut *factory.solver(0), &task)
            .await
            .unwrap();
        let local_ep = run_solver_episode(&*local, &mut *local.solver(0), &task)
            .await
            .unwrap();
        assert_eq!(remote, local_ep, "remote and local episodes differ");
        solved += usize::from(remote.success);
    }
    let rate = solved as f64 / episodes as f64;
    println!("expert success rate through the controller: {rate:.2}");
    assert_eq!(rate, 1.0);
    assert_eq!(handle.controller().session_count(), 0);

    // Ten open sessions: five on each worker (least loaded first).
    let open = open_sessions(ctl, 10).await;
    assert_eq!(a.server.server().session_count(), 5);
    assert_eq!(b.server.server().session_count(), 5);
    let loads = handle.controller().loads();
    assert!(loads.values().all(|&l| l == 5), "{loads:?}");
    let sessions = client(ctl).list_sessions().await.unwrap();
    assert_eq!(sessions.len(), 10);
    drop(open);
    wait_until("dropped envs cancelled", || {
        a.server.server().session_count() + b.server.server().session_count() == 0
    })
    .await;
    assert_eq!(handle.controller().session_count(), 0);
    handle.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_worker_is_removed_and_its_sessions_answer_worker_lost() {
    let (ctl, handle) = controller_with_short_heartbeat().await;
    let a = worker(ctl, None).await;
    let b = worker(ctl, None).await;
    let base = format!("http://{ctl}");
    let local = lookup("arith-calc").unwrap();
    let mut sessions = Vec::new();
    for index in 0..4u64 {
        let sid = start_sample(&client(ctl), index, Some(Split::Test)).await;
        sessions.push((sid, local.task(Split::Test, index)));
    }
    assert_eq!(a.server.server().session_count(), 2);
    assert_eq!(b.server.server().session_count(), 2);
    // Worker A stops heartbeating (its server keeps running).
    a.registration.stop();
    wait_until("silent worker removed", || {
        handle.controller().worker_count() == 1
    })
    .await;
    let mut lost = 0;
    let mut finished = 0;
    for (sid, task) in &sessions {
        let action = serde_json::to_value(vec![answer_of(task)]).unwrap();
        let answer = raw(
            reqwest::Method::POST,
            format!("{base}/api/interact"),
            Some(sid),
            None,
            Some(json!({ "messages": action })),
        )
        .await;
        if answer.0 == 410 {
            assert_error(&answer, 410, "worker lost");
            lost += 1;
        } else {
            assert_eq!(answer.0, 200, "{answer:?}");
            assert_eq!(answer.1["reward"], 1.0);
            finished += 1;
        }
    }
    assert_eq!((lost, finished), (2, 2));
    // Lost sessions are forgotten, and new sessions all go to B.
    assert_eq!(handle.controller().session_count(), 0);
    let open = open_sessions(ctl, 3).await;
    let workers = client(ctl).list_workers().await.unwrap();
    assert_eq!(workers.len(), 1);
    assert_eq!(a.server.server().session_count(), 2, "nothing new on A");
    assert_eq!(b.server.server().session_count(), 3, "new sessions on B");
    drop(open);
    wait_until("B's sessions cancelled", || {
        b.server.server().session_count() == 0
    })
    .await;
    handle.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_sessions_avoid_a_silent_worker() {
    let (ctl, handle) = controller_with_short_heartbeat().await;
    let a = worker(ctl, None).await;
    let b = worker(ctl, None).await;
    a.registration.stop();
    wait_until("silent worker removed", || {
        handle.controller().worker_count() == 1
    })
    .await;
    let mut open = open_sessions(ctl, 4).await;
    assert_eq!(a.server.server().session_count(), 0);
    assert_eq!(b.server.server().session_count(), 4);
    // Once B stops too, there is no worker: 503 with a message.
    b.registration.stop();
    wait_until("both removed", || handle.controller().worker_count() == 0).await;
    let answer = raw_start(ctl, None).await;
    assert_error(&answer, 503, "no live worker");
    let mut env = open.pop().unwrap();
    let err = env.step(&Message::assistant("1")).await.unwrap_err();
    assert!(err.to_string().contains("worker lost"), "{err}");
    handle.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sessions_expire_and_cancel_works() {
    let config = ControllerConfig {
        session_ttl: Duration::from_millis(800),
        ..ControllerConfig::default()
    };
    let (ctl, handle) = controller(config).await;
    let w = worker(ctl, None).await;
    let c = client(ctl);
    let mut idle = RemoteEnv::new(c.clone(), "arith-calc");
    idle.reset_index(Split::Test, 0).await.unwrap();
    wait_until("idle session expired", || {
        handle.controller().session_count() == 0
    })
    .await;
    let err = idle.step(&Message::assistant("1")).await.unwrap_err();
    assert!(err.to_string().contains("expired"), "{err}");
    assert!(err.to_string().contains("404"), "{err}");
    wait_until("worker told to cancel", || {
        w.server.server().session_count() == 0
    })
    .await;

    // Cancel: the session is gone on the controller and on the worker.
    let local = lookup("arith-calc").unwrap();
    let sid = start_sample(&c, 3, None).await;
    assert_eq!(w.server.server().session_count(), 1);
    let answer = c.cancel("arith-calc", &sid).await.unwrap();
    assert_eq!(answer.session_id, sid);
    assert_eq!(w.server.server().session_count(), 0);
    let err = c
        .interact("arith-calc", &sid, &answer_of(&local.task(Split::Test, 3)))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("cancelled"), "{err}");
    let again = raw(
        reqwest::Method::POST,
        format!("http://{ctl}/api/cancel"),
        Some(&sid),
        None,
        None,
    )
    .await;
    assert_error(&again, 404, "cancelled");
    let missing = raw(
        reqwest::Method::POST,
        format!("http://{ctl}/api/interact"),
        None,
        None,
        Some(json!({"messages": []})),
    )
    .await;
    assert_error(&missing, 400, "session_id");
    handle.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_is_required_everywhere() {
    let config = ControllerConfig {
        token: Some("s3cret".into()),
        ..ControllerConfig::default()
    };
    let (ctl, handle) = controller(config).await;
    let base = format!("http://{ctl}");
    let (get, post) = (reqwest::Method::GET, reqwest::Method::POST);
    let requests = [
        (
            &post,
            "register",
            Some(json!({"address": "127.0.0.1:1", "envs": ["arith-calc"]})),
        ),
        (&post, "heartbeat", Some(json!({"worker_id": "worker-1"}))),
        (&get, "list_workers", None),
        (&get, "list_sessions", None),
        (&get, "get_indices?name=arith-calc", None),
        (
            &post,
            "start_sample",
            Some(json!({"name": "arith-calc", "index": 0})),
        ),
    ];
    for token in [None, Some("wrong")] {
        for (method, route, body) in &requests {
            let url = format!("{base}/api/{route}");
            let answer = raw((*method).clone(), url, None, token, body.clone()).await;
            assert_error(&answer, 401, "");
        }
    }
    // A worker without the token cannot join; with it, it can.
    let (addr, server) = arith_server().await;
    let mut reg = WorkerRegistration {
        address: addr.to_string(),
        capacity: Some(8),
        ..registration(ctl, addr, None, None)
    };
    let err = register_worker(reg.clone(), None).await.err().unwrap();
    assert!(err.to_string().contains("401"), "{err}");
    reg.token = Some("s3cret".into());
    let _registration = register_worker(reg, None).await.unwrap();
    assert_eq!(handle.controller().worker_count(), 1);
    // A client without the token is refused; with it, the expert plays.
    let plain = RemoteEnvFactory::new(client(ctl), lookup("arith-calc").unwrap());
    let task = plain.task(Split::Test, 5);
    let err = run_solver_episode(&plain, &mut *plain.solver(0), &task)
        .await
        .err()
        .unwrap();
    assert!(err.to_string().contains("401"), "{err}");
    let authed = RemoteEnvFactory::new(
        client(ctl).with_token("s3cret"),
        lookup("arith-calc").unwrap(),
    );
    let episode = run_solver_episode(&authed, &mut *authed.solver(0), &task)
        .await
        .unwrap();
    assert!(episode.success);
    assert_eq!(server.server().session_count(), 0);
    handle.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_with_its_own_token_serves_behind_a_controller_with_another() {
    let config = ControllerConfig {
        token: Some("ctl-tok".into()),
        ..ControllerConfig::default()
    };
    let (ctl, handle) = controller(config).await;
    let (addr, server) = arith_server_with_token(Some("worker-tok")).await;
    // The worker refuses requests without its own token, the controller's included.
    for token in [None, Some("ctl-tok")] {
        assert_error(&raw_start(addr, token).await, 401, "");
    }
    let reg = registration(ctl, addr, Some("ctl-tok"), Some("worker-tok"));
    let shown = format!("{reg:?}");
    assert!(
        !shown.contains("ctl-tok") && !shown.contains("worker-tok"),
        "{shown}"
    );
    let _registration = register_worker(reg, None).await.unwrap();
    // A client with the controller's token plays full episodes through it.
    let c = client(ctl).with_token("ctl-tok");
    let indices = c.get_indices("arith-calc", Split::Test).await.unwrap();
    assert_eq!(indices.len(), 200);
    let factory = RemoteEnvFactory::new(c.clone(), lookup("arith-calc").unwrap());
    for index in 0..3 {
        let task = factory.task(Split::Test, index);
        let episode = run_solver_episode(&factory, &mut *factory.solver(0), &task)
            .await
            .unwrap();
        assert!(episode.success, "task {index}: {episode:?}");
    }
    // Cancelling goes through too; the worker is left with no session.
    let id = start_sample(&c, 7, None).await;
    assert_eq!(server.server().session_count(), 1);
    c.cancel("arith-calc", &id).await.unwrap();
    assert_eq!(server.server().session_count(), 0);
    // The listing names the worker, never its token.
    let listing = raw(
        reqwest::Method::GET,
        format!("http://{ctl}/api/list_workers"),
        None,
        Some("ctl-tok"),
        None,
    )
    .await;
    assert_eq!(listing.0, 200, "{listing:?}");
    assert!(
        listing.1.to_string().contains(&addr.to_string()),
        "{listing:?}"
    );
    assert!(!listing.1.to_string().contains("worker-tok"), "{listing:?}");
    handle.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_registered_with_the_wrong_token_is_a_clear_502() {
    let (ctl, handle) = controller(ControllerConfig::default()).await;
    let (addr, server) = arith_server_with_token(Some("right")).await;
    let reg = registration(ctl, addr, None, Some("wrong"));
    let _registration = register_worker(reg, None).await.unwrap();
    let (status, body) = raw_start(ctl, None).await;
    assert_eq!(status, 502, "{body}");
    let message = body["error"].as_str().unwrap_or_default();
    for needle in [addr.to_string().as_str(), "401", "worker_token"] {
        assert!(
            message.contains(needle),
            "{needle:?} missing in {message:?}"
        );
    }
    assert!(!message.contains("right"), "the token leaked: {message}");
    let indices = raw(
        reqwest::Method::GET,
        format!("http://{ctl}/api/get_indices?name=arith-calc"),
        None,
        None,
        None,
    )
    .await;
    assert_error(&indices, 502, "worker_token");
    assert_eq!(server.server().session_count(), 0);
    assert_eq!(handle.controller().session_count(), 0);
    // A blank worker token is refused at registration.
    let blank = registration(ctl, addr, None, Some(" "));
    let err = register_worker(blank, None)
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("422") && err.contains("worker_token"), "{err}");
    handle.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_sessions_through_the_controller_never_mix() {
    let (ctl, handle) = controller(ControllerConfig::default()).await;
    let a = worker(ctl, None).await;
    let b = worker(ctl, None).await;
    let factory = Arc::new(RemoteEnvFactory::new(
        client(ctl),
        lookup("arith-calc").unwrap(),
    ));
    let n = 128u64;
    let solved = expert_sessions_at_once(factory, n, "through the controller (2 workers)").await;
    assert_eq!(solved, n as usize);
    assert_eq!(handle.controller().session_count(), 0);
    assert_eq!(a.server.server().session_count(), 0);
    assert_eq!(b.server.server().session_count(), 0);
    handle.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_worker_requests_get_json_4xx_and_a_forgotten_worker_registers_again() {
    let (ctl, handle) = controller(ControllerConfig::default()).await;
    let base = format!("http://{ctl}");
    let post = |route: &str, body: Value| {
        raw(
            reqwest::Method::POST,
            format!("{base}/{route}"),
            None,
            None,
            Some(body),
        )
    };
    for (body, needle) in [
        (json!({"address": "", "envs": ["arith-calc"]}), "address"),
        (json!({"address": "127.0.0.1:1", "envs": []}), "env"),
        (json!({"address": "127.0.0.1:1"}), "envs"),
        (
            json!({"address": "127.0.0.1:1", "envs": ["x"], "capacity": 0}),
            "capacity",
        ),
    ] {
        assert_error(&post("api/register", body).await, 422, needle);
    }
    assert_error(
        &post("api/heartbeat", json!({"worker_id": "worker-99"})).await,
        404,
        "register again",
    );
    assert_error(&post("api/nope", json!({})).await, 404, "no such route");
    assert_error(&raw_start(ctl, None).await, 503, "no live worker");

    // The worker restarts at the same address: the controller drops the old registration, and
    // the old registration's heartbeat task registers again under a new id.
    let w = worker(ctl, None).await;
    let first = w.registration.worker_id();
    let mut env = RemoteEnv::new(client(ctl), "arith-calc");
    env.reset_index(Split::Test, 0).await.unwrap();
    let address = client(ctl).list_workers().await.unwrap()[0]
        .id
        .split_once('@')
        .unwrap()
        .1
        .to_string();
    let again = post(
        "api/register",
        json!({"address": address, "envs": ["arith-calc"]}),
    )
    .await;
    assert_eq!(again.0, 200, "{again:?}");
    let err = env.step(&Message::assistant("1")).await.unwrap_err();
    assert!(err.to_string().contains("410"), "{err}");
    let restarted_id = again.1["worker_id"].as_str().unwrap();
    wait_until("the worker registered again", || {
        let id = w.registration.worker_id();
        id != first && id != restarted_id
    })
    .await;
    assert_eq!(handle.controller().worker_count(), 1);
    handle.shutdown().await.unwrap();
}

/// A registered worker whose address nothing listens on any more (a server that died between
/// heartbeats).
async fn register_dead_worker(ctl: SocketAddr) -> String {
    let listener = std::net::TcpListener::bind(loopback()).unwrap();
    let dead = listener.local_addr().unwrap();
    drop(listener);
    let answer = raw(
        reqwest::Method::POST,
        format!("http://{ctl}/api/register"),
        None,
        None,
        Some(json!({"address": format!("http://{dead}"), "envs": ["arith-calc"]})),
    )
    .await;
    assert_eq!(answer.0, 200, "{answer:?}");
    answer.1["worker_id"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_sessions_skip_a_worker_that_cannot_be_reached() {
    let (ctl, handle) = controller(ControllerConfig::default()).await;
    // Registered first, so with equal loads it is the first choice.
    register_dead_worker(ctl).await;
    let live = worker(ctl, None).await;
    let open = open_sessions(ctl, 3).await;
    assert_eq!(live.server.server().session_count(), 3);
    assert_eq!(handle.controller().session_count(), 3);
    drop(open);
    handle.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_unreachable_workers_give_502_with_the_reason() {
    let (ctl, handle) = controller(ControllerConfig::default()).await;
    register_dead_worker(ctl).await;
    register_dead_worker(ctl).await;
    let answer = raw_start(ctl, None).await;
    assert_error(
        &answer,
        502,
        "2 worker(s) for env `arith-calc` could not be reached",
    );
    assert_eq!(handle.controller().session_count(), 0);
    handle.shutdown().await.unwrap();
}

/// Hostile requests to the controller (a 100 MB body and a 10,000-deep JSON array on every
/// route that reads a body, oversized heads) are 4xx answers, not a crash or an out-of-memory,
/// and the controller goes on serving: the session opened before them plays to its end and a
/// new one starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_bodies_deep_json_and_oversized_heads_are_4xx_and_the_controller_survives() {
    let (ctl, handle) = controller(ControllerConfig::default()).await;
    let w = worker(ctl, None).await;
    let base = format!("http://{ctl}");
    let factory = RemoteEnvFactory::new(client(ctl), lookup("arith-calc").unwrap());
    let task = factory.task(Split::Test, 3);
    let mut env = RemoteEnv::new(client(ctl), "arith-calc");
    env.reset(&task).await.unwrap();
    let session = client(ctl).list_sessions().await.unwrap()[0]
        .session_id
        .clone();
    let with_session = [("session_id", session.as_str())];
    let routes: [(&str, &[(&str, &str)]); 4] = [
        ("start_sample", &[]),
        ("interact", &with_session),
        ("register", &[]),
        ("heartbeat", &[]),
    ];
    for (route, headers) in routes {
        let url = format!("{base}/api/{route}");
        hostile::assert_huge_body_refused(&url, headers).await;
        // Parsed by the controller itself, except interact's body, which the worker that holds
        // the session parses (its 4xx comes back as it is).
        let answer = hostile::assert_deep_json_refused(&url, headers).await;
        let message = answer.1["error"].as_str().unwrap_or_default();
        assert!(!message.is_empty(), "{route}: {answer:?}");
    }
    // Deep where any JSON value is accepted (a custom task's data): the parser's recursion
    // limit stops it.
    let task_json = format!(
        r#"{{"name": "arith-calc", "custom_task": {{"env_id": "arith-calc", "id": "deep",
            "split": "test", "data": {}}}}}"#,
        hostile::deep_array(hostile::DEEP)
    );
    let answer =
        hostile::assert_json_4xx(&format!("{base}/api/start_sample"), &[], task_json).await;
    assert_eq!(answer.0, 400, "{answer:?}");
    let message = answer.1["error"].as_str().unwrap_or_default();
    assert!(message.contains("recursion limit"), "{answer:?}");
    hostile::assert_oversized_heads_refused(
        reqwest::Method::GET,
        &format!("{base}/api/list_workers"),
        &[],
    )
    .await;
    hostile::assert_oversized_heads_refused(
        reqwest::Method::POST,
        &format!("{base}/api/interact"),
        &with_session,
    )
    .await;
    // Still serving: the session opened before plays on, a new one starts, the worker is kept.
    let step = env.step(&answer_of(&task)).await.unwrap();
    assert!(step.done(), "{step:?}");
    let (status, answer) = raw_start(ctl, None).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(handle.controller().worker_count(), 1);
    assert_eq!(w.server.server().session_count(), 1);
    handle.shutdown().await.unwrap();
}
