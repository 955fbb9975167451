//! Where the learner's weights go after every step ([`WeightSync`]): into the in-process
//! rollout policy (and, with `[rl.cross_policy]`, its stale snapshot every `stale_every`
//! steps), or to the `agentrl serve` processes that generate the rollouts.
//!
//! For servers, the learner writes the new weights under the run directory (a safetensors file
//! for the tiny GPT, a PEFT adapter directory for a LoRA model, a directory with
//! `model.safetensors` for a fully fine-tuned pretrained model) and posts
//! `/v1/load_weights {"path", "version"}` to every server, so each answers with the new policy
//! version and the pipeline's staleness bound holds across processes. The servers must be able
//! to read the run directory (same machine or a shared file system).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agentrl_core::{Error, Policy, Result};
use agentrl_policy::llama::load::SINGLE_FILE;
use agentrl_policy::{EngineStats, HttpPolicy, HttpPolicyConfig, RouterPolicy, TchPolicy};
use serde_json::json;
use tokio::task::JoinSet;

use crate::cross_policy::CrossSync;
use crate::learner::{Learner, ModelSpec};

/// How new weights reach the policy that generates rollouts.
pub enum WeightSync {
    /// The in-process policy thread: weights are copied in place.
    Local(TchPolicy),
    /// `agentrl serve` processes: weights are written to disk and each server loads them.
    Servers(ServerPush),
    /// Cross-policy sampling: the current policy gets every version, its stale snapshot every
    /// `stale_every` versions.
    Cross(CrossSync),
}

impl WeightSync {
    /// The in-process policy engine's stats (`None` for rollout servers, which report theirs
    /// on `/health`).
    pub fn engine_stats(&self) -> Option<EngineStats> {
        match self {
            WeightSync::Local(policy) => Some(policy.stats()),
            WeightSync::Servers(_) => None,
            WeightSync::Cross(sync) => Some(sync.engine_stats()),
        }
    }

    /// Makes `learner`'s current weights the rollout policy's, as `version`. Writes files for
    /// servers, so call it from a blocking thread (e.g. inside `Handle::block_on`).
    pub async fn publish(&self, learner: &Learner, version: u64) -> Result<()> {
        match self {
            WeightSync::Local(policy) => policy.set_weights(learner.weights(), version).await,
            WeightSync::Servers(push) => push.publish(learner, version).await,
            WeightSync::Cross(sync) => sync.publish(learner, version).await,
        }
    }
}

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

/// The rollout servers, their clients, and where pushed weights are written.
pub struct ServerPush {
    servers: Vec<Arc<HttpPolicy>>,
    dir: PathBuf,
    base_model: String,
    form: PushedForm,
}

impl ServerPush {
    /// Clients for `urls` (bearer `api_key` when given) and a router over them for rollouts;
    /// weights for `spec` go under `dir` (made absolute, so servers elsewhere on this machine
    /// find them).
    pub fn new(
        urls: &[String],
        api_key: Option<&str>,
        spec: &ModelSpec,
        dir: &Path,
        base_model: &str,
    ) -> Result<(Self, RouterPolicy)> {
        let form = match spec {
            ModelSpec::Tiny(_) => PushedForm::TinyFile,
            ModelSpec::Llama { lora: Some(_), .. } => PushedForm::Adapter,
            ModelSpec::Llama { lora: None, .. } => PushedForm::FullDir,
        };
        std::fs::create_dir_all(dir).map_err(|e| Error::io("creating", dir, e))?;
        let dir = dir
            .canonicalize()
            .map_err(|e| Error::io("resolving", dir, e))?;
        let servers = urls
            .iter()
            .enumerate()
            .map(|(i, url)| {
                let mut config = HttpPolicyConfig::new(url.as_str(), "agentrl");
                config.api_key = api_key.map(str::to_string);
                config.name = Some(url.clone());
                HttpPolicy::new(config).map(Arc::new).map_err(|e| {
                    Error::Config(format!("pipeline.rollout_servers[{i}] ({url:?}): {e}"))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let backends: Vec<Arc<dyn Policy>> = servers
            .iter()
            .map(|s| s.clone() as Arc<dyn Policy>)
            .collect();
        let router = RouterPolicy::new(backends)?;
        let push = ServerPush {
            servers,
            dir,
            base_model: base_model.to_string(),
            form,
        };
        Ok((push, router))
    }

    /// Where version `version`'s weights are written.
    fn path_of(&self, version: u64) -> PathBuf {
        match self.form {
            PushedForm::TinyFile => self.dir.join(format!("v{version:06}.safetensors")),
            PushedForm::Adapter | PushedForm::FullDir => self.dir.join(format!("v{version:06}")),
        }
    }

    /// Writes the weights, has every server load them, then removes the previous version.
    async fn publish(&self, learner: &Learner, version: u64) -> Result<()> {
        let path = self.path_of(version);
        match self.form {
            PushedForm::TinyFile => learner.save(&path)?,
            PushedForm::Adapter => learner.save_peft(&path, &self.base_model)?,
            PushedForm::FullDir => learner.save(&path.join(SINGLE_FILE))?,
        }
        let mut loads = JoinSet::new();
        for server in &self.servers {
            let (server, path) = (server.clone(), path.clone());
            loads.spawn(async move {
                let body = json!({ "path": path, "version": version });
                server
                    .post_json("/v1/load_weights", &body)
                    .await
                    .map_err(|e| {
                        Error::Trainer(format!(
                            "rollout server {} did not load weights version {version} from {}: \
                             {e}",
                            server.base_url(),
                            path.display()
                        ))
                    })
            });
        }
        while let Some(done) = loads.join_next().await {
            done.map_err(|e| Error::Trainer(format!("weight push task failed: {e}")))??;
        }
        if let Some(previous) = version.checked_sub(1).map(|v| self.path_of(v)) {
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
        Ok(())
    }
}
