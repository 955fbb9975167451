//! Keys and values kept between a session's turns (and of whole prompts, whose prefixes later
//! requests share), under a byte budget with least-recently-used eviction.

use std::collections::HashMap;

use agentrl_core::TokenId;
use tch::Tensor;

use super::slots::tensor_bytes;

/// What is kept for one session: the ids whose keys and values are cached, and those keys and
/// values per layer `[KV, len, hd]`.
pub(super) struct CachedPrefix {
    /// The ids the cache covers, from the start of the conversation.
    pub(super) ids: Vec<TokenId>,
    /// Keys and values of every layer.
    pub(super) layers: Vec<(Tensor, Tensor)>,
}

struct Entry {
    prefix: CachedPrefix,
    bytes: u64,
    last_used: u64,
}

/// Cached prefixes by session id. Entries hold keys and values of one weight version: the
/// owner clears the cache when the weights change.
pub(super) struct SessionCache {
    entries: HashMap<String, Entry>,
    budget: u64,
    bytes: u64,
    clock: u64,
    /// Entries dropped to stay within the budget so far.
    pub(super) evictions: u64,
}

impl SessionCache {
    /// An empty cache holding at most `budget` bytes (0 turns reuse off).
    pub(super) fn new(budget: u64) -> Self {
        SessionCache {
            entries: HashMap::new(),
            budget,
            bytes: 0,
            clock: 0,
            evictions: 0,
        }
    }

    /// Whether anything will ever be kept.
    pub(super) fn enabled(&self) -> bool {
        self.budget > 0
    }

    /// Removes `session`'s entry and returns it with how many of its positions `prompt` can
    /// reuse: the longest common prefix, less one so the prompt's last token is fed again and
    /// gives the next token's logits. `None` when nothing is cached or nothing matches.
    pub(super) fn take(
        &mut self,
        session: &str,
        prompt: &[TokenId],
    ) -> Option<(CachedPrefix, usize)> {
        let entry = self.entries.remove(session)?;
        self.bytes -= entry.bytes;
        let reuse = reusable(&entry.prefix.ids, prompt);
        (reuse > 0).then_some((entry.prefix, reuse))
    }

    /// Whether `session` has an entry.
    pub(super) fn has(&self, session: &str) -> bool {
        self.entries.contains_key(session)
    }

    /// The entry sharing the longest prefix with `prompt`, if that is at least `least` ids,
    /// with how many of its positions `prompt` can reuse (as in [`SessionCache::take`]). The
    /// entry stays, shared by every request that matches it, and counts as just used; of equal
    /// matches the most recently used wins, so the choice does not depend on hash order.
    pub(super) fn longest(
        &mut self,
        prompt: &[TokenId],
        least: usize,
    ) -> Option<(&CachedPrefix, usize)> {
        let (key, reuse) = self
            .best_match(prompt, least)
            .map(|(key, reuse)| (key.to_owned(), reuse))?;
        self.clock += 1;
        let entry = self.entries.get_mut(&key)?;
        entry.last_used = self.clock;
        Some((&entry.prefix, reuse))
    }

    /// How many positions [`SessionCache::longest`] would give `prompt` (0 for none), without
    /// touching the entry.
    pub(super) fn longest_reuse(&self, prompt: &[TokenId], least: usize) -> usize {
        self.best_match(prompt, least).map_or(0, |(_, reuse)| reuse)
    }

    /// The key and reuse of the best match for `prompt`, if it reaches `least` ids.
    fn best_match(&self, prompt: &[TokenId], least: usize) -> Option<(&str, usize)> {
        self.entries
            .iter()
            .map(|(key, e)| (key.as_str(), reusable(&e.prefix.ids, prompt), e.last_used))
            .filter(|&(_, reuse, _)| reuse >= least.max(1))
            .max_by_key(|&(_, reuse, last_used)| (reuse, last_used))
            .map(|(key, reuse, _)| (key, reuse))
    }

    /// Keeps `prefix` for `session` (replacing what was there), evicting the least recently
    /// used entries beyond the budget. A prefix larger than the whole budget is not kept.
    pub(super) fn put(&mut self, session: String, prefix: CachedPrefix) {
        self.remove(&session);
        let bytes: u64 = prefix
            .layers
            .iter()
            .map(|(k, v)| tensor_bytes(k) + tensor_bytes(v))
            .sum();
        if bytes > self.budget {
            self.evictions += 1;
            return;
        }
        while self.bytes + bytes > self.budget {
            let Some(oldest) = self
                .entries
                .iter()
                .min_by_key(|(_, e)| e.last_used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            self.remove(&oldest);
            self.evictions += 1;
        }
        self.clock += 1;
        self.bytes += bytes;
        self.entries.insert(
            session,
            Entry {
                prefix,
                bytes,
                last_used: self.clock,
            },
        );
    }

    /// Drops `session`'s entry, if any.
    pub(super) fn remove(&mut self, session: &str) {
        if let Some(e) = self.entries.remove(session) {
            self.bytes -= e.bytes;
        }
    }

    /// Drops everything (after a weight update).
    pub(super) fn clear(&mut self) {
        self.entries.clear();
        self.bytes = 0;
    }

    /// Bytes held.
    pub(super) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Sessions held.
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }
}

/// How many leading ids `a` and `b` share.
fn common_prefix(a: &[TokenId], b: &[TokenId]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// How many positions cached for `cached` a request for `prompt` can reuse: the ids they
/// share, less the prompt's last (fed again to give the next token's logits).
pub(super) fn reusable(cached: &[TokenId], prompt: &[TokenId]) -> usize {
    common_prefix(cached, prompt).min(prompt.len().saturating_sub(1))
}
