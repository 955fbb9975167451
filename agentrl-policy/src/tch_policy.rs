//! [`TchPolicy`]: a tch model on its own thread, serving async callers through the
//! continuous-batching engine.
//!
//! Every `generate` call from any task is queued for the model thread, which keeps one running
//! batch: new requests join it at the next step, finished ones leave at once, and a session's
//! keys and values are kept between its turns so the next turn feeds only its new ids (see
//! [`EngineOptions`] and [`EngineStats`]). Weights are replaced in place by
//! [`TchPolicy::set_weights`] once the running batch has drained ([`TchPolicy::queue_weights`]
//! returns without waiting for that).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};

use agentrl_core::{Error, Generation, GenerationRequest, Policy, Result};
use async_trait::async_trait;
use tch::{Tensor, nn};
use tokio::sync::mpsc as mpsc_async;
use tokio::sync::oneshot;

use crate::decode::{Detokenizer, PolicyModel};
use crate::engine::{Engine, Job};
pub use crate::engine::{EngineOptions, EngineStats, StreamedToken};

/// Named weight tensors, as produced by [`snapshot_weights`].
pub type NamedWeights = Vec<(String, Tensor)>;

enum Command {
    Generate(Job),
    SetWeights(NamedWeights, u64, oneshot::Sender<Result<()>>),
    EndSession(String),
    Run(Box<dyn FnOnce() + Send>),
}

/// A generation in progress whose tokens arrive as they are sampled
/// ([`TchPolicy::generate_streaming`]).
pub struct GenerationStream {
    /// Every sampled token, in order per request.
    pub tokens: mpsc_async::UnboundedReceiver<StreamedToken>,
    done: oneshot::Receiver<Result<Vec<Generation>>>,
}

impl GenerationStream {
    /// The finished generations (after the last token was sent).
    pub async fn finish(self) -> Result<Vec<Generation>> {
        answer(self.done).await
    }
}

/// The model thread's answer to a submitted job.
async fn answer(done: oneshot::Receiver<Result<Vec<Generation>>>) -> Result<Vec<Generation>> {
    done.await
        .map_err(|_| Error::Policy("the model thread dropped a request".into()))?
}

/// A handle to a model thread; cheap to clone. The thread stops, and is joined, when the last
/// handle is dropped, so no libtorch work outlives its owners.
#[derive(Clone)]
pub struct TchPolicy {
    inner: Arc<Inner>,
    version: Arc<AtomicU64>,
    stats: Arc<Mutex<EngineStats>>,
}

