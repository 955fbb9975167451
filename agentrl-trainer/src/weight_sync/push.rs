//! [`ServerPush`]: writes each new version under the run directory, hands it to every live
//! rollout server (retrying), drops the servers that keep failing from the rollout router, and
//! removes the previous version's files.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentrl_core::{Error, Policy, Result};
use agentrl_policy::llama::load::SINGLE_FILE;
use agentrl_policy::{ApiFlavor, HttpPolicy, HttpPolicyConfig, RouterPolicy};
use tokio::task::JoinSet;

use super::wire::{Endpoint, Version, adapter_name};
use crate::config::{PushMode, RolloutServerConfig};
use crate::learner::{Learner, ModelSpec};

/// What a pushed version is on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PushedForm {
    /// The tiny GPT: one safetensors file.
    TinyFile,
    /// A LoRA model: a PEFT adapter directory, merged into the base by the server.
    Adapter,
    /// A fully fine-tuned pretrained model: a directory holding `model.safetensors` with the
    /// Hugging Face tensor names.
    FullDir,
}

/// How often a push to one server is tried, and the wait before the first retry (doubled after
/// each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PushRetry {
    /// Attempts in all (at least 1).
    pub attempts: u32,
    /// Wait before the first retry.
    pub backoff: Duration,
}

impl Default for PushRetry {
    /// 3 attempts, waiting 1 s then 2 s.
    fn default() -> Self {
        PushRetry {
            attempts: 3,
            backoff: Duration::from_secs(1),
        }
    }
}

/// One rollout server.
struct Target {
    /// Its place in the config, e.g. `pipeline.rollout_fleet[1]`.
    place: String,
    mode: PushMode,
    endpoint: Endpoint,
    path_prefix: Option<PathBuf>,
    /// The rollout client (its index in the router is the target's index).
    policy: Arc<HttpPolicy>,
    live: AtomicBool,
    /// The adapter the server holds (LoRA modes).
    adapter: Mutex<Option<String>>,
}

impl Target {
    /// The server for config entry `server` at `place`; `default_key` when it names no key
    /// variable.
    fn new(place: &str, server: &RolloutServerConfig, default_key: Option<&str>) -> Result<Self> {
        let bad = |e: String| Error::Config(format!("{place} ({:?}): {e}", server.url));
        let api_key = match &server.api_key_env {
            Some(var) => Some(
                std::env::var(var)
                    .map_err(|_| bad(format!("api_key_env names ${var}, which is not set")))?,
            ),
            None => default_key.map(str::to_string),
        };
        if server.path_prefix.is_some() && server.push == PushMode::AgentrlUpload {
            return Err(bad(
                "path_prefix has no use with push = \"agentrl-upload\"".into()
            ));
        }
        let mut config = HttpPolicyConfig::new(server.url.as_str(), "agentrl");
        config.api_key = api_key.clone();
        config.name = Some(server.url.clone());
        if matches!(server.push, PushMode::SglangDisk | PushMode::SglangLora) {
            config.flavor = ApiFlavor::SglangGenerate;
        }
        // Only `agentrl serve` has the route that ends a session.
        config.end_sessions =
            matches!(server.push, PushMode::AgentrlPath | PushMode::AgentrlUpload);
        let policy = HttpPolicy::new(config).map_err(|e| bad(e.to_string()))?;
        Ok(Target {
            place: place.to_string(),
            mode: server.push,
            endpoint: Endpoint::new(&server.url, api_key).map_err(bad)?,
            path_prefix: server.path_prefix.clone(),
            policy: Arc::new(policy),
            live: AtomicBool::new(true),
            adapter: Mutex::new(None),
        })
    }

    /// `place (url)`, for messages.
    fn label(&self) -> String {
        format!("{} ({})", self.place, self.policy.base_url())
    }

    /// The adapter the server holds now.
    fn adapter(&self) -> Option<String> {
        self.adapter.lock().map_or(None, |a| a.clone())
    }

