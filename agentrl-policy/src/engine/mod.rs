//! The continuous-batching engine behind [`crate::TchPolicy`].
//!
//! The model thread keeps one running batch of rows, each in its own slot of keys and values
//! (`slots`). Every step it first prefills rows that joined (their prompts fed in chunks, at
//! most [`EngineOptions::prefill_chunk`] ids per row and step, so decoding rows are not stalled
//! for long; rows of very different chunk lengths go through separate forward passes), then
//! runs one decode step over every row that is generating. A row leaves the
//! moment it finishes and its slot takes the next waiting request; nobody waits for the
//! slowest row.
//!
//! When a request names a session ([`agentrl_core::GenerationRequest::session`]), the keys and
//! values of its conversation are kept after the turn (`sessions`, under a byte budget with
//! least-recently-used eviction), and the next turn feeds only the ids that follow the longest
//! prefix it shares with them. Whole prompts prefilled from scratch are kept as well (a second
//! cache), so requests with an identical prompt, such as the episodes of a GRPO group, copy
//! them instead of computing them again. New weights clear both caches, so no turn attends to
//! keys of older weights.

mod jobs;
mod logits;
mod sessions;
mod slots;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use agentrl_core::packing::length_runs;
use agentrl_core::{Error, Result, SeededRng, TokenId};
use serde::Serialize;
use tch::{Device, Kind, Tensor};

use crate::decode::{Detokenizer, MASKED, PolicyModel, check_request, push_token};
use crate::sampling::sample_token;
use crate::threads::on_threads;
pub(crate) use jobs::Job;
pub use jobs::StreamedToken;
use jobs::{JobState, Row};
use sessions::{CachedPrefix, SessionCache, reusable};
use slots::{SlotKv, SlotStep};

/// The engine's knobs.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineOptions {
    /// Most rows in the running batch; more requests wait for a free slot.
    pub max_batch: usize,
    /// Bytes of keys and values kept between a session's turns (0 turns that reuse off).
    pub session_cache_bytes: u64,
    /// Bytes of keys and values of recent whole prompts, whose longest shared prefix later
    /// requests copy instead of computing it again (0 turns that sharing off).
    pub prompt_cache_bytes: u64,
    /// Most prompt ids of one row fed in one step.
    pub prefill_chunk: usize,
    /// Most prompt ids fed in one step, and most padded ids (rows × the longest chunk) in one
    /// of its prefill forward passes (a single longer row still gets a pass of its own).
    pub prefill_tokens: usize,
    /// libtorch threads of the model thread's own forward passes (`None`: the process-wide
    /// setting). Two policies on one machine's cores, such as cross-policy sampling's current
    /// policy and snapshot, can each take their share instead of both asking for every core.
    pub threads: Option<i32>,
}

impl EngineOptions {
    /// The defaults with at most `max_batch` rows running.
    pub fn with_max_batch(max_batch: usize) -> Self {
        EngineOptions {
            max_batch: max_batch.max(1),
            ..Self::default()
        }
    }
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            max_batch: 64,
            session_cache_bytes: 1 << 30,
            prompt_cache_bytes: 256 << 20,
            prefill_chunk: 512,
            prefill_tokens: 8192,
            threads: None,
        }
    }
}

/// What the engine has done so far (counters) and holds now (gauges).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct EngineStats {
    /// Requests answered or in progress.
    pub requests: u64,
    /// Prompt ids fed through the model (prefill), not counting reused ones.
    pub prefill_tokens: u64,
    /// Prompt ids whose keys and values came from a cache instead (a session's last turn, or
    /// a prompt prefilled before that starts the same way).
    pub reused_tokens: u64,
    /// Requests that copied keys and values of a cached prompt (the same one, or one sharing
    /// at least 8 leading ids).
    pub shared_prompt_hits: u64,
    /// Ids generated.
    pub generated_tokens: u64,
    /// Prefill forward passes (each may serve many rows).
    pub prefill_batches: u64,
    /// Decode forward passes.
    pub decode_steps: u64,
    /// Seconds spent prefilling (forward passes, sampling the first tokens).
    pub prefill_seconds: f64,
    /// Seconds spent in decode steps (forward passes, sampling).
    pub decode_seconds: f64,
    /// Cached sessions and prompts dropped to stay within their byte budgets.
    pub evictions: u64,
    /// Requests dropped because their caller stopped waiting.
    pub cancelled: u64,
    /// Bytes of keys and values kept for sessions now.
    pub session_cache_bytes: u64,
    /// Bytes of keys and values of whole prompts kept for sharing now.
    pub prompt_cache_bytes: u64,
    /// Sessions with cached keys and values now.
    pub cached_sessions: u64,
    /// Bytes of the running batch's slots now.
    pub slot_bytes: u64,
}

