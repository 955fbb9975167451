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
use agentrl_policy::{EngineStats, TchPolicy, WeightsQueued};

use crate::cross_policy::CrossSync;
use crate::learner::Learner;

pub use push::{PushRetry, ServerPush};

/// How new weights reach the policy that generates rollouts.
pub enum WeightSync {
    /// The in-process policy thread: weights are copied in place.
    Local(TchPolicy),
    /// The in-process policy thread reading the learner's own tensors (the synchronous
    /// pipeline, see `Learner::shared_model`): the update already changed its weights, so
    /// publishing only sets the version (and drops the KV caches of the old one).
    Shared(TchPolicy),
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
            WeightSync::Local(policy) | WeightSync::Shared(policy) => Some(policy.stats()),
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
            WeightSync::Local(policy) => policy.set_weights(learner.weights(), version).await,
            WeightSync::Shared(policy) => policy.set_weights(Vec::new(), version).await,
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
            WeightSync::Local(policy) => Some(policy.queue_weights(learner.weights(), version)?),
            WeightSync::Cross(sync) => Some(sync.queue(learner, version)?),
            WeightSync::Shared(_) | WeightSync::Servers(_) => None,
        })
    }
}
