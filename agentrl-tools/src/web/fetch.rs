//! One HTTP exchange under the web tools' limits: the body is streamed and reading stops at
//! the size cap; the whole exchange has a time limit.

use std::time::Duration;

use agentrl_core::ToolError;
use reqwest::{Client, RequestBuilder, Url};

use super::UrlAllowlist;
use super::resolve::GuardedResolver;

/// Limits of one web request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WebLimits {
    /// Bytes of the response body read at most; the rest is not read.
    pub max_body_bytes: usize,
    /// Time the whole exchange (connect, headers, body) may take.
    pub timeout: Duration,
}

impl Default for WebLimits {
    /// 256 KiB and 4 seconds (under the tool box's default of 5 seconds).
    fn default() -> Self {
        WebLimits {
            max_body_bytes: 256 << 10,
            timeout: Duration::from_secs(4),
        }
    }
}

/// A response read under [`WebLimits`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// The URL that answered.
    pub url: Url,
    /// The status code.
    pub status: u16,
    /// The status line's reason (e.g. `Not Found`), empty when unknown.
    pub reason: String,
    /// The `Content-Type` header, if any.
    pub content_type: Option<String>,
    /// The `Location` header, if any (redirects are not followed here).
    pub location: Option<String>,
    /// The body bytes read (at most the limit).
    pub body: Vec<u8>,
    /// Whether the body went on past the limit.
    pub truncated: bool,
}

impl Fetched {
    /// The body as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// `HTTP 404 Not Found`.
    pub fn status_line(&self) -> String {
        format!("HTTP {} {}", self.status, self.reason)
            .trim_end()
            .to_string()
    }
}

/// The HTTP client of the web tools for URLs under `allow`: no system proxy, no automatic
/// redirects (each hop must pass the allowlist, so callers follow them themselves), and names
/// resolved without internal answers unless `allow` accepts them (see `super::resolve`).
pub fn web_client(allow: &UrlAllowlist) -> Result<Client, String> {
    let resolver = GuardedResolver {
        allow_private: allow.allows_private_dns(),
    };
    Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .dns_resolver(std::sync::Arc::new(resolver))
        .build()
        .map_err(|e| format!("cannot build an HTTP client: {e}"))
}

/// Sends `request` (for `url`) and reads the response under `limits`.
pub async fn fetch(
    request: RequestBuilder,
    url: &Url,
    limits: WebLimits,
) -> Result<Fetched, ToolError> {
    let ms = limits.timeout.as_millis();
    match tokio::time::timeout(limits.timeout, exchange(request, url, limits)).await {
        Ok(result) => result,
        Err(_) => Err(ToolError::Failed(format!(
            "{url} did not answer completely within the time limit of {ms} ms"
        ))),
    }
}

/// The exchange without the time limit.
async fn exchange(
    request: RequestBuilder,
    url: &Url,
    limits: WebLimits,
) -> Result<Fetched, ToolError> {
    let failed = |e: reqwest::Error| {
        ToolError::Failed(format!(
            "request to {url} failed: {}",
            agentrl_core::with_causes(&e)
        ))
    };
    let mut response = request.send().await.map_err(failed)?;
    let header = |name: reqwest::header::HeaderName| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let content_type = header(reqwest::header::CONTENT_TYPE);
    let location = header(reqwest::header::LOCATION);
    let status = response.status();
    let mut body = Vec::new();
    let mut truncated = false;
    while let Some(chunk) = response.chunk().await.map_err(failed)? {
        let room = limits.max_body_bytes - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            truncated = true;
            break;
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Fetched {
        url: response.url().clone(),
        status: status.as_u16(),
        reason: status.canonical_reason().unwrap_or("").to_string(),
        content_type,
        location,
        body,
        truncated,
    })
}
