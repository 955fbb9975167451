//! [`TchPolicy`]: a tch model on its own thread, serving batched generation to async callers.
//!
//! Every `generate` call from any task is queued; the model thread takes everything waiting
//! (up to `max_batch` rows) and runs it as one batch, so concurrent env sessions share forward
//! passes. Weights are replaced in place by [`TchPolicy::set_weights`] between batches.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;

use agentrl_core::{Error, Generation, GenerationRequest, Policy, Result, SeededRng, TokenId};
use async_trait::async_trait;
use tch::{Tensor, nn};
use tokio::sync::mpsc as mpsc_async;
use tokio::sync::oneshot;

use crate::decode::{Detokenizer, PolicyModel};

/// Named weight tensors, as produced by [`snapshot_weights`].
pub type NamedWeights = Vec<(String, Tensor)>;

enum Command {
    Generate(Job),
    SetWeights(NamedWeights, u64, oneshot::Sender<Result<()>>),
}

/// A token as it is sampled: the index of its request in the call, the id, its log-probability.
pub type StreamedToken = (usize, TokenId, f32);

/// One `generate` call waiting for the model thread.
struct Job {
    requests: Vec<GenerationRequest>,
    /// Where each token goes as soon as it is sampled, for streaming calls.
    stream: Option<mpsc_async::UnboundedSender<StreamedToken>>,
    reply: oneshot::Sender<Result<Vec<Generation>>>,
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
    batches: Arc<AtomicU64>,
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
    /// any [`PolicyModel`]) whose variables live in `vs`. `max_batch` bounds the rows of one
    /// forward batch; `seed` seeds the sampling streams of requests that bring no seed of their
    /// own. Requests with stop strings are refused: see [`TchPolicy::spawn_with_detokenizer`].
    pub fn spawn<M: PolicyModel>(
        vs: nn::VarStore,
        model: M,
        max_batch: usize,
        seed: u64,
    ) -> Result<Self> {
        Self::spawn_inner(vs, model, max_batch, seed, None)
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
        Self::spawn_inner(vs, model, max_batch, seed, Some(detokenizer))
    }

    fn spawn_inner<M: PolicyModel>(
        vs: nn::VarStore,
        model: M,
        max_batch: usize,
        seed: u64,
        detokenizer: Option<Detokenizer>,
    ) -> Result<Self> {
        let (tx, rx) = mpsc::channel::<Command>();
        let version = Arc::new(AtomicU64::new(0));
        let batches = Arc::new(AtomicU64::new(0));
        let v = version.clone();
        let nb = batches.clone();
        let thread = std::thread::Builder::new()
            .name("agentrl-policy".into())
            .spawn(move || {
                let thread = ModelThread {
                    model,
                    detokenizer,
                    version: v,
                    batches: nb,
                    max_batch: max_batch.max(1),
                    seeds: SeededRng::new(seed),
                };
                thread.run(vs, rx)
            })
            .map_err(|e| Error::Policy(format!("could not start the model thread: {e}")))?;
        Ok(TchPolicy {
            inner: Arc::new(Inner {
                tx: Some(tx),
                thread: Some(thread),
            }),
            version,
            batches,
        })
    }