/// The engine: the model, its running batch and the session cache. Driven by the model thread.
pub(crate) struct Engine<M> {
    model: M,
    detokenizer: Option<Detokenizer>,
    options: EngineOptions,
    jobs: HashMap<u64, JobState>,
    next_job: u64,
    waiting: VecDeque<Row>,
    running: Vec<Row>,
    /// Which slots hold a running row.
    occupied: Vec<bool>,
    kv: SlotKv,
    sessions: SessionCache,
    /// Whole prompts' keys and values, by [`prompt_key`].
    prompts: SessionCache,
    /// Seeds the streams of requests without a seed of their own.
    seeds: SeededRng,
    version: u64,
    stats: EngineStats,
    published: Arc<Mutex<EngineStats>>,
    /// Calls completed in this step, answered after the stats are published (so a caller that
    /// reads them after its answer sees its own call counted).
    answered: Vec<JobState>,
}

impl<M: PolicyModel> Engine<M> {
    /// An idle engine; `published` receives the stats after every step.
    pub(crate) fn new(
        model: M,
        detokenizer: Option<Detokenizer>,
        options: EngineOptions,
        seed: u64,
        published: Arc<Mutex<EngineStats>>,
    ) -> Self {
        let sessions = SessionCache::new(options.session_cache_bytes);
        let prompts = SessionCache::new(options.prompt_cache_bytes);
        // A prefill chunk may write padding up to a chunk past the context.
        let kv = SlotKv::new(
            options.max_batch,
            model.context_len() + options.prefill_chunk.max(1),
        );
        Engine {
            model,
            detokenizer,
            options,
            jobs: HashMap::new(),
            next_job: 0,
            waiting: VecDeque::new(),
            running: Vec::new(),
            occupied: Vec::new(),
            kv,
            sessions,
            prompts,
            seeds: SeededRng::new(seed),
            version: 0,
            stats: EngineStats::default(),
            published,
            answered: Vec::new(),
        }
    }

    /// Whether nothing is waiting or running.
    pub(crate) fn is_idle(&self) -> bool {
        self.waiting.is_empty() && self.running.is_empty()
    }

    /// Whether rows are in the running batch.
    pub(crate) fn has_running(&self) -> bool {
        !self.running.is_empty()
    }

    /// Takes a `generate` call: checks every request (a bad one fails the call, and only it),
    /// answers prompts that leave no room at once, queues the rest.
    pub(crate) fn submit(&mut self, job: Job) {
        if let Err(e) = self.check(&job) {
            let _ = job.reply.send(Err(e));
            return;
        }
        let id = self.next_job;
        self.next_job += 1;
        let (mut state, requests) = JobState::new(job);
        let context = self.model.context_len();
        let mut done = requests.is_empty();
        for (index, request) in requests.into_iter().enumerate() {
            self.stats.requests += 1;
            let rng = match request.params.seed {
                Some(s) => SeededRng::new(s),
                None => SeededRng::new(self.seeds.next_u64()),
            };
            let mut row = Row::new(id, index, request, rng);
            if row.prompt.len() >= context {
                row.generation.policy_version = self.version;
                done = state.finish(index, row.generation);
            } else {
                self.waiting.push_back(row);
            }
        }
        if done {
            self.answered.push(state);
            self.publish();
        } else {
            self.jobs.insert(id, state);
        }
    }

    /// The first problem with any of `job`'s requests.
    fn check(&self, job: &Job) -> Result<()> {
        let vocab = self.model.vocab_size();
        let has_detokenizer = self.detokenizer.is_some();
        for (i, r) in job.requests.iter().enumerate() {
            check_request(i, &r.prompt_ids, &r.params, vocab, has_detokenizer)?;
        }
        Ok(())
    }

