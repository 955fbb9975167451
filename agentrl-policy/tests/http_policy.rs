//! `HttpPolicy`, `RouterPolicy` and `CrossPolicy` over real HTTP on 127.0.0.1: retries with
//! backoff on 503 (and none on 400), clear errors for malformed answers and unreachable servers,
//! the concurrency limit, least-outstanding routing with sticky sessions, and seeded
//! cross-policy draws that name the policy of every generation.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agentrl_core::{GenerationRequest, Policy, SamplingParams};
use agentrl_policy::{CrossPolicy, HttpPolicy, HttpPolicyConfig, RouterPolicy};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use tokio::sync::Semaphore;

/// A completion answer whose single generated id is `id`.
fn answer(id: u32) -> Value {
    json!({"choices": [{"index": 0, "text": "x", "finish_reason": "length",
        "logprobs": {"tokens": [format!("token_id:{id}")], "token_logprobs": [-0.5]}}],
        "policy_version": 3})
}

/// How a test server behaves.
struct Behaviour {
    /// Answer 503 to this many requests first.
    fail_first: usize,
    /// Status and body to answer instead of a completion (when set).
    fixed: Option<(StatusCode, String)>,
    /// Each request waits for a permit of this gate (when set).
    gate: Option<Arc<Semaphore>>,
    /// Each request waits until this many are in flight, or all `expected` requests have
    /// arrived (or 5 s pass), then lingers a moment so any excess requests would overlap.
    wait_for_inflight: usize,
    expected: usize,
    /// The id every completion answers.
    id: u32,
    hits: AtomicUsize,
    inflight: AtomicUsize,
    max_inflight: AtomicUsize,
}

fn behaviour(id: u32) -> Behaviour {
    Behaviour {
        fail_first: 0,
        fixed: None,
        gate: None,
        wait_for_inflight: 0,
        expected: 0,
        id,
        hits: AtomicUsize::new(0),
        inflight: AtomicUsize::new(0),
        max_inflight: AtomicUsize::new(0),
    }
}

async fn completion(State(b): State<Arc<Behaviour>>, Json(_body): Json<Value>) -> Response {
    let hit = b.hits.fetch_add(1, Ordering::SeqCst);
    let now = b.inflight.fetch_add(1, Ordering::SeqCst) + 1;
    b.max_inflight.fetch_max(now, Ordering::SeqCst);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while b.inflight.load(Ordering::SeqCst) < b.wait_for_inflight
        && b.hits.load(Ordering::SeqCst) < b.expected
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    if b.wait_for_inflight > 0 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    if let Some(gate) = &b.gate {
        gate.acquire().await.unwrap().forget();
    }
    b.inflight.fetch_sub(1, Ordering::SeqCst);
    if hit < b.fail_first {
        return (StatusCode::SERVICE_UNAVAILABLE, "warming up").into_response();
    }
    if let Some((status, body)) = &b.fixed {
        return (*status, body.clone()).into_response();
    }
    Json(answer(b.id)).into_response()
}

/// Serves `b` on 127.0.0.1:0; returns the base URL.
async fn serve(b: Arc<Behaviour>) -> String {
    let app = axum::Router::new()
        .route("/v1/completions", post(completion))
        .with_state(b);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}/v1")
}

/// A client (with `retries`) of a server that answers every request with `status` and `body`;
/// also returns the server's behaviour (to count its hits).
async fn fixed_answer(
    status: StatusCode,
    body: &str,
    retries: u32,
) -> (HttpPolicy, Arc<Behaviour>) {
    let mut b = behaviour(0);
    b.fixed = Some((status, body.to_string()));
    let b = Arc::new(b);
    (client(&serve(b.clone()).await, retries), b)
}

/// The error of one request, as text (the request must fail).
async fn error_of(policy: &HttpPolicy) -> String {
    policy
        .generate(vec![request(None)])
        .await
        .unwrap_err()
        .to_string()
}

fn client(base: &str, retries: u32) -> HttpPolicy {
    let mut c = HttpPolicyConfig::new(base, "m");
    c.max_retries = retries;
    c.initial_backoff = Duration::from_millis(10);
    c.request_timeout = Duration::from_secs(30);
    HttpPolicy::new(c).unwrap()
}