    /// Replaces the weights (matched by name) and sets the policy version.
    pub async fn set_weights(&self, weights: NamedWeights, version: u64) -> Result<()> {
        let (tx, rx) = oneshot::channel();
        self.inner.send(Command::SetWeights(weights, version, tx))?;
        rx.await
            .map_err(|_| Error::Policy("the model thread dropped a weight update".into()))?
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

    /// Number of forward batches run so far (for metrics and tests of batching).
    pub fn batches_run(&self) -> u64 {
        self.batches.load(Ordering::Relaxed)
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

/// What the model thread owns: the model, its text view and its counters.
struct ModelThread<M> {
    model: M,
    detokenizer: Option<Detokenizer>,
    version: Arc<AtomicU64>,
    batches: Arc<AtomicU64>,
    max_batch: usize,
    /// Seeds the streams of requests without a seed of their own.
    seeds: SeededRng,
}

impl<M: PolicyModel> ModelThread<M> {
    /// Serves commands until every handle is dropped.
    fn run(mut self, vs: nn::VarStore, rx: mpsc::Receiver<Command>) {
        let mut pending: Option<Command> = None;
        loop {
            let first = match pending.take() {
                Some(c) => c,
                None => match rx.recv() {
                    Ok(c) => c,
                    Err(_) => return,
                },
            };
            match first {
                Command::SetWeights(w, v, reply) => {
                    let r = apply_weights(&vs, &w);
                    if r.is_ok() {
                        self.version.store(v, Ordering::Release);
                    }
                    let _ = reply.send(r);
                }
                Command::Generate(job) => {
                    let mut rows: usize = job.requests.len();
                    let mut jobs = vec![job];
                    // Wait a moment for other sessions' requests, so they share this batch.
                    let deadline = std::time::Instant::now() + GATHER_WINDOW;
                    while rows < self.max_batch {
                        let left = deadline.saturating_duration_since(std::time::Instant::now());
                        match rx.recv_timeout(left) {
                            Ok(Command::Generate(job)) => {
                                rows += job.requests.len();
                                jobs.push(job);
                            }
                            Ok(other) => {
                                pending = Some(other);
                                break;
                            }
                            Err(_) => break,
                        }
                    }
                    self.run_batch(jobs);
                    self.batches.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// Generates for every job in one batch and answers each job with its rows.
    fn run_batch(&mut self, jobs: Vec<Job>) {
        if jobs.is_empty() {
            return;
        }
        let mut prompts = Vec::new();
        let mut params = Vec::new();
        let mut rngs = Vec::new();
        // For every row: its job and its index in that job.
        let mut owners = Vec::new();
        for (j, job) in jobs.iter().enumerate() {
            for (i, r) in job.requests.iter().enumerate() {
                prompts.push(r.prompt_ids.clone());
                rngs.push(match r.params.seed {
                    Some(s) => SeededRng::new(s),
                    None => SeededRng::new(self.seeds.next_u64()),
                });
                params.push(r.params.clone());
                owners.push((j, i));
            }
        }
        let v = self.version.load(Ordering::Acquire);
        // Which jobs' streams have had tokens (a retry must not send them again).
        let mut streamed = vec![false; jobs.len()];
        let mut on_token = |row: usize, id: TokenId, logprob: f32| {
            if let Some(&(j, i)) = owners.get(row)
                && let Some(stream) = &jobs[j].stream
            {
                // A caller that stopped listening only loses the stream, not the generation.
                let _ = stream.send((i, id, logprob));
                streamed[j] = true;
            }
        };
        let (model, detokenizer) = (&self.model, self.detokenizer.as_ref());
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            model.generate_with(&prompts, &params, &mut rngs, v, detokenizer, &mut on_token)
        }))
        .unwrap_or_else(|panic| {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            Err(Error::Policy(format!(
                "generation failed inside libtorch: {what}"
            )))
        });
        match result {
            Ok(all) => {
                let mut it = all.into_iter();
                for job in jobs {
                    let mine: Vec<Generation> = it.by_ref().take(job.requests.len()).collect();
                    let _ = job.reply.send(Ok(mine));
                }
            }
            Err(e) if jobs.len() == 1 => {
                if let Some(job) = jobs.into_iter().next() {
                    let _ = job.reply.send(Err(e));
                }
            }
            Err(e) => {
                // One job's bad input must not fail the others: retry each job alone, except a
                // stream that already sent tokens, which gets the error.
                for (job, streamed) in jobs.into_iter().zip(streamed) {
                    if streamed {
                        let _ = job.reply.send(Err(Error::Policy(format!(
                            "generation failed after streaming began: {e}"
                        ))));
                    } else {
                        self.run_batch(vec![job]);
                    }
                }
            }
        }
    }
}

/// How long the model thread waits for more requests before running a batch.
const GATHER_WINDOW: std::time::Duration = std::time::Duration::from_millis(2);