struct Inner {
    tx: Option<mpsc::Sender<Command>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Inner {
    fn send(&self, command: Command) -> Result<()> {
        self.tx
            .as_ref()
            .and_then(|tx| tx.send(command).ok())
            .ok_or_else(|| Error::Policy("the model thread has stopped".into()))
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Closing the channel ends the thread's loop; joining waits for its tensors to be freed.
        self.tx.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Deep copies of all variables of `vs`, for sending to a [`TchPolicy`] or saving.
pub fn snapshot_weights(vs: &nn::VarStore) -> NamedWeights {
    tch::no_grad(|| {
        let mut named: NamedWeights = vs
            .variables()
            .into_iter()
            .map(|(name, t)| (name, t.detach().copy()))
            .collect();
        named.sort_by(|a, b| a.0.cmp(&b.0));
        named
    })
}

impl TchPolicy {
    /// Starts the model thread for `model` (a [`crate::TinyGpt`], a [`crate::llama::Llama`] or
    /// any [`PolicyModel`]) whose variables live in `vs`, with the default [`EngineOptions`]
    /// but at most `max_batch` running rows; `seed` seeds the sampling streams of requests that
    /// bring no seed of their own. Requests with stop strings are refused: see
    /// [`TchPolicy::spawn_with_detokenizer`].
    pub fn spawn<M: PolicyModel>(
        vs: nn::VarStore,
        model: M,
        max_batch: usize,
        seed: u64,
    ) -> Result<Self> {
        Self::spawn_with_options(
            vs,
            model,
            EngineOptions::with_max_batch(max_batch),
            seed,
            None,
        )
    }

    /// [`TchPolicy::spawn`] with the text view of generated ids (normally the chat format's
    /// `decode`), so requests may stop at stop strings.
    pub fn spawn_with_detokenizer<M: PolicyModel>(
        vs: nn::VarStore,
        model: M,
        max_batch: usize,
        seed: u64,
        detokenizer: Detokenizer,
    ) -> Result<Self> {
        let options = EngineOptions::with_max_batch(max_batch);
        Self::spawn_with_options(vs, model, options, seed, Some(detokenizer))
    }

    /// Starts the model thread with every engine knob given.
    pub fn spawn_with_options<M: PolicyModel>(
        vs: nn::VarStore,
        model: M,
        options: EngineOptions,
        seed: u64,
        detokenizer: Option<Detokenizer>,
    ) -> Result<Self> {
        let (tx, rx) = mpsc::channel::<Command>();
        let version = Arc::new(AtomicU64::new(0));
        let stats = Arc::new(Mutex::new(EngineStats::default()));
        let (v, published) = (version.clone(), stats.clone());
        // libtorch keeps its thread count per OS thread (see `crate::threads`): this thread
        // sets its own, the spawner's by default.
        let threads = options
            .threads
            .filter(|&n| n > 0)
            .unwrap_or_else(tch::get_num_threads);
        let thread = std::thread::Builder::new()
            .name("agentrl-policy".into())
            .spawn(move || {
                crate::threads::set_torch_threads(threads);
                let engine = Engine::new(model, detokenizer, options, seed, published);
                ModelThread {
                    engine,
                    vs,
                    version: v,
                    updates: Vec::new(),
                }
                .run(rx)
            })
            .map_err(|e| Error::Policy(format!("could not start the model thread: {e}")))?;
        Ok(TchPolicy {
            inner: Arc::new(Inner {
                tx: Some(tx),
                thread: Some(thread),
            }),
            version,
            stats,
        })
    }

    /// Replaces the weights (matched by name) and sets the policy version, once the
    /// generations in progress have finished with the old ones.
    pub async fn set_weights(&self, weights: NamedWeights, version: u64) -> Result<()> {
        self.queue_weights(weights, version)?.taken().await
    }

    /// Like [`TchPolicy::set_weights`], but returns as soon as the weights are queued: the
    /// returned [`WeightsQueued`] says when the model thread has taken them (or why not).
    /// Queue the next weights only after these were taken, or both are copied in turn.
    pub fn queue_weights(&self, weights: NamedWeights, version: u64) -> Result<WeightsQueued> {
        let (tx, rx) = oneshot::channel();
        self.inner.send(Command::SetWeights(weights, version, tx))?;
        Ok(WeightsQueued(vec![rx]))
    }

    /// Like [`Policy::generate`], but every token is also sent on the returned stream as soon as
    /// it is sampled (batched with other calls as usual).
    pub fn generate_streaming(&self, requests: Vec<GenerationRequest>) -> Result<GenerationStream> {
        let (token_tx, tokens) = mpsc_async::unbounded_channel();
        let done = self.submit(requests, Some(token_tx))?;
        Ok(GenerationStream { tokens, done })
    }

    /// Queues `requests` for the model thread; the receiver gets the generations.
    fn submit(
        &self,
        requests: Vec<GenerationRequest>,
        stream: Option<mpsc_async::UnboundedSender<StreamedToken>>,
    ) -> Result<oneshot::Receiver<Result<Vec<Generation>>>> {
        let (reply, done) = oneshot::channel();
        self.inner.send(Command::Generate(Job {
            requests,
            stream,
            reply,
        }))?;
        Ok(done)
    }

    /// Runs `work` on the model thread between two engine steps and returns its result,
    /// blocking the caller (call it from a blocking thread, not from async code).
    ///
    /// libgomp gives every OS thread that runs a parallel libtorch operation a team of
    /// threads of its own, and once the process holds more of them than there are cores, an
    /// idle team member sleeps after a hundred spins instead of some 300,000, so each small
    /// operation of the busy team waits for a wake-up. A learner that runs its updates here,
    /// while the engine is idle, shares the model thread's team: the synchronous pipeline
    /// does so (a SmolLM2-shaped decode layer took 1.0 ms with one team and 1.7 ms beside a
    /// second, idle one). `work` runs with `threads` libtorch threads (`None`: the model thread's);
    /// the model thread's own count is restored after it. A panic in `work` is reported as
    /// an error and leaves the thread serving.
    pub fn run_on_model_thread<R: Send + 'static>(
        &self,
        threads: Option<i32>,
        work: impl FnOnce() -> R + Send + 'static,
    ) -> Result<R> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.inner.send(Command::Run(Box::new(move || {
            let work = std::panic::AssertUnwindSafe(work);
            let n = threads
                .filter(|&n| n > 0)
                .unwrap_or_else(tch::get_num_threads);
            let result = crate::threads::with_torch_threads(n, || std::panic::catch_unwind(work));
            let _ = tx.send(result);
        })))?;
        match rx.recv() {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(_)) => Err(Error::Policy(
                "work run on the model thread panicked".into(),
            )),
            Err(_) => Err(Error::Policy(
                "the model thread stopped before running the work".into(),
            )),
        }
    }