fn request(session: Option<&str>) -> GenerationRequest {
    let r = GenerationRequest::new(vec![1, 2, 3], SamplingParams::greedy(1));
    match session {
        Some(s) => r.with_session(s),
        None => r,
    }
}

async fn one(p: &dyn Policy, r: GenerationRequest) -> agentrl_core::Result<u32> {
    Ok(p.generate(vec![r]).await?[0].ids[0])
}

#[tokio::test]
async fn retries_503_with_backoff_then_succeeds() {
    let mut b = behaviour(7);
    b.fail_first = 2;
    let b = Arc::new(b);
    let policy = client(&serve(b.clone()).await, 4);
    let g = policy.generate(vec![request(None)]).await.unwrap();
    assert_eq!(g[0].ids, vec![7]);
    assert_eq!(g[0].logprobs, vec![-0.5]);
    assert_eq!(g[0].policy_version, 3);
    assert_eq!(policy.attempts(), 3);
    assert_eq!(b.hits.load(Ordering::SeqCst), 3);
    assert_eq!(policy.version(), 3);

    let mut b2 = behaviour(7);
    b2.fail_first = 5;
    let policy = client(&serve(Arc::new(b2)).await, 1);
    let err = error_of(&policy).await;
    assert!(
        err.contains("503") && err.contains("gave up after 2 attempts"),
        "{err}"
    );
    assert!(err.contains("/v1/completions"), "{err}");
}

#[tokio::test]
async fn client_errors_are_not_retried_and_bad_answers_are_named() {
    let bad_prompt = r#"{"error":{"message":"bad prompt"}}"#;
    let (policy, b) = fixed_answer(StatusCode::BAD_REQUEST, bad_prompt, 4).await;
    let err = error_of(&policy).await;
    assert!(
        err.contains("HTTP 400") && err.contains("bad prompt"),
        "{err}"
    );
    assert_eq!(
        b.hits.load(Ordering::SeqCst),
        1,
        "a 400 must not be retried"
    );

    let (policy, _) = fixed_answer(StatusCode::OK, "<html>proxy page</html>", 0).await;
    let err = error_of(&policy).await;
    assert!(
        err.contains("not JSON") && err.contains("proxy page"),
        "{err}"
    );

    let no_logprobs = r#"{"choices":[{"text":"hi","finish_reason":"stop"}]}"#;
    let (policy, _) = fixed_answer(StatusCode::OK, no_logprobs, 0).await;
    let err = error_of(&policy).await;
    assert!(err.contains("choices[0].logprobs"), "{err}");

    let text = r#"{"choices":[{"finish_reason":"stop","logprobs":{"tokens":["hi"],"token_logprobs":[-1.0]}}]}"#;
    let (policy, _) = fixed_answer(StatusCode::OK, text, 0).await;
    let err = error_of(&policy).await;
    assert!(err.contains("return_tokens_as_token_ids"), "{err}");
}

#[tokio::test]
async fn unreachable_servers_are_retried_then_named() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let policy = client(&format!("http://{addr}"), 2);
    let err = error_of(&policy).await;
    assert!(
        err.contains("cannot connect") && err.contains(&addr.to_string()),
        "{err}"
    );
    assert_eq!(policy.attempts(), 3);
}

#[tokio::test]
async fn at_most_max_concurrency_requests_are_in_flight() {
    let mut b = behaviour(1);
    b.wait_for_inflight = 2;
    b.expected = 6;
    let b = Arc::new(b);
    let mut config = HttpPolicyConfig::new(serve(b.clone()).await, "m");
    config.max_concurrency = 2;
    let policy = HttpPolicy::new(config).unwrap();
    let requests = (0..6).map(|_| request(None)).collect();
    let out = policy.generate(requests).await.unwrap();
    assert_eq!(out.len(), 6);
    assert_eq!(b.hits.load(Ordering::SeqCst), 6);
    assert_eq!(b.max_inflight.load(Ordering::SeqCst), 2);
}

