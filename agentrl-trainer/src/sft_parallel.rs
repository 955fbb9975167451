//! Behaviour cloning's forward and backward passes, on the learner's thread alone or split
//! over replicas of a small model on the CPU.
//!
//! A small model's operations are too small for libtorch's OpenMP threads to share well: the
//! demo's 3-layer, 96-wide GPT ran 7.85 SFT steps/s with one libtorch thread and only 8.4–9.1
//! with two (a fifth of the time went to the threads waiting for each other), but 13.5 steps/s
//! with one thread on half the batch. So a step is dealt into parts of similar lengths
//! ([`deal_by_length`](crate::batch::deal_by_length)); the learner's thread backpropagates
//! the first part with one libtorch thread while each [`Replicas`] worker backpropagates
//! another on a thread of its own, also with one. A replica is a second model whose variables
//! share the learner's storage (no copy, and the optimiser's steps are seen at once) but keep
//! gradients of their own; after the passes the learner adds them to its gradients in replica
//! order, so the step is the same on every run.

use std::panic::AssertUnwindSafe;
use std::sync::mpsc;
use std::thread::JoinHandle;

use agentrl_core::{Error, Result};
use agentrl_policy::PolicyModel;
use tch::{Kind, Tensor, nn};

use crate::batch::PackedBatch;
use crate::loss::{LossAgg, Normalisers, aggregate};

/// Sums over some passes of a behaviour-cloning step.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct PassTotals {
    /// The backpropagated losses, summed.
    pub loss: f64,
    /// The mean entropy's share of these passes (their masked entropies over the step's
    /// trained tokens).
    pub entropy: f64,
    /// Trained tokens.
    pub tokens: usize,
}

impl PassTotals {
    fn add(&mut self, other: PassTotals) {
        self.loss += other.loss;
        self.entropy += other.entropy;
        self.tokens += other.tokens;
    }
}

/// The mean cross-entropy of `chunks`' policy tokens, reduced as `agg` says over the whole
/// step's `norms`, backpropagated one chunk at a time into `model`'s variables.
pub(crate) fn sft_passes(
    model: &dyn PolicyModel,
    chunks: &[PackedBatch],
    agg: LossAgg,
    norms: &Normalisers,
) -> PassTotals {
    let mut totals = PassTotals::default();
    for packed in chunks.iter().filter(|p| p.tokens > 0) {
        let (logp, entropy) = model.masked_token_logprobs(&packed.ids, &packed.mask, 1.0, false);
        let loss = aggregate(&-logp, &packed.mask, agg, norms);
        loss.backward();
        totals.loss += loss.double_value(&[]);
        totals.entropy += tch::no_grad(|| (entropy * &packed.mask).sum(Kind::Float) / norms.tokens)
            .double_value(&[]);
        totals.tokens += packed.tokens;
    }
    totals
}

/// A step's share for a replica.
struct Job {
    chunks: Vec<PackedBatch>,
    agg: LossAgg,
    norms: Normalisers,
}

/// A replica on its thread.
struct Worker {
    /// Closed (dropped) first when the worker is dropped, which ends its thread.
    jobs: Option<mpsc::Sender<Job>>,
    replies: mpsc::Receiver<std::result::Result<PassTotals, String>>,
    /// The replica's trainable variables, in the order of [`Replicas::own`].
    params: Vec<Tensor>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.jobs = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Replicas of the learner's model, each on a thread of its own with one libtorch thread,
/// that backpropagate shares of a behaviour-cloning step (see the module's documentation).
pub(crate) struct Replicas {
    /// The learner's trainable variables, sorted by name.
    own: Vec<Tensor>,
    workers: Vec<Worker>,
}

impl Replicas {
    /// `count` replicas of the model whose variables are `learner`, each made by `build` (a
    /// model whose variables share the learner's storage: `Learner::shared_model(true)`).
    /// Variables the learner does not train are not trained in the replicas either.
    pub(crate) fn new(
        learner: &nn::VarStore,
        count: usize,
        build: impl Fn() -> Result<(nn::VarStore, Box<dyn PolicyModel>)>,
    ) -> Result<Self> {
        let sources = learner.variables();
        let mut names: Vec<&String> = sources
            .iter()
            .filter(|(_, v)| v.requires_grad())
            .map(|(name, _)| name)
            .collect();
        names.sort();
        let own = names.iter().map(|n| sources[*n].shallow_clone()).collect();
        let workers =
            (0..count)
                .map(|index| {
                    let (vs, model) = build()?;
                    let replica = vs.variables();
                    for (name, var) in &replica {
                        let trains = sources.get(name).is_some_and(|s| s.requires_grad());
                        if var.requires_grad() != trains {
                            let _ = var.set_requires_grad(trains);
                        }
                    }
                    let params =
                        names
                            .iter()
                            .map(|name| {
                                replica.get(*name).map(Tensor::shallow_clone).ok_or_else(|| {
                            Error::Trainer(format!(
                                "SFT replica {index} lacks the learner's tensor `{name}`"
                            ))
                        })
                            })
                            .collect::<Result<Vec<_>>>()?;
                    Worker::start(index, vs, model, params)
                })
                .collect::<Result<Vec<_>>>()?;
        Ok(Replicas { own, workers })
    }

