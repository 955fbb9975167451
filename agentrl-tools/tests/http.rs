//! The `http` tool against real servers on 127.0.0.1: requests, allowlist refusals, the size
//! cap on an endless body and the time limit on a server that never answers.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agentrl_core::{Tool, ToolCall, ToolContext, ToolError};
use agentrl_tools::{HttpTool, ToolBox, ToolLimits, UrlAllowlist, WebLimits};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A server with `/api/...` routes and a `/secret` route outside the allowlist that counts hits.
async fn server() -> (String, Arc<AtomicUsize>) {
    let secret_hits = Arc::new(AtomicUsize::new(0));
    let hits = Arc::clone(&secret_hits);
    let app = Router::new()
        .route("/api/hello", get(|| async { "hello there" }))
        .route(
            "/api/echo",
            post(
                |headers: axum::http::HeaderMap, Json(body): Json<Value>| async move {
                    let tag = headers
                        .get("x-tag")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("")
                        .to_string();
                    (
                        axum::http::StatusCode::CREATED,
                        Json(json!({"got": body, "tag": tag})),
                    )
                },
            ),
        )
        .route("/api/big", get(|| async { "x".repeat(100_000) }))
        .route("/api/hang", get(std::future::pending::<String>))
        .route(
            "/secret",
            get(move || {
                hits.fetch_add(1, Ordering::SeqCst);
                async { "secret" }
            }),
        );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), secret_hits)
}

fn tool(base: &str, limits: WebLimits) -> HttpTool {
    HttpTool::new(UrlAllowlist::new([format!("{base}/api/")]).unwrap(), limits)
}

async fn call(tool: &HttpTool, args: Value) -> Result<String, ToolError> {
    tool.call(args, &ToolContext::default()).await
}

#[tokio::test]
async fn get_and_post_show_status_and_body() {
    let (base, _) = server().await;
    let tool = tool(&base, WebLimits::default());
    let out = call(&tool, json!({"url": format!("{base}/api/hello")}))
        .await
        .unwrap();
    assert_eq!(out, "HTTP 200 OK\nhello there");
    let args = json!({
        "method": "POST",
        "url": format!("{base}/api/echo"),
        "body": {"n": 3},
        "headers": {"x-tag": "t1"}
    });
    let out = call(&tool, args).await.unwrap();
    assert!(out.starts_with("HTTP 201 Created\n"), "{out}");
    let body: Value = serde_json::from_str(out.lines().nth(1).unwrap()).unwrap();
    assert_eq!(body, json!({"got": {"n": 3}, "tag": "t1"}));
    let out = call(&tool, json!({"url": format!("{base}/api/none")}))
        .await
        .unwrap();
    assert!(out.starts_with("HTTP 404 Not Found"), "{out}");
}

#[tokio::test]
async fn urls_outside_the_allowlist_are_refused_before_any_request() {
    let (base, secret_hits) = server().await;
    let port = base.rsplit(':').next().unwrap();
    let tool = tool(&base, WebLimits::default());
    let refused = [
        format!("{base}/secret"),
        format!("{base}/api/../secret"),
        format!("{base}/api/%2e%2e/secret"),
        format!("{base}/api\\..\\secret"),
        format!("{base}/api/%2E%2e%2Fsecret"),
        format!("http://127.0.0.1:{port}@localhost:{port}/secret"),
        format!("http://user@127.0.0.1:{port}/api/hello"),
        format!("http://localhost:{port}/api/hello"),
        "http://127.0.0.1:1/api/hello".to_string(),
        format!("https://127.0.0.1:{port}/api/hello"),
        format!("{base}/apix/hello"),
        "/api/hello".to_string(),
        "file:///etc/passwd".to_string(),
    ];
    for url in refused {
        let err = call(&tool, json!({"url": url})).await.unwrap_err();
        let ToolError::InvalidArguments(text) = &err else {
            panic!("{url}: {err:?}")
        };
        assert!(
            text.contains(&base) || text.contains("not an absolute URL"),
            "{url}: {text}"
        );
    }
    assert_eq!(secret_hits.load(Ordering::SeqCst), 0);
    // The base itself without its trailing slash and paths below it are allowed.
    let out = call(&tool, json!({"url": format!("{base}/api")}))
        .await
        .unwrap();
    assert!(out.starts_with("HTTP 404"), "{out}");
}

#[tokio::test]
async fn bad_arguments_are_the_models_fault() {
    let (base, _) = server().await;
    let toolbox = ToolBox::new(ToolLimits::default())
        .with(tool(&base, WebLimits::default()))
        .unwrap();
    for args in [
        json!({"url": format!("{base}/api/hello"), "method": "BREW"}),
        json!({"url": 5}),
        json!({"url": format!("{base}/api/hello"), "headers": {"x": 1}}),
        json!({"url": format!("{base}/api/hello"), "headers": {"bad name": "v"}}),
        json!({"url": format!("{base}/api/hello"), "headers": {"Host": "evil"}}),
        json!({"url": "http://evil.invalid/api/"}),
    ] {
        let outcome = toolbox
            .dispatch(&ToolCall::new("c", "http", &args), &ToolContext::default())
            .await;
        assert!(outcome.is_invalid_action(), "{args}: {outcome:?}");
        assert!(
            outcome.message.text().contains("error"),
            "{}",
            outcome.message.text()
        );
    }
}