    /// Pushes `version`, trying `retry.attempts` times; the last error when all fail.
    async fn push_with_retry(&self, version: &Version<'_>, retry: PushRetry) -> Result<(), String> {
        let mut wait = retry.backoff;
        let mut attempt = 1;
        loop {
            let previous = self.adapter();
            match self
                .endpoint
                .push(self.mode, version, previous.as_deref())
                .await
            {
                Ok(()) => {
                    self.after_push(version.number);
                    return Ok(());
                }
                Err(e) if attempt >= retry.attempts.max(1) => {
                    return Err(format!("{e} (gave up after {attempt} attempts)"));
                }
                Err(e) => {
                    tracing::warn!(
                        "pushing version {} to {}: {e}; retry in {wait:?}",
                        version.number,
                        self.label()
                    );
                    tokio::time::sleep(wait).await;
                    wait *= 2;
                    attempt += 1;
                }
            }
        }
    }

    /// Records a successful push: the version, and the adapter later rollouts must name.
    fn after_push(&self, version: u64) {
        self.policy.set_version(version);
        if matches!(self.mode, PushMode::VllmLora | PushMode::SglangLora) {
            let name = adapter_name(version);
            if let Ok(mut adapter) = self.adapter.lock() {
                *adapter = Some(name.clone());
            }
            self.policy.set_adapter(Some(name));
        }
    }
}

/// The rollout servers, their clients, and where pushed weights are written.
pub struct ServerPush {
    targets: Vec<Arc<Target>>,
    router: Arc<RouterPolicy>,
    dir: PathBuf,
    base_model: String,
    form: PushedForm,
    retry: PushRetry,
    dropped: AtomicUsize,
}

impl ServerPush {
    /// Clients for `servers` (each named by its place in the config; bearer `api_key` unless
    /// the entry names its own variable) and a router over them for rollouts; weights for
    /// `spec` go under `dir` (made absolute, so servers elsewhere on this machine find them).
    pub fn new(
        servers: &[(String, RolloutServerConfig)],
        api_key: Option<&str>,
        spec: &ModelSpec,
        dir: &Path,
        base_model: &str,
    ) -> Result<(Self, Arc<RouterPolicy>)> {
        let form = match spec {
            ModelSpec::Tiny(_) => PushedForm::TinyFile,
            ModelSpec::Llama { lora: Some(_), .. } => PushedForm::Adapter,
            ModelSpec::Llama { lora: None, .. } => PushedForm::FullDir,
        };
        let targets = servers
            .iter()
            .map(|(place, server)| {
                check_form(place, server.push, form)?;
                Target::new(place, server, api_key).map(Arc::new)
            })
            .collect::<Result<Vec<_>>>()?;
        std::fs::create_dir_all(dir).map_err(|e| Error::io("creating", dir, e))?;
        let dir = dir
            .canonicalize()
            .map_err(|e| Error::io("resolving", dir, e))?;
        let backends: Vec<Arc<dyn Policy>> = targets
            .iter()
            .map(|t| t.policy.clone() as Arc<dyn Policy>)
            .collect();
        let router = Arc::new(RouterPolicy::new(backends)?);
        let push = ServerPush {
            targets,
            router: router.clone(),
            dir,
            base_model: base_model.to_string(),
            form,
            retry: PushRetry::default(),
            dropped: AtomicUsize::new(0),
        };
        Ok((push, router))
    }

    /// The same push, retrying as `retry` says.
    pub fn with_retry(mut self, retry: PushRetry) -> Self {
        self.retry = retry;
        self
    }

    /// Servers dropped so far after failed pushes.
    pub fn dropped(&self) -> usize {
        self.dropped.load(Ordering::Acquire)
    }

    /// The URLs of the servers still in use.
    pub fn live_servers(&self) -> Vec<String> {
        self.targets
            .iter()
            .filter(|t| t.live.load(Ordering::Acquire))
            .map(|t| t.policy.base_url().to_string())
            .collect()
    }

    /// Where version `version`'s weights are written.
    fn path_of(&self, version: u64) -> PathBuf {
        match self.form {
            PushedForm::TinyFile => self.dir.join(format!("v{version:06}.safetensors")),
            PushedForm::Adapter | PushedForm::FullDir => self.dir.join(format!("v{version:06}")),
        }
    }

