//! Helpers shared by the env tests: the env contract checks (`contract`), and for the protocol
//! and controller tests addresses, clients, raw HTTP requests, error assertions, polling,
//! many expert sessions played at once, and hostile requests (`hostile`).
#![allow(dead_code)]

pub mod contract;
#[cfg(feature = "protocol")]
pub mod hostile;
#[cfg(feature = "protocol")]
mod served;

// Not every test that includes this module uses them.
#[cfg(feature = "protocol")]
#[allow(unused_imports)]
pub use served::{client, expert_sessions_at_once};

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use agentrl_core::{Message, Observation, Role, Task};
use serde_json::Value;

/// 127.0.0.1 with a port picked by the system.
pub fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// Sends a request with a raw text body; returns the status and the JSON answer (which every
/// answer of the protocol must be).
pub async fn raw_text(
    method: reqwest::Method,
    url: String,
    session: Option<&str>,
    token: Option<&str>,
    body: Option<&str>,
) -> (u16, Value) {
    let mut req = reqwest::Client::new().request(method, url);
    if let Some(s) = session {
        req = req.header("session_id", s);
    }
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if let Some(b) = body {
        req = req
            .header("content-type", "application/json")
            .body(b.to_string());
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    let value: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("answer {status} is not JSON ({e}): {text:?}"));
    (status, value)
}

/// [`raw_text`] with a JSON body.
pub async fn raw(
    method: reqwest::Method,
    url: String,
    session: Option<&str>,
    token: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    let text = body.map(|b| b.to_string());
    raw_text(method, url, session, token, text.as_deref()).await
}

/// Asserts a JSON error answer with `status` whose message contains `needle`.
pub fn assert_error(answer: &(u16, Value), status: u16, needle: &str) {
    assert_eq!(answer.0, status, "{answer:?}");
    let msg = answer.1["error"].as_str().unwrap_or_default();
    assert!(
        !msg.is_empty() && msg.contains(needle),
        "expected {needle:?} in {answer:?}"
    );
}

/// Polls `cond` every 10 ms for at most 5 s.
pub async fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !cond() {
        assert!(Instant::now() < deadline, "{what}: not reached within 5 s");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The number in "Compute EXPR" must be this task's, and the tool result must be its answer.
pub fn check_own_task(task: &Task, obs: &Observation, history: &[Message]) {
    let expr = task.data["expression"].as_str().unwrap();
    assert_eq!(obs.messages[0].text(), format!("Compute {expr}"));
    let answer = task.data["answer"].as_str().unwrap();
    let tool = history.iter().find(|m| m.role == Role::Tool).unwrap();
    assert_eq!(
        tool.text().trim(),
        answer,
        "session got another task's result"
    );
}