#[tokio::test]
async fn long_and_endless_bodies_stop_at_the_cap() {
    let (base, _) = server().await;
    let limits = WebLimits {
        max_body_bytes: 1000,
        timeout: Duration::from_secs(20),
    };
    let out = call(
        &tool(&base, limits),
        json!({"url": format!("{base}/api/big")}),
    )
    .await
    .unwrap();
    assert!(
        out.contains(&"x".repeat(1000)) && !out.contains(&"x".repeat(1001)),
        "{}",
        out.len()
    );
    assert!(
        out.contains("body truncated: only the first 1000 bytes"),
        "{out}"
    );

    // A raw server that sends a chunked body forever: reading must stop at the cap.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut request = Vec::new();
        while !request.ends_with(b"\r\n\r\n") {
            let mut byte = [0u8; 1];
            socket.read_exact(&mut byte).await.unwrap();
            request.push(byte[0]);
        }
        let head =
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n";
        socket.write_all(head.as_bytes()).await.unwrap();
        let chunk = format!("{:x}\r\n{}\r\n", 4096, "y".repeat(4096));
        while socket.write_all(chunk.as_bytes()).await.is_ok() {}
    });
    let endless = format!("http://{addr}/");
    let tool = HttpTool::new(UrlAllowlist::new([endless.as_str()]).unwrap(), limits);
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        call(&tool, json!({"url": endless})),
    )
    .await
    .expect("an endless body is cut at the cap, not read forever")
    .unwrap();
    assert!(
        out.starts_with("HTTP 200 OK\n") && out.contains("body truncated"),
        "{out}"
    );
}

#[tokio::test]
async fn a_server_that_never_answers_hits_the_time_limit() {
    let (base, _) = server().await;
    let limits = WebLimits {
        max_body_bytes: 1000,
        timeout: Duration::from_secs(1),
    };
    let err = call(
        &tool(&base, limits),
        json!({"url": format!("{base}/api/hang")}),
    )
    .await
    .unwrap_err();
    let ToolError::Failed(text) = err else {
        panic!("{err:?}")
    };
    assert!(text.contains("time limit of 1000 ms"), "{text}");
}

#[test]
fn unusable_bases_are_refused() {
    for base in ["not a url", "ftp://h/", "http://u:p@h/", "http://h/?q=1"] {
        assert!(UrlAllowlist::new([base]).is_err(), "{base}");
    }
    let allow = UrlAllowlist::new(["http://127.0.0.1:8/a"]).unwrap();
    assert_eq!(allow.bases()[0].as_str(), "http://127.0.0.1:8/a/");
}

/// A name other than `localhost` that this machine resolves to 127.0.0.1 (its host name
/// usually is one), if there is one.
async fn other_loopback_name() -> Option<String> {
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    let name = hostname.trim().to_string();
    let answers: Vec<_> = tokio::net::lookup_host((name.as_str(), 0))
        .await
        .ok()?
        .collect();
    let loopback = !answers.is_empty() && answers.iter().all(|a| a.ip().is_loopback());
    (loopback && name != "localhost").then_some(name)
}

/// `localhost` in the allowlist reaches this machine; another name answering with a loopback
/// address is refused before any request, unless the allowlist accepts private DNS answers.
#[tokio::test]
async fn names_resolving_to_internal_addresses_are_refused_unless_allowed() {
    let (base, _) = server().await;
    let port = base.rsplit(':').next().unwrap();
    let local = format!("http://localhost:{port}/api/");
    let tool = HttpTool::new(UrlAllowlist::new([&local]).unwrap(), WebLimits::default());
    let out = call(&tool, json!({"url": format!("{local}hello")})).await;
    assert_eq!(out.unwrap(), "HTTP 200 OK\nhello there");

    let Some(name) = other_loopback_name().await else {
        eprintln!("skipped the rebinding half: no other name of this machine is loopback-only");
        return;
    };
    let named = format!("http://{name}:{port}/api/");
    let allow = UrlAllowlist::new([&named]).unwrap();
    let tool = HttpTool::new(allow.clone(), WebLimits::default());
    let err = call(&tool, json!({"url": format!("{named}hello")}))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("internal address"), "{err}");
    let tool = HttpTool::new(allow.allowing_private_dns(true), WebLimits::default());
    let out = call(&tool, json!({"url": format!("{named}hello")})).await;
    assert_eq!(out.unwrap(), "HTTP 200 OK\nhello there");
}
