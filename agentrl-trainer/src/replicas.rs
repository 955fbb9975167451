//! Data-parallel passes of an update on the CPU: replicas of the learner's model, each on a
//! thread of its own with one libtorch thread, that backpropagate shares of a step.
//!
//! A small model's operations are too small for libtorch's OpenMP threads to share well: the
//! demo's 3-layer, 96-wide GPT ran 7.85 SFT steps/s with one libtorch thread and only 8.4–9.1
//! with two (a fifth of the time went to the threads waiting for each other), but 13.5 steps/s
//! with one thread on half the batch. So the learner cuts a step into parts (behaviour cloning
//! deals its demonstrations by length, a policy update hands out its micro-batches); its own
//! thread backpropagates the first part with one libtorch thread while each [`Replicas`]
//! worker backpropagates another, also with one. A replica is a second model whose variables
//! share the learner's storage (no copy, and the optimiser's steps are seen at once) but keep
//! gradients of their own, built without drawing from libtorch's generator; after the passes
//! the learner adds their gradients to its own in replica order, so the step is the same on
//! every run.

use std::panic::AssertUnwindSafe;
use std::sync::mpsc;
use std::thread::JoinHandle;

use agentrl_core::{Error, Result};
use agentrl_policy::PolicyModel;
use tch::{Kind, Tensor, nn};

/// One part of a step: forward and backward passes through the model it is given (their
/// gradients accumulate in its variables), returning what it measured.
pub(crate) type Part<R> = Box<dyn FnOnce(&dyn PolicyModel) -> R + Send>;

/// A replica on its thread.
struct Worker<R> {
    /// Closed (dropped) first when the worker is dropped, which ends its thread.
    parts: Option<mpsc::Sender<Part<R>>>,
    replies: mpsc::Receiver<std::result::Result<R, String>>,
    /// The replica's trainable variables, in the order of [`Replicas::own`].
    params: Vec<Tensor>,
    thread: Option<JoinHandle<()>>,
}

impl<R> Drop for Worker<R> {
    fn drop(&mut self) {
        self.parts = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Replicas of the learner's model, each on a thread of its own with one libtorch thread,
/// that run parts of a step (see the module's documentation); `R` is what a part returns.
pub(crate) struct Replicas<R> {
    /// The learner's trainable variables, sorted by name.
    own: Vec<Tensor>,
    workers: Vec<Worker<R>>,
}

impl<R: Send + 'static> Replicas<R> {
    /// `count` replicas of the model whose variables are `learner`, each made by `build` (a
    /// model whose variables share the learner's storage, built without drawing from
    /// libtorch's generator: `Learner::replica_model`).
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
        let workers = (0..count)
            .map(|index| {
                let (vs, model) = build()?;
                let replica = vs.variables();
                for (name, var) in &replica {
                    let trains = sources.get(name).is_some_and(|s| s.requires_grad());
                    if var.requires_grad() != trains {
                        let _ = var.set_requires_grad(trains);
                    }
                }
                let params = names
                    .iter()
                    .map(|name| {
                        replica
                            .get(*name)
                            .map(Tensor::shallow_clone)
                            .ok_or_else(|| {
                                Error::Trainer(format!(
                                    "replica {index} lacks the learner's tensor `{name}`"
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

    /// Runs `parts[0]` on `model` (the learner's, on the calling thread, which should have one
    /// libtorch thread) and `parts[1..]` on the replicas at the same time, then adds the
    /// replicas' gradients to the learner's in replica order. `parts` holds at most one more
    /// part than there are replicas. Returns what the parts returned, in order, or why a
    /// replica failed (the learner's gradients are then incomplete and the step must be
    /// skipped).
    pub(crate) fn run(&mut self, model: &dyn PolicyModel, parts: Vec<Part<R>>) -> Result<Vec<R>> {
        if parts.len() > self.workers.len() + 1 {
            return Err(Error::Trainer(format!(
                "a step was cut into {} parts for {} replicas and the learner",
                parts.len(),
                self.workers.len()
            )));
        }
        let mut parts = parts.into_iter();
        let Some(first) = parts.next() else {
            return Ok(Vec::new());
        };
        let mut busy = Vec::new();
        for (worker, part) in self.workers.iter().zip(parts) {
            let sent = worker
                .parts
                .as_ref()
                .is_some_and(|tx| tx.send(part).is_ok());
            if !sent {
                return Err(Error::Trainer(
                    "a replica's thread has ended; its part of the step was not run".into(),
                ));
            }
            busy.push(worker);
        }
        let mut results = vec![first(model)];
        let mut failure = None;
        for (index, worker) in busy.iter().enumerate() {
            match worker.replies.recv() {
                Ok(Ok(result)) => results.push(result),
                Ok(Err(why)) => failure = Some(format!("replica {index} failed: {why}")),
                Err(_) => failure = Some(format!("replica {index}'s thread ended")),
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
        Ok(results)
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

impl<R: Send + 'static> Worker<R> {
    /// Starts replica `index`'s thread, which owns `vs` and `model`; `params` are handles to
    /// its trainable variables.
    fn start(
        index: usize,
        vs: nn::VarStore,
        model: Box<dyn PolicyModel>,
        params: Vec<Tensor>,
    ) -> Result<Self> {
        let (parts, part_rx) = mpsc::channel::<Part<R>>();
        let (reply_tx, replies) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name(format!("replica-{index}"))
            .spawn(move || {
                agentrl_policy::set_torch_threads(1);
                let _variables = vs;
                while let Ok(part) = part_rx.recv() {
                    let run = std::panic::catch_unwind(AssertUnwindSafe(|| part(model.as_ref())));
                    let reply =
                        run.map_err(|panic| agentrl_core::panic_message(panic.as_ref()).to_owned());
                    if reply_tx.send(reply).is_err() {
                        break;
                    }
                }
            })
            .map_err(|e| Error::Trainer(format!("starting replica {index}'s thread: {e}")))?;
        Ok(Worker {
            parts: Some(parts),
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
            .map_err(|e| Error::Trainer(format!("adding a replica's gradient: {e}")))
    } else {
        // No gradient yet (the learner's part never reached this variable): backpropagating
        // `sum(mine · grad)` gives it exactly `grad`.
        (mine * grad.detach())
            .f_sum(Kind::Float)
            .and_then(|s| s.f_backward())
            .map_err(|e| Error::Trainer(format!("adding a replica's gradient: {e}")))
    }
}