    /// How many replicas there are.
    pub(crate) fn len(&self) -> usize {
        self.workers.len()
    }

    /// Whether every replica still reads the learner's storage: false once the learner's
    /// variables were given new storage (a change of type, say), when they must be rebuilt.
    pub(crate) fn share_weights(&self) -> bool {
        self.workers.iter().all(|w| {
            w.params.len() == self.own.len()
                && w.params.iter().zip(&self.own).all(|(theirs, mine)| {
                    theirs.data_ptr() == mine.data_ptr() && theirs.size() == mine.size()
                })
        })
    }

    /// Backpropagates `parts[0]` into `model` (the learner's, on the calling thread, which
    /// should have one libtorch thread) and `parts[1..]` on the replicas at the same time, then adds the
    /// replicas' gradients to the learner's in replica order. `parts` holds at most one more
    /// part than there are replicas. Returns the totals of all parts, or why a replica failed
    /// (the learner's gradients are then incomplete and the step must be skipped).
    pub(crate) fn passes(
        &mut self,
        model: &dyn PolicyModel,
        parts: Vec<Vec<PackedBatch>>,
        agg: LossAgg,
        norms: &Normalisers,
    ) -> Result<PassTotals> {
        let mut parts = parts.into_iter();
        let first = parts.next().unwrap_or_default();
        let mut busy = Vec::new();
        for (worker, chunks) in self.workers.iter().zip(parts.by_ref()) {
            let job = Job {
                chunks,
                agg,
                norms: *norms,
            };
            let sent = worker
                .jobs
                .as_ref()
                .is_some_and(|jobs| jobs.send(job).is_ok());
            if !sent {
                return Err(Error::Trainer(
                    "an SFT replica's thread has ended; its share of the step was not run".into(),
                ));
            }
            busy.push(worker);
        }
        if parts.next().is_some() {
            return Err(Error::Trainer(format!(
                "an SFT step was dealt into more parts than there are replicas ({}) plus one",
                self.workers.len()
            )));
        }
        let mut totals = sft_passes(model, &first, agg, norms);
        let mut failure = None;
        for (index, worker) in busy.iter().enumerate() {
            match worker.replies.recv() {
                Ok(Ok(share)) => totals.add(share),
                Ok(Err(why)) => failure = Some(format!("SFT replica {index} failed: {why}")),
                Err(_) => failure = Some(format!("SFT replica {index}'s thread ended")),
            }
        }
        if let Some(why) = failure {
            self.clear_gradients();
            return Err(Error::Trainer(why));
        }
        for worker in &busy {
            for (mine, theirs) in self.own.iter().zip(&worker.params) {
                add_gradient(mine, theirs)?;
            }
        }
        self.clear_gradients();
        Ok(totals)
    }

    /// Zeroes the replicas' gradients for the next step.
    fn clear_gradients(&mut self) {
        for worker in &mut self.workers {
            for param in &mut worker.params {
                param.zero_grad();
            }
        }
    }
}

impl Worker {
    /// Starts replica `index`'s thread, which owns `vs` and `model`; `params` are handles to
    /// its trainable variables.
    fn start(
        index: usize,
        vs: nn::VarStore,
        model: Box<dyn PolicyModel>,
        params: Vec<Tensor>,
    ) -> Result<Self> {
        let (jobs, job_rx) = mpsc::channel::<Job>();
        let (reply_tx, replies) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name(format!("sft-replica-{index}"))
            .spawn(move || {
                agentrl_policy::set_torch_threads(1);
                let _variables = vs;
                while let Ok(job) = job_rx.recv() {
                    let run = std::panic::catch_unwind(AssertUnwindSafe(|| {
                        sft_passes(model.as_ref(), &job.chunks, job.agg, &job.norms)
                    }));
                    let reply =
                        run.map_err(|panic| agentrl_core::panic_message(panic.as_ref()).to_owned());
                    if reply_tx.send(reply).is_err() {
                        break;
                    }
                }
            })
            .map_err(|e| Error::Trainer(format!("starting SFT replica {index}'s thread: {e}")))?;
        Ok(Worker {
            jobs: Some(jobs),
            replies,
            params,
            thread: Some(thread),
        })
    }
}

/// Adds `theirs`'s gradient (if any) to `mine`'s.
fn add_gradient(mine: &Tensor, theirs: &Tensor) -> Result<()> {
    let grad = theirs.grad();
    if !grad.defined() {
        return Ok(());
    }
    let mut own = mine.grad();
    if own.defined() {
        tch::no_grad(|| own.f_add_(&grad))
            .map(|_| ())
            .map_err(|e| Error::Trainer(format!("adding an SFT replica's gradient: {e}")))
    } else {
        // No gradient yet (the learner's part never reached this variable): backpropagating
        // `sum(mine · grad)` gives it exactly `grad`.
        (mine * grad.detach())
            .f_sum(Kind::Float)
            .and_then(|s| s.f_backward())
            .map_err(|e| Error::Trainer(format!("adding an SFT replica's gradient: {e}")))
    }
}
