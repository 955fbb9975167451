//! The `http` tool: one HTTP request (method, URL, optional JSON body and headers) to a URL on
//! the session's allowlist, answered with the status line and the (size-capped) body.

use agentrl_core::{Tool, ToolContext, ToolError, ToolSpec};
use std::collections::BTreeMap;

use async_trait::async_trait;
use reqwest::{Client, Method};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::arguments::{any_value, parse_args};
use crate::web::{UrlAllowlist, WebLimits, fetch, web_client};

/// Methods the `http` tool sends.
const METHODS: [&str; 5] = ["GET", "POST", "PUT", "PATCH", "DELETE"];

/// The `http` tool: sends a request to an allowed URL and shows status and body.
#[derive(Debug, Clone)]
pub struct HttpTool {
    allow: UrlAllowlist,
    limits: WebLimits,
    client: Result<Client, String>,
}

impl HttpTool {
    /// Name the model calls the tool by.
    pub const NAME: &'static str = "http";

    /// A tool that may reach URLs under `allow`, within `limits`.
    pub fn new(allow: UrlAllowlist, limits: WebLimits) -> Self {
        let client = web_client(&allow);
        HttpTool {
            allow,
            limits,
            client,
        }
    }
}

/// The arguments of the `http` tool.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HttpArgs {
    /// HTTP method (GET when left out).
    method: Option<String>,
    /// Absolute URL.
    url: String,
    /// JSON body to send, `null` included.
    #[serde(default, deserialize_with = "any_value")]
    body: Option<Value>,
    /// Extra request headers.
    headers: Option<BTreeMap<String, String>>,
}

/// The request `args` describe, checked: method, URL, headers and body.
fn request(
    client: &Client,
    allow: &UrlAllowlist,
    args: HttpArgs,
) -> Result<(reqwest::RequestBuilder, reqwest::Url), ToolError> {
    let bad = |why: String| ToolError::InvalidArguments(why);
    let method = args.method.as_deref().unwrap_or("GET");
    let upper = method.to_ascii_uppercase();
    if !METHODS.contains(&upper.as_str()) {
        return Err(bad(format!(
            "`method` {method:?} is not one of {METHODS:?}"
        )));
    }
    let method = Method::from_bytes(upper.as_bytes())
        .map_err(|e| bad(format!("`method` {method:?}: {e}")))?;
    let url = allow.check(&args.url)?;
    let mut builder = client.request(method, url.clone());
    if let Some(headers) = &args.headers {
        for (name, value) in headers {
            let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|e| bad(format!("header name {name:?}: {e}")))?;
            if name == reqwest::header::HOST {
                return Err(bad("the `Host` header cannot be set".into()));
            }
            let value = reqwest::header::HeaderValue::from_str(value)
                .map_err(|e| bad(format!("header `{name}` value: {e}")))?;
            builder = builder.header(name, value);
        }
    }
    if let Some(body) = &args.body {
        builder = builder.json(body);
    }
    Ok((builder, url))
}

#[async_trait]
impl Tool for HttpTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec::function(
            Self::NAME,
            format!(
                "Sends an HTTP request and shows the status and body. URLs must start with one of: {}",
                self.allow.describe()
            ),
            json!({
                "type": "object",
                "properties": {
                    "method": {"type": "string", "enum": METHODS, "description": "HTTP method (default GET)."},
                    "url": {"type": "string", "description": "Absolute URL."},
                    "body": {"description": "JSON body to send (optional)."},
                    "headers": {
                        "type": "object",
                        "additionalProperties": {"type": "string"},
                        "description": "Extra request headers (optional)."
                    }
                },
                "required": ["url"],
                "additionalProperties": false
            }),
        )
    }

    async fn call(&self, args: Value, _ctx: &ToolContext) -> Result<String, ToolError> {
        let client = self
            .client
            .as_ref()
            .map_err(|e| ToolError::Failed(e.clone()))?;
        let (builder, url) = request(client, &self.allow, parse_args(args)?)?;
        let fetched = fetch(builder, &url, self.limits).await?;
        let mut text = fetched.status_line();
        if let Some(location) = &fetched.location {
            text.push_str(&format!("\nLocation: {location}"));
        }
        text.push('\n');
        text.push_str(&fetched.text());
        if fetched.truncated {
            text.push_str(&format!(
                "\n…[body truncated: only the first {} bytes were read]",
                self.limits.max_body_bytes
            ));
        }
        Ok(text)
    }
}
