//! Where the learner's weights go after every step ([`WeightSync`]): into the in-process
//! rollout policy (and, with `[rl.cross_policy]`, its stale snapshot every `stale_every`
//! steps), or to the `agentrl serve` processes that generate the rollouts. A synchronous run's
//! in-process policy reads the learner's own tensors, so nothing is copied.
//!
//! For servers ([`ServerPush`], in `weight_sync/push.rs`), the learner writes the new weights
//! under the run directory (a safetensors file for the tiny GPT, a PEFT adapter directory for a
//! LoRA model, a directory with `model.safetensors` for a fully fine-tuned pretrained model) and
//! pushes them to every server the way its [`crate::config::PushMode`] says
//! (`weight_sync/wire.rs`): by path (`agentrl serve` on a shared file system, vLLM's runtime LoRA
//! loading, SGLang's update from disk or LoRA loading) or by a checksummed HTTP upload to
//! `agentrl serve`. A push that fails is retried; a server that still fails is dropped from the
//! rollout router with a warning, and the run stops only when no server is left.

mod push;
mod wire;

use agentrl_core::Result;
use agentrl_policy::{EngineStats, NamedWeights, TchPolicy, WeightsQueued};

use crate::cross_policy::{CrossSync, add_stats};
use crate::learner::Learner;

pub use push::{PushRetry, ServerPush};

/// The in-process model threads that generate the rollouts (`[pipeline] engines`): one, or
/// several behind a router that keeps each session on one of them.
pub struct Engines {
    first: TchPolicy,
    more: Vec<TchPolicy>,
}

impl Engines {
    /// `first` and then `more`.
    pub fn new(first: TchPolicy, more: Vec<TchPolicy>) -> Self {
        Engines { first, more }
    }

    /// The first model thread (where a synchronous run's updates run).
    pub fn first(&self) -> &TchPolicy {
        &self.first
    }

    /// Every model thread, the first first.
    pub fn all(&self) -> impl Iterator<Item = &TchPolicy> {
        std::iter::once(&self.first).chain(&self.more)
    }

    /// Their engines' stats, summed.
    pub fn stats(&self) -> EngineStats {
        self.more.iter().fold(self.first.stats(), |sum, engine| {
            add_stats(sum, &engine.stats())
        })
    }

    /// Gives every model thread `weights` as `version` (each copies them into its own).
    async fn set_weights(&self, weights: NamedWeights, version: u64) -> Result<()> {
        for engine in &self.more {
            engine
                .set_weights(shallow_copies(&weights), version)
                .await?;
        }
        self.first.set_weights(weights, version).await
    }

    /// Queues `weights` as `version` for every model thread.
    fn queue_weights(&self, weights: NamedWeights, version: u64) -> Result<WeightsQueued> {
        let mut queued = Vec::with_capacity(self.more.len() + 1);
        for engine in &self.more {
            queued.push(engine.queue_weights(shallow_copies(&weights), version)?);
        }
        queued.push(self.first.queue_weights(weights, version)?);
        Ok(WeightsQueued::join(queued))
    }
}

/// Handles to the same tensors, for a second model thread to copy from.
fn shallow_copies(weights: &NamedWeights) -> NamedWeights {
    weights
        .iter()
        .map(|(name, tensor)| (name.clone(), tensor.shallow_clone()))
        .collect()
}

/// How new weights reach the policy that generates rollouts.
pub enum WeightSync {
    /// The in-process model threads: weights are copied in place.
    Local(Engines),
    /// The in-process model threads reading the learner's own tensors (the synchronous
    /// pipeline, see `Learner::shared_model`): the update already changed their weights, so
    /// publishing only sets the version (and drops the KV caches of the old one).
    Shared(Engines),
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
            WeightSync::Local(engines) | WeightSync::Shared(engines) => Some(engines.stats()),
            WeightSync::Servers(_) => None,
            WeightSync::Cross(sync) => Some(sync.engine_stats()),
        }
    }

    /// Rollout servers dropped so far after failed pushes (0 without servers).
    pub fn servers_dropped(&self) -> usize {
        match self {
            WeightSync::Servers(push) => push.dropped(),
            WeightSync::Local(_) | WeightSync::Shared(_) | WeightSync::Cross(_) => 0,
        }
    }

    /// Makes `learner`'s current weights the rollout policy's, as `version`. Writes files for
    /// servers, so call it from a blocking thread (e.g. inside `Handle::block_on`).
    pub async fn publish(&self, learner: &Learner, version: u64) -> Result<()> {
        match self {
            WeightSync::Local(engines) => engines.set_weights(learner.weights(), version).await,
            WeightSync::Shared(engines) => engines.set_weights(Vec::new(), version).await,
            WeightSync::Servers(push) => push.publish(learner, version).await,
            WeightSync::Cross(sync) => sync.publish(learner, version).await,
        }
    }

    /// Starts [`WeightSync::publish`] without waiting, where the rollout policy runs in this
    /// process on a copy of the weights (`Local`, `Cross`): the copy is made now and queued
    /// for the model threads, which take it once their running generations finish, so the
    /// learner can go on with the next step meanwhile. `None` for the others, which
    /// `publish` serves: a synchronous run's policy reads the learner's own tensors, and
    /// servers load files written from the learner.
    pub fn queue(&self, learner: &Learner, version: u64) -> Result<Option<WeightsQueued>> {
        Ok(match self {
            WeightSync::Local(engines) => Some(engines.queue_weights(learner.weights(), version)?),
            WeightSync::Cross(sync) => Some(sync.queue(learner, version)?),
            WeightSync::Shared(_) | WeightSync::Servers(_) => None,
        })
    }
}