    /// Forgets what is cached for `session`.
    pub(crate) fn end_session(&mut self, session: &str) {
        self.sessions.remove(session);
        self.publish();
    }

    /// New weights are in place (the running batch is empty): later rows carry `version`, and
    /// no cached keys or values of the old weights are reused.
    pub(crate) fn weights_changed(&mut self, version: u64) {
        self.version = version;
        self.sessions.clear();
        self.prompts.clear();
        self.publish();
    }

    /// One engine step: drops abandoned calls, admits waiting rows into free slots (unless
    /// `admit` is false: a weight update waits for the batch to drain), prefills, then decodes
    /// one token for every generating row. A libtorch failure fails every running call.
    pub(crate) fn step(&mut self, admit: bool) {
        self.drop_abandoned();
        if admit {
            self.admit();
        }
        let start = Instant::now();
        let outcome = self.prefill();
        let prefilled = Instant::now();
        let outcome = outcome.and_then(|_| self.decode());
        self.stats.prefill_seconds += (prefilled - start).as_secs_f64();
        self.stats.decode_seconds += prefilled.elapsed().as_secs_f64();
        if let Err(e) = outcome {
            self.fail_running(&e);
        }
        if self.running.is_empty() {
            self.kv.release();
        }
        self.publish();
    }

    /// Drops the rows of calls whose caller stopped waiting, and those calls.
    fn drop_abandoned(&mut self) {
        let gone: Vec<u64> = self
            .jobs
            .iter()
            .filter(|(_, j)| j.abandoned())
            .map(|(&id, _)| id)
            .collect();
        if gone.is_empty() {
            return;
        }
        for id in &gone {
            self.jobs.remove(id);
        }
        let jobs = &self.jobs;
        let before = self.waiting.len() + self.running.len();
        self.waiting.retain(|r| jobs.contains_key(&r.job));
        for row in self.running.iter().filter(|r| !jobs.contains_key(&r.job)) {
            self.occupied[row.slot] = false;
        }
        self.running.retain(|r| jobs.contains_key(&r.job));
        let after = self.waiting.len() + self.running.len();
        self.stats.cancelled += (before - after) as u64;
    }

    /// Moves waiting rows into free slots, loading what their session (or, for a prompt that
    /// starts like one seen before, the shared prompt cache) has cached. A row whose prompt
    /// shares more with a prompt being prefilled right now than with any cached one waits a step
    /// and then copies it instead of computing it again (the episodes of a GRPO group all start
    /// from the same prompt, and the tasks of an env from the same system prompt).
    fn admit(&mut self) {
        let mut deferred = Vec::new();
        while self.running.len() < self.options.max_batch {
            let Some(mut row) = self.waiting.pop_front() else {
                break;
            };
            if self.sharer_is_prefilling(&row) {
                deferred.push(row);
                continue;
            }
            let slot = match self.occupied.iter().position(|&o| !o) {
                Some(s) => s,
                None => {
                    self.occupied.push(false);
                    self.occupied.len() - 1
                }
            };
            self.occupied[slot] = true;
            row.slot = slot;
            row.generation.policy_version = self.version;
            let (reuse, from_session) = self.load_cached(&row, slot);
            row.cached = reuse;
            row.shares_prompt = !from_session;
            self.stats.reused_tokens += reuse as u64;
            self.running.push(row);
        }
        for row in deferred.into_iter().rev() {
            self.waiting.push_front(row);
        }
    }

    /// Whether `row` (not continuing a cached session) would copy more of its prompt from a
    /// running row's prompt, once that is prefilled, than the prompt cache holds now.
    fn sharer_is_prefilling(&self, row: &Row) -> bool {
        if !self.prompts.enabled() || row.session.as_ref().is_some_and(|s| self.sessions.has(s)) {
            return false;
        }
        let from_running = self
            .running
            .iter()
            .filter(|r| r.shares_prompt && r.prefilling())
            .map(|r| reusable(&r.prompt, &row.prompt))
            .max()
            .unwrap_or(0);
        from_running >= MIN_SHARED_PREFIX
            && from_running > self.prompts.longest_reuse(&row.prompt, MIN_SHARED_PREFIX)
    }