    /// What the engine has done and holds (as of its last step).
    pub fn stats(&self) -> EngineStats {
        self.stats.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Number of prefill forward passes run so far: how many passes new requests shared (for
    /// tests of batching).
    pub fn batches_run(&self) -> u64 {
        self.stats().prefill_batches
    }
}

#[async_trait]
impl Policy for TchPolicy {
    async fn generate(&self, requests: Vec<GenerationRequest>) -> Result<Vec<Generation>> {
        if requests.is_empty() {
            return Ok(Vec::new());
        }
        answer(self.submit(requests, None)?).await
    }

    fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    fn end_session(&self, session: &str) {
        // A stopped thread has nothing cached to free.
        let _ = self.inner.send(Command::EndSession(session.to_string()));
    }
}

fn apply_weights(vs: &nn::VarStore, weights: &NamedWeights) -> Result<()> {
    let vars = vs.variables();
    tch::no_grad(|| {
        for (name, src) in weights {
            let mut dst = vars
                .get(name)
                .ok_or_else(|| Error::Policy(format!("weight update has unknown tensor `{name}`")))?
                .shallow_clone();
            if dst.size() != src.size() {
                return Err(Error::Policy(format!(
                    "weight `{name}` has shape {:?}, the model expects {:?}",
                    src.size(),
                    dst.size()
                )));
            }
            dst.f_copy_(src)
                .map_err(|e| Error::Policy(format!("copying weight `{name}`: {e}")))?;
        }
        Ok(())
    })
}

/// Weights queued for one or more model threads ([`TchPolicy::queue_weights`],
/// [`WeightsQueued::join`]), not yet known to be taken.
#[must_use = "the weights may not be taken yet: await `taken`"]
pub struct WeightsQueued(Vec<oneshot::Receiver<Result<()>>>);

impl WeightsQueued {
    /// One handle for weights queued for several model threads: its `taken` waits for all.
    pub fn join(parts: impl IntoIterator<Item = WeightsQueued>) -> WeightsQueued {
        WeightsQueued(parts.into_iter().flat_map(|part| part.0).collect())
    }

    /// Waits until every model thread has replaced its weights (once the generations running
    /// when they arrived have finished), or says why one could not.
    pub async fn taken(self) -> Result<()> {
        for receiver in self.0 {
            receiver
                .await
                .map_err(|_| Error::Policy("the model thread dropped a weight update".into()))??;
        }
        Ok(())
    }
}

/// What the model thread owns: the engine, the variables it updates, and weight updates that
/// wait for the running batch to drain.
struct ModelThread<M> {
    engine: Engine<M>,
    vs: nn::VarStore,
    version: Arc<AtomicU64>,
    updates: Vec<(NamedWeights, u64, oneshot::Sender<Result<()>>)>,
}

impl<M: PolicyModel> ModelThread<M> {
    /// Serves commands until every handle is dropped.
    fn run(mut self, rx: mpsc::Receiver<Command>) {
        loop {
            if self.engine.is_idle() && self.updates.is_empty() {
                // Nothing to do: sleep until a command comes, then give concurrent callers a
                // moment to arrive so their prompts share the first prefill.
                match rx.recv() {
                    Ok(command) => self.handle(command),
                    Err(_) => return,
                }
                let deadline = std::time::Instant::now() + GATHER_WINDOW;
                while let Ok(command) =
                    rx.recv_timeout(deadline.saturating_duration_since(std::time::Instant::now()))
                {
                    self.handle(command);
                }
            }
            loop {
                match rx.try_recv() {
                    Ok(command) => self.handle(command),
                    Err(mpsc::TryRecvError::Empty) => break,
                    Err(mpsc::TryRecvError::Disconnected) => {
                        if self.engine.is_idle() {
                            return;
                        }
                        break;
                    }
                }
            }
            if !self.updates.is_empty() && !self.engine.has_running() {
                self.apply_updates();
            }
            if !self.engine.is_idle() {
                self.engine.step(self.updates.is_empty());
            }
        }
    }

    fn handle(&mut self, command: Command) {
        match command {
            Command::Generate(job) => self.engine.submit(job),
            Command::SetWeights(w, v, reply) => self.updates.push((w, v, reply)),
            Command::EndSession(session) => self.engine.end_session(&session),
            Command::Run(work) => work(),
        }
    }

    /// Applies the waiting weight updates in order (the running batch is empty).
    fn apply_updates(&mut self) {
        for (weights, version, reply) in std::mem::take(&mut self.updates) {
            let r = apply_weights(&self.vs, &weights);
            if r.is_ok() {
                self.version.store(version, Ordering::Release);
                self.engine.weights_changed(version);
            }
            let _ = reply.send(r);
        }
    }
}

/// How long an idle model thread waits for more requests after the first, so that calls made
/// together share their prefill.
const GATHER_WINDOW: std::time::Duration = std::time::Duration::from_millis(2);
