//! The engine's bookkeeping: the `generate` calls it is answering and the rows they became.

use agentrl_core::{
    Error, Generation, GenerationRequest, Result, SamplingParams, SeededRng, TokenId,
};
use std::hash::{Hash, Hasher};

use tokio::sync::mpsc as mpsc_async;
use tokio::sync::oneshot;

/// A token as it is sampled: the index of its request in the call, the id, its log-probability.
pub type StreamedToken = (usize, TokenId, f32);

/// One `generate` call for the engine: its requests, where its tokens stream, and where the
/// generations go.
pub(crate) struct Job {
    /// The requests, answered in this order.
    pub(crate) requests: Vec<GenerationRequest>,
    /// Where each token goes as soon as it is sampled, for streaming calls.
    pub(crate) stream: Option<mpsc_async::UnboundedSender<StreamedToken>>,
    /// Receives the generations, or the error that ended the call.
    pub(crate) reply: oneshot::Sender<Result<Vec<Generation>>>,
}

/// A call in progress: finished generations so far and where the rest goes.
pub(super) struct JobState {
    results: Vec<Option<Generation>>,
    remaining: usize,
    stream: Option<mpsc_async::UnboundedSender<StreamedToken>>,
    reply: oneshot::Sender<Result<Vec<Generation>>>,
}

impl JobState {
    /// A call with `n` requests still to answer.
    pub(super) fn new(job: Job) -> (Self, Vec<GenerationRequest>) {
        let n = job.requests.len();
        let state = JobState {
            results: (0..n).map(|_| None).collect(),
            remaining: n,
            stream: job.stream,
            reply: job.reply,
        };
        (state, job.requests)
    }

    /// Whether the caller stopped waiting (its future was dropped).
    pub(super) fn abandoned(&self) -> bool {
        self.reply.is_closed()
    }

    /// Sends a token to a streaming caller (one that stopped listening only loses the stream).
    pub(super) fn stream(&self, index: usize, id: TokenId, logprob: f32) {
        if let Some(stream) = &self.stream {
            let _ = stream.send((index, id, logprob));
        }
    }

    /// Records request `index`'s generation; true once every request has one.
    pub(super) fn finish(&mut self, index: usize, generation: Generation) -> bool {
        if let Some(slot) = self.results.get_mut(index)
            && slot.replace(generation).is_none()
        {
            self.remaining -= 1;
        }
        self.remaining == 0
    }

    /// Answers the caller with every generation.
    pub(super) fn answer(self) {
        let all: Option<Vec<Generation>> = self.results.into_iter().collect();
        let _ = self.reply.send(all.ok_or_else(|| {
            Error::Policy("the model thread answered a call with a generation missing".into())
        }));
    }

    /// Answers the caller with `error`.
    pub(super) fn fail(self, error: Error) {
        let _ = self.reply.send(Err(error));
    }
}

/// One request on its way through the engine.
pub(super) struct Row {
    /// The call it belongs to, and its index there.
    pub(super) job: u64,
    pub(super) index: usize,
    pub(super) prompt: Vec<TokenId>,
    pub(super) params: SamplingParams,
    pub(super) rng: SeededRng,
    pub(super) session: Option<String>,
    /// Its slot in the running batch (meaningless while waiting).
    pub(super) slot: usize,
    /// How many leading ids (prompt, then generated) have keys and values in the slot.
    pub(super) cached: usize,
    /// What has been generated so far.
    pub(super) generation: Generation,
    /// A hash of the prompt: its key in the prompt cache.
    pub(super) prompt_hash: u64,
    /// Whether its prompt goes to the shared prompt cache once prefilled: it did not come from
    /// its session's cache (it may have copied a prefix of another prompt).
    pub(super) shares_prompt: bool,
}

impl Row {
    /// A row for `request` whose sampling draws from `rng`.
    pub(super) fn new(job: u64, index: usize, request: GenerationRequest, rng: SeededRng) -> Self {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        request.prompt_ids.hash(&mut hasher);
        Row {
            job,
            index,
            prompt_hash: hasher.finish(),
            shares_prompt: false,
            prompt: request.prompt_ids,
            params: request.params,
            rng,
            session: request.session,
            slot: usize::MAX,
            cached: 0,
            generation: Generation::empty(0),
        }
    }

    /// Whether prompt ids are still to be fed.
    pub(super) fn prefilling(&self) -> bool {
        self.cached < self.prompt.len()
    }

    /// The ids that have keys and values in the slot: the prompt, then the generated ids.
    pub(super) fn cached_ids(&self) -> Vec<TokenId> {
        self.prompt
            .iter()
            .chain(&self.generation.ids)
            .take(self.cached)
            .copied()
            .collect()
    }
}