    /// Loads the longest cached prefix of `row`'s prompt into `slot`: its session's last turn,
    /// else the longest prefix it shares with a prompt in the shared cache (the same prompt, or
    /// one that starts alike: the system prompt and tool specs of a task's episodes). Returns
    /// how many positions it covers and whether they came from the session.
    fn load_cached(&mut self, row: &Row, slot: usize) -> (usize, bool) {
        if let Some(session) = &row.session
            && let Some((prefix, reuse)) = self.sessions.take(session, &row.prompt)
        {
            self.kv.reserve(self.occupied.len(), reuse);
            self.kv.load(slot, &prefix.layers, reuse);
            return (reuse, true);
        }
        match self.prompts.longest(&row.prompt, MIN_SHARED_PREFIX) {
            Some((prefix, reuse)) => {
                self.kv.reserve(self.occupied.len(), reuse);
                self.kv.load(slot, &prefix.layers, reuse);
                self.stats.shared_prompt_hits += 1;
                (reuse, false)
            }
            None => (0, false),
        }
    }

    /// Keeps the keys and values of running row `i`'s whole prompt, just prefilled (in part
    /// copied from the cache), for later requests whose prompt starts the same way.
    fn share_prompt(&mut self, i: usize) {
        let row = &self.running[i];
        if !row.shares_prompt || !self.prompts.enabled() {
            return;
        }
        let prefix = CachedPrefix {
            ids: row.prompt.clone(),
            layers: self.kv.save(row.slot, row.prompt.len()),
        };
        self.prompts.put(prompt_key(row.prompt_hash), prefix);
    }

    /// Feeds the next chunk of every prefilling row (up to the token budget). The rows, sorted
    /// by chunk length, go through the model in runs of similar length (cut as
    /// [`length_runs`] cuts the learner's micro-batches), so one long prompt does not pad a
    /// hundred one-id continuations to its width. Rows whose prompt is then complete sample
    /// their first token.
    fn prefill(&mut self) -> Result<()> {
        let chunk = self.options.prefill_chunk.max(1);
        let budget = self.options.prefill_tokens;
        let mut picked: Vec<(usize, usize)> = Vec::new();
        let mut total = 0;
        for (i, row) in self.running.iter().enumerate() {
            if !row.prefilling() {
                continue;
            }
            let n = (row.prompt.len() - row.cached).min(chunk);
            if !picked.is_empty() && total + n > budget {
                break;
            }
            picked.push((i, n));
            total += n;
        }
        if picked.is_empty() {
            return Ok(());
        }
        picked.sort_by_key(|&(_, n)| n);
        let lengths: Vec<usize> = picked.iter().map(|&(_, n)| n).collect();
        let mut finished = Vec::new();
        for run in length_runs(&lengths, 0, budget, PREFILL_PASS_TOKENS) {
            self.prefill_run(&picked[run], &mut finished)?;
        }
        self.retire(finished);
        Ok(())
    }

    /// One prefill forward pass over `picked` (running row, ids to feed), padded to the
    /// longest; adds the rows that finished with their first token to `finished`.
    fn prefill_run(&mut self, picked: &[(usize, usize)], finished: &mut Vec<usize>) -> Result<()> {
        let width = picked.iter().map(|&(_, n)| n).max().unwrap_or(0);
        let context = self.model.context_len();
        let b = picked.len();
        let mut ids = vec![0i64; b * width];
        let mut positions = vec![0i64; b * width];
        let mut write_at = vec![0i64; b * width];
        let mut last = vec![0i64; b];
        let mut slots = vec![0i64; b];
        let mut keys = 0;
        for (r, &(i, n)) in picked.iter().enumerate() {
            let row = &self.running[i];
            for j in 0..width {
                let at = row.cached + j;
                write_at[r * width + j] = at as i64;
                positions[r * width + j] = at.min(context - 1) as i64;
                if j < n {
                    ids[r * width + j] = i64::from(row.prompt[at]);
                }
            }
            last[r] = n as i64 - 1;
            slots[r] = row.slot as i64;
            keys = keys.max(row.cached + width);
        }
        self.kv.reserve(self.occupied.len(), keys);
        let shape = Shape {
            rows: b,
            width,
            keys,
        };
        let logits = self.forward(&slots, &ids, &positions, &write_at, &last, shape)?;
        self.stats.prefill_batches += 1;
        let vocab = self.model.vocab_size();
        for (r, &(i, n)) in picked.iter().enumerate() {
            self.stats.prefill_tokens += n as u64;
            self.running[i].cached += n;
            if self.running[i].prefilling() {
                continue;
            }
            self.share_prompt(i);
            if self.sample(i, &logits[r * vocab..(r + 1) * vocab]) {
                finished.push(i);
            }
        }
        Ok(())
    }

