//! [`HttpPolicy`]: the HTTP client, its settings, and the retrying POST every call goes through.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use agentrl_core::{Error, Generation, GenerationRequest, Policy, Result};
use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::Semaphore;

use super::config::{ApiFlavor, HttpPolicyConfig};
use super::wire::{self, excerpt};

/// A [`Policy`] served by a remote OpenAI-compatible server; cheap to clone.
#[derive(Clone)]
pub struct HttpPolicy {
    inner: Arc<Inner>,
}

struct Inner {
    http: reqwest::Client,
    base: String,
    config: HttpPolicyConfig,
    permits: Semaphore,
    version: AtomicU64,
    attempts: AtomicU64,
    /// The LoRA adapter requests name (see [`HttpPolicy::set_adapter`]).
    adapter: RwLock<Option<String>>,
}

impl std::fmt::Debug for HttpPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpPolicy")
            .field("base", &self.inner.base)
            .field("model", &self.inner.config.model)
            .finish()
    }
}

impl HttpPolicy {
    /// A policy for the server `config.base_url`; fails only on a malformed setting.
    pub fn new(config: HttpPolicyConfig) -> Result<Self> {
        let trimmed = config.base_url.trim().trim_end_matches('/');
        let trimmed = trimmed.strip_suffix("/v1").unwrap_or(trimmed);
        if trimmed.is_empty() {
            return Err(Error::Config("HttpPolicy: empty base_url".into()));
        }
        if config.max_concurrency == 0 {
            return Err(Error::Config(
                "HttpPolicy: max_concurrency must be at least 1".into(),
            ));
        }
        let base = if trimmed.contains("://") {
            trimmed.to_string()
        } else {
            format!("http://{trimmed}")
        };
        let http = reqwest::Client::builder()
            .timeout(config.request_timeout)
            .connect_timeout(config.connect_timeout)
            .no_proxy()
            .build()
            .map_err(|e| {
                Error::Config(format!(
                    "HttpPolicy: cannot build a client: {}",
                    agentrl_core::with_causes(&e)
                ))
            })?;
        Ok(HttpPolicy {
            inner: Arc::new(Inner {
                http,
                base,
                permits: Semaphore::new(config.max_concurrency),
                config,
                version: AtomicU64::new(0),
                attempts: AtomicU64::new(0),
                adapter: RwLock::new(None),
            }),
        })
    }

    /// The server root every path is appended to.
    pub fn base_url(&self) -> &str {
        &self.inner.base
    }

    /// The settings.
    pub fn config(&self) -> &HttpPolicyConfig {
        &self.inner.config
    }

    /// Sets the version reported for servers that do not report one (e.g. after pushing weights).
    pub fn set_version(&self, version: u64) {
        self.inner.version.store(version, Ordering::Release);
    }

    /// Names the LoRA adapter later requests use (`None`: the base model): it replaces `model`
    /// in OpenAI requests (vLLM serves a runtime-loaded adapter under its name) and is sent as
    /// `lora_path` to SGLang's `/generate`.
    pub fn set_adapter(&self, name: Option<String>) {
        match self.inner.adapter.write() {
            Ok(mut adapter) => *adapter = name,
            Err(poisoned) => *poisoned.into_inner() = name,
        }
    }

