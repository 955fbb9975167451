//! The running batch's keys and values: one slot per row, every row at its own length, so rows
//! can join and leave between forward steps without padding the others.

use tch::{Kind, Tensor};

use crate::decode::KvStore;

/// Keys and values of the rows in the running batch, per layer `[slots, KV, capacity, hd]`.
/// Both the number of slots and the capacity grow on demand (doubling, but never past the
/// batch limit and the longest sequence), so memory follows the peak batch and the longest
/// row, not the model's context.
pub(super) struct SlotKv {
    layers: Vec<(Tensor, Tensor)>,
    slots: i64,
    capacity: i64,
    /// The most slots and positions ever needed (growth stops there).
    max_slots: i64,
    max_capacity: i64,
}

impl SlotKv {
    /// Empty slots for at most `max_slots` rows of at most `max_length` positions.
    pub(super) fn new(max_slots: usize, max_length: usize) -> Self {
        SlotKv {
            layers: Vec::new(),
            slots: 0,
            capacity: 0,
            max_slots: max_slots as i64,
            max_capacity: max_length as i64,
        }
    }

    /// Makes room for slot indices below `slots` and positions below `length` in every layer
    /// allocated so far (layers allocated later take these sizes).
    pub(super) fn reserve(&mut self, slots: usize, length: usize) {
        let (slots, length) = (slots as i64, length as i64);
        if slots <= self.slots && length <= self.capacity {
            return;
        }
        let new_slots = grow(self.slots, slots).min(self.max_slots.max(slots));
        let new_capacity = grow(self.capacity, length).min(self.max_capacity.max(length));
        for (k, v) in &mut self.layers {
            for t in [k, v] {
                let s = t.size();
                // Zeros, not uninitialised memory: masked positions are still multiplied by
                // the attention weights, and 0 · NaN would poison the row.
                let bigger = Tensor::zeros(
                    [new_slots, s[1], new_capacity, s[3]],
                    (t.kind(), t.device()),
                );
                bigger.narrow(0, 0, s[0]).narrow(2, 0, s[2]).copy_(t);
                *t = bigger;
            }
        }
        self.slots = new_slots;
        self.capacity = new_capacity;
    }

    /// Layer `layer`'s keys and values, allocated like `like` (`[B, KV, T, hd]`) when missing.
    fn layer(&mut self, layer: usize, like: &Tensor) -> &mut (Tensor, Tensor) {
        while self.layers.len() <= layer {
            let s = like.size();
            let shape = [self.slots, s[1], self.capacity, s[3]];
            let options = (like.kind(), like.device());
            self.layers
                .push((Tensor::zeros(shape, options), Tensor::zeros(shape, options)));
        }
        &mut self.layers[layer]
    }

    /// Writes a session's cached keys and values (per layer `[KV, len, hd]`, the first `len`
    /// positions are used) into `slot`.
    pub(super) fn load(&mut self, slot: usize, cached: &[(Tensor, Tensor)], len: usize) {
        let len = len as i64;
        for (i, (k, v)) in cached.iter().enumerate() {
            let (sk, sv) = self.layer(i, &k.unsqueeze(0));
            sk.select(0, slot as i64)
                .narrow(1, 0, len)
                .copy_(&k.narrow(1, 0, len));
            sv.select(0, slot as i64)
                .narrow(1, 0, len)
                .copy_(&v.narrow(1, 0, len));
        }
    }

    /// Copies of the first `len` positions of `slot`, per layer `[KV, len, hd]`.
    pub(super) fn save(&self, slot: usize, len: usize) -> Vec<(Tensor, Tensor)> {
        let take = |t: &Tensor| t.select(0, slot as i64).narrow(1, 0, len as i64).copy();
        self.layers
            .iter()
            .map(|(k, v)| (take(k), take(v)))
            .collect()
    }

    /// Moves the first `len` positions of slot `from` into slot `to`, and those of `to` into
    /// `from` (a swap; `len` covers the longer of the two rows).
    pub(super) fn swap(&mut self, from: usize, to: usize, len: usize) {
        let len = len as i64;
        for (k, v) in &mut self.layers {
            for t in [k, v] {
                let mut a = t.select(0, from as i64).narrow(1, 0, len);
                let mut b = t.select(0, to as i64).narrow(1, 0, len);
                let keep = a.copy();
                a.copy_(&b);
                b.copy_(&keep);
            }
        }
    }

    /// Bytes held by the slots.
    pub(super) fn bytes(&self) -> u64 {
        self.layers
            .iter()
            .map(|(k, v)| tensor_bytes(k) + tensor_bytes(v))
            .sum()
    }

    /// Frees the slots (the next forward allocates them again).
    pub(super) fn release(&mut self) {
        self.layers.clear();
        self.slots = 0;
        self.capacity = 0;
    }
}

/// Bytes of a tensor's elements.
pub(super) fn tensor_bytes(t: &Tensor) -> u64 {
    let elem = match t.kind() {
        Kind::BFloat16 | Kind::Half => 2,
        Kind::Double | Kind::Int64 => 8,
        _ => 4,
    };
    t.numel() as u64 * elem
}

/// The size for a dimension of size `current` that must hold `needed`: unchanged when it
/// does, else at least double.
fn grow(current: i64, needed: i64) -> i64 {
    if needed <= current {
        current
    } else {
        needed.max(current * 2)
    }
}

/// One forward step over some slots: where each new position is written, and how many
/// positions the queries may look at.
pub(super) struct SlotStep<'a> {
    kv: &'a mut SlotKv,
    /// The slot of each batch row, `[B]` (`None`: rows `0..B` are slots `0..B`).
    rows: Option<Tensor>,
    /// Slot of each batch row as `[B, 1]`, for writing.
    write_rows: Tensor,
    /// Position of each new token, `[B, T]`.
    write_at: Tensor,
    /// The queries attend to positions `0..keys` (the bias masks what they must not see).
    keys: i64,
}

impl<'a> SlotStep<'a> {
    /// A step over `slots` (one per batch row) writing new tokens at `write_at` `[B, T]` and
    /// reading positions `0..keys`. The caller has reserved room for every position written.
    pub(super) fn new(kv: &'a mut SlotKv, slots: &[i64], write_at: Tensor, keys: i64) -> Self {
        let device = write_at.device();
        let all = Tensor::from_slice(slots).to(device);
        let in_order = slots.iter().enumerate().all(|(i, &s)| s == i as i64);
        SlotStep {
            kv,
            write_rows: all.unsqueeze(1),
            rows: (!in_order).then_some(all),
            write_at,
            keys,
        }
    }
}

impl KvStore for SlotStep<'_> {
    fn extend(&mut self, layer: usize, k: Tensor, v: Tensor) -> (Tensor, Tensor) {
        let keys = self.keys;
        let b = k.size()[0];
        let (rows, write_rows, write_at) = (&self.rows, &self.write_rows, &self.write_at);
        let (sk, sv) = self.kv.layer(layer, &k);
        let read = |store: &mut Tensor, new: &Tensor| {
            // Advanced indices on the slot and position dimensions put `[B, T]` first.
            let values = new.permute([0, 2, 1, 3]).to_kind(store.kind());
            let _ = store.index_put_(&[Some(write_rows), None, Some(write_at)], &values, false);
            let visible = store.narrow(2, 0, keys);
            match rows {
                Some(rows) => visible.index_select(0, rows),
                None => visible.narrow(0, 0, b),
            }
        };
        (read(sk, &k), read(sv, &v))
    }
}