    /// One decode step: every generating row feeds its last token and samples the next.
    fn decode(&mut self) -> Result<()> {
        self.compact();
        let mut order: Vec<usize> = (0..self.running.len())
            .filter(|&i| !self.running[i].prefilling())
            .collect();
        if order.is_empty() {
            return Ok(());
        }
        order.sort_by_key(|&i| self.running[i].slot);
        let b = order.len();
        let mut ids = Vec::with_capacity(b);
        let mut at = Vec::with_capacity(b);
        let mut slots = Vec::with_capacity(b);
        for &i in &order {
            let row = &self.running[i];
            let last = row.generation.ids.last().copied().unwrap_or(0);
            ids.push(i64::from(last));
            at.push(row.cached as i64);
            slots.push(row.slot as i64);
        }
        let keys = at.iter().max().copied().unwrap_or(0) as usize + 1;
        self.kv.reserve(self.occupied.len(), keys);
        let shape = Shape {
            rows: b,
            width: 1,
            keys,
        };
        let logits = self.forward(&slots, &ids, &at, &at, &vec![0; b], shape)?;
        self.stats.decode_steps += 1;
        let vocab = self.model.vocab_size();
        let threads = usize::try_from(tch::get_num_threads()).unwrap_or(1);
        let draws = draw_tokens(&mut self.running, &order, &logits, vocab, threads);
        let mut finished = Vec::new();
        for (&i, draw) in order.iter().zip(draws) {
            self.running[i].cached += 1;
            if self.accept(i, draw) {
                finished.push(i);
            }
        }
        self.retire(finished);
        Ok(())
    }

    /// Moves generating rows into slots `0..n` (swapping with prefilling rows or free slots),
    /// so the decode step reads the slots as one contiguous block instead of gathering them.
    fn compact(&mut self) {
        let generating: Vec<usize> = (0..self.running.len())
            .filter(|&i| !self.running[i].prefilling())
            .collect();
        let n = generating.len();
        let holder: HashMap<usize, usize> = self
            .running
            .iter()
            .enumerate()
            .map(|(i, r)| (r.slot, i))
            .collect();
        let movers = generating.iter().filter(|&&i| self.running[i].slot >= n);
        let targets =
            (0..n).filter(|s| holder.get(s).is_none_or(|&i| self.running[i].prefilling()));
        let moves: Vec<(usize, usize)> = movers.copied().zip(targets).collect();
        for (mover, target) in moves {
            let from = self.running[mover].slot;
            let other = holder.get(&target).copied();
            let len = other
                .map_or(0, |o| self.running[o].cached)
                .max(self.running[mover].cached);
            self.kv.swap(from, target, len);
            match other {
                Some(o) => self.running[o].slot = from,
                None => {
                    self.occupied[from] = false;
                    self.occupied[target] = true;
                }
            }
            self.running[mover].slot = target;
        }
    }

    /// Samples row `i`'s next token from its `logits`; true when the row is finished.
    fn sample(&mut self, i: usize, logits: &[f32]) -> bool {
        let row = &mut self.running[i];
        let draw = sample_token(logits, &row.params, &mut row.rng);
        self.accept(i, draw)
    }

    /// Appends a sampled `(id, logprob)` to row `i` and streams it; true when the row is
    /// finished.
    fn accept(&mut self, i: usize, (id, logprob): (TokenId, f32)) -> bool {
        let context = self.model.context_len();
        let detokenizer = self.detokenizer.as_ref();
        let row = &mut self.running[i];
        self.stats.generated_tokens += 1;
        if let Some(job) = self.jobs.get(&row.job) {
            job.stream(row.index, id, logprob);
        }
        let prompt_len = row.prompt.len();
        let (params, g) = (&row.params, &mut row.generation);
        push_token(g, (id, logprob), params, prompt_len, context, detokenizer)
    }