    /// Writes `learner`'s weights as `version`, has every live server load them (dropping those
    /// that keep failing), then removes the previous version. Fails when no server is left.
    pub async fn publish(&self, learner: &Learner, version: u64) -> Result<()> {
        let path = self.path_of(version);
        match self.form {
            PushedForm::TinyFile => learner.save(&path)?,
            PushedForm::Adapter => learner.save_peft(&path, &self.base_model)?,
            PushedForm::FullDir => learner.save(&path.join(SINGLE_FILE))?,
        }
        let files = files_of(&path)?;
        let failures = self.push_all(version, &path, &files).await?;
        let mut left = self.live_servers().len();
        for (index, why) in &failures {
            left = self.drop_target(*index, version, why)?;
        }
        if left == 0 {
            let reasons: Vec<String> = failures
                .iter()
                .map(|(i, why)| format!("{}: {why}", self.targets[*i].label()))
                .collect();
            return Err(Error::Trainer(format!(
                "no rollout server is left (each did not load weights version {version}), so \
                 the run stops: {}",
                reasons.join("; ")
            )));
        }
        self.remove_previous(version);
        Ok(())
    }

    /// Pushes `version` to every live server at once; the failures, by target index.
    async fn push_all(
        &self,
        version: u64,
        path: &Path,
        files: &[PathBuf],
    ) -> Result<Vec<(usize, String)>> {
        let mut pushes = JoinSet::new();
        for (index, target) in self.targets.iter().enumerate() {
            if !target.live.load(Ordering::Acquire) {
                continue;
            }
            let target = target.clone();
            let server_path = self.server_path(&target, path);
            let (files, retry) = (files.to_vec(), self.retry);
            pushes.spawn(async move {
                let v = Version {
                    number: version,
                    server_path: &server_path,
                    files: &files,
                };
                (index, target.push_with_retry(&v, retry).await)
            });
        }
        let mut failures = Vec::new();
        while let Some(done) = pushes.join_next().await {
            let (index, result) =
                done.map_err(|e| Error::Trainer(format!("weight push task failed: {e}")))?;
            if let Err(why) = result {
                failures.push((index, why));
            }
        }
        failures.sort_by_key(|(i, _)| *i);
        Ok(failures)
    }

    /// Takes target `index` out of the router after a failed push, with a warning; returns
    /// how many servers are left.
    fn drop_target(&self, index: usize, version: u64, why: &str) -> Result<usize> {
        let target = &self.targets[index];
        target.live.store(false, Ordering::Release);
        self.dropped.fetch_add(1, Ordering::AcqRel);
        let left = self.router.remove(index)?;
        tracing::warn!(
            "rollout server {} did not load weights version {version}: {why}; dropped from the \
             rollout router ({left} left)",
            target.label()
        );
        Ok(left)
    }

    /// Where `target` reads `path` (under its `path_prefix` when it has one).
    fn server_path(&self, target: &Target, path: &Path) -> PathBuf {
        match (&target.path_prefix, path.strip_prefix(&self.dir)) {
            (Some(prefix), Ok(rel)) => prefix.join(rel),
            _ => path.to_path_buf(),
        }
    }

    /// Removes the version before `version` from disk.
    fn remove_previous(&self, version: u64) {
        let Some(previous) = version.checked_sub(1).map(|v| self.path_of(v)) else {
            return;
        };
        let removed = if previous.is_dir() {
            std::fs::remove_dir_all(&previous)
        } else {
            std::fs::remove_file(&previous)
        };
        // A missing previous version (the first push of a resumed run) is fine.
        if let Err(e) = removed
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!("could not remove {}: {e}", previous.display());
        }
    }
}

/// Refuses a mode that cannot carry `form`: full weights to a LoRA mode, an adapter to
/// SGLang's full-weight update.
fn check_form(place: &str, mode: PushMode, form: PushedForm) -> Result<()> {
    let why = match (mode, form) {
        (PushMode::VllmLora | PushMode::SglangLora, PushedForm::FullDir) => {
            "a LoRA push mode needs a model trained with [lora]"
        }
        (PushMode::SglangDisk, PushedForm::Adapter) => {
            "push = \"sglang-disk\" loads full weights, but this run trains a LoRA adapter \
             (use \"sglang-lora\")"
        }
        _ => return Ok(()),
    };
    Err(Error::Config(format!("{place}: {why}")))
}

/// The files of a pushed version: the file itself, or the files directly in its directory.
fn files_of(path: &Path) -> Result<Vec<PathBuf>> {
    if path.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    let entries = std::fs::read_dir(path).map_err(|e| Error::io("listing", path, e))?;
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("listing", path, e))?;
        if entry.path().is_file() {
            files.push(entry.path());
        }
    }
    files.sort();
    Ok(files)
}
