//! Hostile requests for the servers' limit tests (the env server's and the controller's here;
//! agentrl-policy's `serve_limits` includes this file for `agentrl serve`): a 100 MB body, a
//! 10,000-deep JSON array, a 1 MiB header, 10,000 headers and a 1 MiB URL. Each must get a 4xx
//! (or, for what the server refuses before reading all of it, a connection it closed early):
//! never a hang, a 2xx or a 5xx. The caller then checks that the server still answers a good
//! request.
#![allow(dead_code)]

use std::time::Duration;

use reqwest::Method;
use serde_json::Value;

/// Bytes of the huge body.
pub const HUGE_BODY: usize = 100 << 20;

/// Depth of the deeply nested JSON array.
pub const DEEP: usize = 10_000;

/// Bytes of the huge header value and of the huge URL's query.
pub const HUGE_HEADER: usize = 1 << 20;

/// Headers of the request with too many headers.
pub const MANY_HEADERS: usize = 10_000;

/// A client with a time limit, so that a server that hangs fails the test instead of stalling
/// it.
fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap()
}

/// `depth` nested arrays: `[[[...]]]`.
pub fn deep_array(depth: usize) -> String {
    "[".repeat(depth) + &"]".repeat(depth)
}

/// A request to `url` with `headers` (name, value) added.
fn request(method: Method, url: &str, headers: &[(&str, &str)]) -> reqwest::RequestBuilder {
    let mut req = http().request(method, url);
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    req
}

/// Asserts that `answer` is a status in `allowed` (with a JSON body when `json`), or a
/// connection the server closed before it answered (it may refuse an oversized request and
/// close without reading the rest); a timeout, a 2xx or a 5xx fails. Returns the status, if one
/// came.
async fn assert_refused(
    what: &str,
    answer: reqwest::Result<reqwest::Response>,
    allowed: &[u16],
    json: bool,
) -> Option<u16> {
    match answer {
        Ok(resp) => {
            let status = resp.status().as_u16();
            let text = resp.text().await.unwrap_or_default();
            assert!(
                allowed.contains(&status),
                "{what}: answered {status}: {text:?}"
            );
            if json {
                let parsed = serde_json::from_str::<Value>(&text);
                assert!(
                    parsed.is_ok(),
                    "{what}: answer {status} is not JSON: {text:?}"
                );
            }
            Some(status)
        }
        Err(e) => {
            let e = e.without_url();
            assert!(
                !e.is_timeout(),
                "{what}: no answer within the time limit: {e}"
            );
            assert!(
                e.is_request() || e.is_body(),
                "{what}: unexpected failure: {e}"
            );
            None
        }
    }
}

/// POSTs a [`HUGE_BODY`]-byte JSON body to `url`: a 413 with a JSON error, or a connection the
/// server closed early.
pub async fn assert_huge_body_refused(url: &str, headers: &[(&str, &str)]) {
    let answer = request(Method::POST, url, headers)
        .header("content-type", "application/json")
        .body(vec![b' '; HUGE_BODY])
        .send()
        .await;
    assert_refused(&format!("a 100 MB body to {url}"), answer, &[413], true).await;
}

/// POSTs `body` to `url`: a 4xx whose answer is JSON; returns the status and the answer.
pub async fn assert_json_4xx(url: &str, headers: &[(&str, &str)], body: String) -> (u16, Value) {
    let start: String = body.chars().take(20).collect();
    let what = format!("{} bytes starting {start:?} to {url}", body.len());
    let resp = request(Method::POST, url, headers)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{what}: no answer: {e}"));
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    assert!(
        (400..500).contains(&status),
        "{what}: answered {status}: {text}"
    );
    let value: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{what}: answer {status} is not JSON ({e}): {text:?}"));
    (status, value)
}

/// A [`DEEP`]-deep JSON array POSTed to `url`: a 4xx with a JSON answer.
pub async fn assert_deep_json_refused(url: &str, headers: &[(&str, &str)]) -> (u16, Value) {
    assert_json_4xx(url, headers, deep_array(DEEP)).await
}

/// Requests with oversized heads sent to `url` with `method`: one header of [`HUGE_HEADER`]
/// bytes (431), [`MANY_HEADERS`] headers (431), and a GET with a query of [`HUGE_HEADER`]
/// bytes (414 or 431).
pub async fn assert_oversized_heads_refused(method: Method, url: &str, headers: &[(&str, &str)]) {
    let huge = "a".repeat(HUGE_HEADER);
    let answer = request(method.clone(), url, headers)
        .header("x-huge", huge.as_str())
        .send()
        .await;
    assert_refused(&format!("a 1 MiB header to {url}"), answer, &[431], false).await;

    let mut req = request(method.clone(), url, headers);
    for i in 0..MANY_HEADERS {
        req = req.header(format!("x-h{i}"), "1");
    }
    let status = assert_refused(
        &format!("{MANY_HEADERS} headers to {url}"),
        req.send().await,
        &[431],
        false,
    )
    .await;
    // The whole head is a few hundred KiB, under the buffer: the server reads it and answers.
    assert_eq!(status, Some(431), "{MANY_HEADERS} headers to {url}");

    assert_huge_url_refused(url).await;
}

/// A GET of `url` with a query of [`HUGE_HEADER`] bytes, sent over a raw connection (HTTP
/// clients refuse to build such a URL): a 414 or 431, or a connection the server closed.
async fn assert_huge_url_refused(url: &str) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.strip_prefix("http://").unwrap();
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let sep = if path.contains('?') { '&' } else { '?' };
    let head = format!(
        "GET {path}{sep}pad={} HTTP/1.1\r\nhost: {authority}\r\n\r\n",
        "a".repeat(HUGE_HEADER)
    );
    let stream = tokio::net::TcpStream::connect(authority).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    // The server may answer and close before it has read everything: write on the side.
    let writing = tokio::spawn(async move {
        let _ = writer.write_all(head.as_bytes()).await;
        writer
    });
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(60), reader.read_to_end(&mut answer)).await;
    assert!(
        read.is_ok(),
        "a 1 MiB URL at {url}: no answer within the time limit"
    );
    drop(writing.await);
    let text = String::from_utf8_lossy(&answer);
    let status_line = text.lines().next().unwrap_or_default();
    // Nothing read: the server closed (or reset) the connection without answering.
    assert!(
        status_line.is_empty()
            || status_line.starts_with("HTTP/1.1 414")
            || status_line.starts_with("HTTP/1.1 431"),
        "a 1 MiB URL at {url}: answered {status_line:?}"
    );
}