    /// Takes finished rows (indices into the running batch) out: frees their slots, keeps
    /// their sessions' keys and values, answers calls that are complete.
    fn retire(&mut self, mut finished: Vec<usize>) {
        finished.sort_unstable();
        for i in finished.into_iter().rev() {
            let row = self.running.swap_remove(i);
            self.occupied[row.slot] = false;
            if let Some(session) = &row.session
                && self.sessions.enabled()
            {
                let prefix = CachedPrefix {
                    ids: row.cached_ids(),
                    layers: self.kv.save(row.slot, row.cached),
                };
                self.sessions.put(session.clone(), prefix);
            }
            if let Some(job) = self.jobs.get_mut(&row.job)
                && job.finish(row.index, row.generation)
                && let Some(job) = self.jobs.remove(&row.job)
            {
                self.answered.push(job);
            }
        }
    }

    /// Fails every call with a row in the running batch, and empties it.
    fn fail_running(&mut self, error: &Error) {
        for row in std::mem::take(&mut self.running) {
            self.occupied[row.slot] = false;
            if let Some(job) = self.jobs.remove(&row.job) {
                job.fail(Error::Policy(format!("generation failed: {error}")));
            }
        }
        self.waiting.retain(|r| self.jobs.contains_key(&r.job));
    }

    /// One forward pass over `slots` (one per batch row): ids, rotary positions and slot
    /// positions `[rows, width]`, the index of the wanted logits in each row. Returns the
    /// logits `[rows, vocab]`, flattened. A panic inside libtorch is an error.
    fn forward(
        &mut self,
        slots: &[i64],
        ids: &[i64],
        positions: &[i64],
        write_at: &[i64],
        last: &[i64],
        shape: Shape,
    ) -> Result<Vec<f32>> {
        let Shape { rows, width, keys } = shape;
        let (b, t, k) = (rows as i64, width as i64, keys as i64);
        let device = self.model.device();
        let (model, kv) = (&self.model, &mut self.kv);
        let run = || {
            tch::no_grad(|| {
                let matrix = |v: &[i64]| Tensor::from_slice(v).view([b, t]).to(device);
                let write_at = matrix(write_at);
                let hidden_from = Tensor::arange(k, (Kind::Int64, device))
                    .view([1, 1, 1, k])
                    .gt_tensor(&write_at.view([b, 1, t, 1]));
                let bias = Tensor::zeros([b, 1, t, k], (Kind::Float, device))
                    .masked_fill(&hidden_from, MASKED);
                let last = Tensor::from_slice(last).to(device);
                let mut step = SlotStep::new(kv, slots, write_at, k);
                model
                    .step_logits(&matrix(ids), &matrix(positions), &bias, &mut step, &last)
                    .to_kind(Kind::Float)
                    .to(Device::Cpu)
            })
        };
        let logits =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)).map_err(|panic| {
                Error::Policy(format!(
                    "libtorch failed: {}",
                    agentrl_core::panic_message(&*panic)
                ))
            })?;
        logits::row_major_logits(&logits, rows, self.model.vocab_size())
    }

    /// Copies the stats where [`crate::TchPolicy::stats`] reads them, then answers the calls
    /// completed since the last time.
    fn publish(&mut self) {
        self.stats.evictions = self.sessions.evictions + self.prompts.evictions;
        self.stats.session_cache_bytes = self.sessions.bytes();
        self.stats.prompt_cache_bytes = self.prompts.bytes();
        self.stats.cached_sessions = self.sessions.len() as u64;
        self.stats.slot_bytes = self.kv.bytes();
        if let Ok(mut shared) = self.published.lock() {
            shared.clone_from(&self.stats);
        }
        for job in self.answered.drain(..) {
            job.answer();
        }
    }
}

/// Fewest leading ids a prompt must share with a cached prompt to copy them (shorter matches,
/// such as a lone start token, are not worth a copy).
const MIN_SHARED_PREFIX: usize = 8;

/// Fixed cost of one more prefill forward pass in a step, in padded ids: a split of the rows
/// by length must save more padding than this to be worth a pass.
const PREFILL_PASS_TOKENS: usize = 256;

/// The prompt cache's key for a prompt with hash `hash` (one entry per distinct prompt; a
/// collision only replaces an entry: every hit is checked against the cached ids).
fn prompt_key(hash: u64) -> String {
    format!("{hash:016x}")
}