    /// The LoRA adapter requests name, if any.
    pub fn adapter(&self) -> Option<String> {
        match self.inner.adapter.read() {
            Ok(adapter) => adapter.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// The model name OpenAI requests carry: the adapter's when one is set, else `config.model`.
    pub fn model_name(&self) -> String {
        self.adapter()
            .unwrap_or_else(|| self.inner.config.model.clone())
    }

    /// HTTP attempts made so far, retries included (for metrics and tests).
    pub fn attempts(&self) -> u64 {
        self.inner.attempts.load(Ordering::Relaxed)
    }

    /// POSTs `body` as JSON to `path` and parses the JSON answer, retrying with exponential
    /// backoff on connect errors, 5xx and 429. Errors name the URL and what went wrong.
    pub async fn post_json(&self, path: &str, body: &Value) -> Result<Value> {
        self.post_json_for(path, body, None).await
    }

    /// [`HttpPolicy::post_json`] on behalf of `session`, named in the [`super::SESSION_HEADER`]
    /// header.
    async fn post_json_for(
        &self,
        path: &str,
        body: &Value,
        session: Option<&str>,
    ) -> Result<Value> {
        let inner = &self.inner;
        let url = format!("{}{path}", inner.base);
        let mut backoff = inner.config.initial_backoff;
        let mut attempt: u32 = 0;
        loop {
            let (why, retry_after) = {
                let _permit = inner
                    .permits
                    .acquire()
                    .await
                    .map_err(|_| Error::Policy(format!("POST {url}: client closed")))?;
                inner.attempts.fetch_add(1, Ordering::Relaxed);
                let mut request = inner.http.post(&url).json(body);
                if let Some(key) = &inner.config.api_key {
                    request = request.bearer_auth(key);
                }
                if let Some(session) = session {
                    request = request.header(super::SESSION_HEADER, session);
                }
                match request.send().await {
                    Err(e) if e.is_connect() => (
                        format!(
                            "POST {url}: cannot connect: {}",
                            agentrl_core::with_causes(&e)
                        ),
                        None,
                    ),
                    Err(e) if e.is_timeout() => {
                        return Err(Error::Policy(format!(
                            "POST {url}: no answer within {:?}: {}",
                            inner.config.request_timeout,
                            agentrl_core::with_causes(&e)
                        )));
                    }
                    Err(e) => {
                        return Err(Error::Policy(format!(
                            "POST {url}: request failed: {}",
                            agentrl_core::with_causes(&e)
                        )));
                    }
                    Ok(response) => {
                        let status = response.status();
                        let retry_after = response
                            .headers()
                            .get(reqwest::header::RETRY_AFTER)
                            .and_then(|v| v.to_str().ok())
                            .and_then(|v| v.trim().parse::<u64>().ok())
                            .map(Duration::from_secs);
                        let text = response.text().await.map_err(|e| {
                            Error::Policy(format!(
                                "POST {url}: reading the answer (HTTP {status}): {}",
                                agentrl_core::with_causes(&e)
                            ))
                        })?;
                        if status.is_success() {
                            return serde_json::from_str(&text).map_err(|e| {
                                Error::Policy(format!(
                                    "POST {url}: the answer is not JSON ({e}): {}",
                                    excerpt(&text)
                                ))
                            });
                        }
                        let why = format!("POST {url}: HTTP {status}: {}", excerpt(&text));
                        if !(status.is_server_error() || status.as_u16() == 429) {
                            return Err(Error::Policy(why));
                        }
                        (why, retry_after)
                    }
                }
            };
            if attempt >= inner.config.max_retries {
                return Err(Error::Policy(format!(
                    "{why} (gave up after {} attempts)",
                    attempt + 1
                )));
            }
            attempt += 1;
            let wait = retry_after
                .map_or(backoff, |r| r.max(backoff))
                .min(inner.config.max_backoff);
            tracing::warn!("{why}; retry {attempt} in {wait:?}");
            tokio::time::sleep(wait).await;
            backoff = (backoff * 2).min(inner.config.max_backoff);
        }
    }

    /// Generates one request over HTTP.
    async fn generate_one(&self, request: &GenerationRequest) -> Result<Generation> {
        let config = &self.inner.config;
        let (path, body) = match config.flavor {
            ApiFlavor::OpenAiCompletions => (
                "/v1/completions",
                wire::completions_body(&self.model_name(), request, config.ignore_eos),
            ),
            ApiFlavor::SglangGenerate => {
                let mut body = wire::generate_body(request, config.ignore_eos);
                if let (Some(adapter), Some(map)) = (self.adapter(), body.as_object_mut()) {
                    map.insert("lora_path".into(), Value::String(adapter));
                }
                ("/generate", body)
            }
        };
        let answer = self
            .post_json_for(path, &body, request.session.as_deref())
            .await?;
        let what = format!("POST {}{path}", self.inner.base);
        let mut generation = match config.flavor {
            ApiFlavor::OpenAiCompletions => wire::parse_completion(&answer, &what)?,
            ApiFlavor::SglangGenerate => wire::parse_generate(&answer, &what)?,
        };
        match wire::reported_version(&answer) {
            Some(v) => {
                self.inner.version.fetch_max(v, Ordering::AcqRel);
                generation.policy_version = v;
            }
            None => generation.policy_version = self.version(),
        }
        generation.policy_name = config.name.clone();
        Ok(generation)
    }
}

#[async_trait]
impl Policy for HttpPolicy {
    async fn generate(&self, requests: Vec<GenerationRequest>) -> Result<Vec<Generation>> {
        for r in &requests {
            r.params.validate()?;
        }
        let mut set = tokio::task::JoinSet::new();
        for (i, request) in requests.into_iter().enumerate() {
            let me = self.clone();
            set.spawn(async move { (i, me.generate_one(&request).await) });
        }
        let mut out: Vec<Option<Generation>> = vec![None; set.len()];
        while let Some(joined) = set.join_next().await {
            let (i, result) =
                joined.map_err(|e| Error::Policy(format!("HTTP generation task failed: {e}")))?;
            out[i] = Some(result?);
        }
        Ok(out.into_iter().flatten().collect())
    }

    fn version(&self) -> u64 {
        self.inner.version.load(Ordering::Acquire)
    }

    /// With [`HttpPolicyConfig::end_sessions`]: `DELETE /v1/sessions/{session}`, sent in the
    /// background (outside a tokio runtime, nothing is sent). A failure is logged and costs
    /// only memory: the server keeps the session until its cache evicts it.
    fn end_session(&self, session: &str) {
        if !self.inner.config.end_sessions {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let Some(url) = self.session_url(session) else {
            return;
        };
        let me = self.clone();
        runtime.spawn(async move {
            let mut request = me.inner.http.delete(url.clone());
            if let Some(key) = &me.inner.config.api_key {
                request = request.bearer_auth(key);
            }
            let answer = request.send().await.and_then(|r| r.error_for_status());
            if let Err(e) = answer {
                tracing::debug!(
                    "DELETE {url}: {} (the server keeps the session until it evicts it)",
                    agentrl_core::with_causes(&e)
                );
            }
        });
    }
}

impl HttpPolicy {
    /// `BASE/v1/sessions/{session}` with the id percent-encoded as one path segment.
    fn session_url(&self, session: &str) -> Option<reqwest::Url> {
        let mut url = reqwest::Url::parse(&self.inner.base).ok()?;
        url.path_segments_mut()
            .ok()?
            .pop_if_empty()
            .extend(["v1", "sessions", session]);
        Some(url)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_id_is_one_encoded_path_segment() {
        let policy = HttpPolicy::new(HttpPolicyConfig::new("127.0.0.1:8000/v1/", "m")).unwrap();
        let url = policy.session_url("group 3/episode?1").unwrap();
        assert_eq!(
            url.as_str(),
            "http://127.0.0.1:8000/v1/sessions/group%203%2Fepisode%3F1"
        );
    }
}