async fn wait_until(what: &str, check: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn router_prefers_least_outstanding_and_keeps_sessions_sticky() {
    let gate = Arc::new(Semaphore::new(0));
    let mut slow = behaviour(100);
    slow.gate = Some(gate.clone());
    let slow = Arc::new(slow);
    let fast = Arc::new(behaviour(101));
    let backends: Vec<Arc<dyn Policy>> = vec![
        Arc::new(client(&serve(slow.clone()).await, 0)),
        Arc::new(client(&serve(fast.clone()).await, 0)),
    ];
    let router = Arc::new(RouterPolicy::new(backends).unwrap());

    let r = router.clone();
    let first = tokio::spawn(async move { one(r.as_ref(), request(Some("a"))).await });
    wait_until("session a on backend 0", || {
        router.outstanding() == vec![1, 0]
    })
    .await;
    assert_eq!(router.backend_of("a"), Some(0));
    // Backend 0 is busy: a new session goes to backend 1.
    assert_eq!(one(router.as_ref(), request(Some("b"))).await.unwrap(), 101);
    assert_eq!(router.backend_of("b"), Some(1));
    // Session a's next turn stays on backend 0 although it has more outstanding requests.
    let r = router.clone();
    let again = tokio::spawn(async move { one(r.as_ref(), request(Some("a"))).await });
    wait_until("a's second turn on backend 0", || {
        router.outstanding() == vec![2, 0]
    })
    .await;
    // Session b sticks to backend 1 too.
    assert_eq!(one(router.as_ref(), request(Some("b"))).await.unwrap(), 101);
    gate.add_permits(2);
    assert_eq!(first.await.unwrap().unwrap(), 100);
    assert_eq!(again.await.unwrap().unwrap(), 100);
    assert_eq!(router.outstanding(), vec![0, 0]);
    assert_eq!(slow.hits.load(Ordering::SeqCst), 2);
    assert_eq!(fast.hits.load(Ordering::SeqCst), 2);
    // A batch of session-less requests spreads over both backends.
    gate.add_permits(2);
    let out = router
        .generate((0..4).map(|_| request(None)).collect())
        .await
        .unwrap();
    let on_slow = out.iter().filter(|g| g.ids[0] == 100).count();
    assert_eq!(on_slow, 2, "4 requests over 2 idle backends split 2/2");
}

#[tokio::test]
async fn cross_policy_draws_are_seeded_weighted_and_named() {
    let a: Arc<dyn Policy> = Arc::new(client(&serve(Arc::new(behaviour(10))).await, 0));
    let b: Arc<dyn Policy> = Arc::new(client(&serve(Arc::new(behaviour(20))).await, 0));
    let members = |seed| {
        CrossPolicy::new(
            vec![("a".into(), a.clone(), 0.7), ("b".into(), b.clone(), 0.3)],
            seed,
        )
        .unwrap()
    };
    let cross = members(5);
    let draws: Vec<usize> = (0..10_000)
        .map(|i| cross.choose(&request(Some(&format!("episode-{i}")))))
        .collect();
    let share_a = draws.iter().filter(|&&c| c == 0).count() as f64 / draws.len() as f64;
    assert!((0.67..0.73).contains(&share_a), "share of a: {share_a}");
    let again: Vec<usize> = (0..10_000)
        .map(|i| members(5).choose(&request(Some(&format!("episode-{i}")))))
        .collect();
    assert_eq!(draws, again, "same seed, same draws");
    let other: Vec<usize> = (0..10_000)
        .map(|i| members(6).choose(&request(Some(&format!("episode-{i}")))))
        .collect();
    assert_ne!(draws, other, "another seed, other draws");
    // Without sessions the draws come from the seeded stream, in call order.
    let seq = |seed| {
        let c = members(seed);
        (0..200)
            .map(|_| c.choose(&request(None)))
            .collect::<Vec<_>>()
    };
    assert_eq!(seq(9), seq(9));

    let requests: Vec<GenerationRequest> =
        (0..40).map(|i| request(Some(&format!("s{i}")))).collect();
    let expected: Vec<usize> = requests.iter().map(|r| cross.choose(r)).collect();
    let out = cross.generate(requests).await.unwrap();
    for (g, c) in out.iter().zip(expected) {
        let (name, id) = if c == 0 { ("a", 10) } else { ("b", 20) };
        assert_eq!(g.policy_name.as_deref(), Some(name));
        assert_eq!(g.ids, vec![id]);
    }
    assert!(CrossPolicy::new(vec![("a".into(), a.clone(), -1.0)], 0).is_err());
    assert!(CrossPolicy::new(vec![("a".into(), a, 0.0)], 0).is_err());
}