/// The sizes of one forward pass: batch rows, new ids per row, positions attended to.
#[derive(Clone, Copy)]
struct Shape {
    rows: usize,
    width: usize,
    keys: usize,
}

/// Logits in a decode step from which sampling is split over the libtorch threads (about
/// 0.4 ms of sampling on one core, several times the cost of starting a thread).
const PARALLEL_SAMPLING_LOGITS: usize = 1 << 19;

/// Samples the next token of the rows `running[order[r]]` from row `r` of `logits`
/// (`vocab` values each), in `order`. Each row draws from its own random stream, so the tokens
/// are the same however the rows are split; a large step is split over `threads` threads (the
/// libtorch threads, idle while the policy thread samples).
fn draw_tokens(
    running: &mut [Row],
    order: &[usize],
    logits: &[f32],
    vocab: usize,
    threads: usize,
) -> Vec<(TokenId, f32)> {
    let mut position = vec![usize::MAX; running.len()];
    for (r, &i) in order.iter().enumerate() {
        position[i] = r;
    }
    let mut rows: Vec<(usize, &mut Row)> = running
        .iter_mut()
        .enumerate()
        .filter(|(i, _)| position[*i] != usize::MAX)
        .map(|(i, row)| (position[i], row))
        .collect();
    rows.sort_unstable_by_key(|(r, _)| *r);
    let mut draws = vec![(0, 0.0); rows.len()];
    let sample_all = |rows: &mut [(usize, &mut Row)], draws: &mut [(TokenId, f32)]| {
        for ((r, row), draw) in rows.iter_mut().zip(draws) {
            let row_logits = &logits[*r * vocab..(*r + 1) * vocab];
            *draw = sample_token(row_logits, &row.params, &mut row.rng);
        }
    };
    if threads <= 1 || rows.len() * vocab < PARALLEL_SAMPLING_LOGITS {
        sample_all(&mut rows, &mut draws);
        return draws;
    }
    let per_thread = rows.len().div_ceil(threads);
    let parts = rows
        .chunks_mut(per_thread)
        .zip(draws.chunks_mut(per_thread));
    on_threads(parts, |(rows, draws)| sample_all(rows, draws));
    draws
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentrl_core::{GenerationRequest, SamplingParams};

    #[test]
    fn a_step_split_over_threads_samples_what_one_thread_does() {
        let (rows, vocab) = (16, 40_000);
        assert!(rows * vocab >= PARALLEL_SAMPLING_LOGITS);
        let logits: Vec<f32> = (0..rows * vocab)
            .map(|i| (i * 7_919 % 10_007) as f32 * 1e-3)
            .collect();
        // Plain, top-p and greedy rows, each with its own seed.
        let params = |r: usize| SamplingParams {
            temperature: if r % 3 == 2 { 0.0 } else { 1.0 },
            top_p: if r % 3 == 1 { 0.9 } else { 1.0 },
            max_new_tokens: 4,
            ..Default::default()
        };
        let fresh = || -> Vec<Row> {
            (0..rows)
                .map(|r| {
                    let request = GenerationRequest::new(vec![1], params(r));
                    Row::new(0, r, request, SeededRng::new(r as u64))
                })
                .collect()
        };
        // Running row `order[r]` samples from logits row `r`.
        let order: Vec<usize> = (0..rows).map(|r| (r * 5 + 3) % rows).collect();
        let mut one = fresh();
        let want: Vec<_> = order
            .iter()
            .enumerate()
            .map(|(r, &i)| {
                let row = &mut one[i];
                sample_token(
                    &logits[r * vocab..(r + 1) * vocab],
                    &row.params,
                    &mut row.rng,
                )
            })
            .collect();
        for threads in [1, 2, 3] {
            let mut running = fresh();
            let got = draw_tokens(&mut running, &order, &logits, vocab, threads);
            assert_eq!(got, want, "{threads} threads");
            // Each row's stream moved on as it does on one thread.
            for (a, b) in running.iter_mut().zip(one.iter_mut()) {
                assert_eq!(
                    a.rng.next_f64().to_bits(),
                    b.rng.clone().next_f64().to_bits()
                );
            }
        }
    }
}
