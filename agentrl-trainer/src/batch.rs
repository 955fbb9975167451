//! Trajectories packed into right-padded tensors for the learner's forward passes.

use agentrl_core::packing::length_runs;
use agentrl_core::{TokenId, Trajectory};
use tch::{Device, Tensor};

/// Trajectories packed into right-padded tensors.
pub struct PackedBatch {
    /// Token ids `[B, T]`.
    pub ids: Tensor,
    /// 1 where the *next* token is policy-generated, `[B, T-1]`.
    pub mask: Tensor,
    /// Sampling logprobs of the next tokens, `[B, T-1]`.
    pub old_logprobs: Tensor,
    /// Number of trained tokens.
    pub tokens: usize,
}

/// Packs trajectories (right padding with id 0, masked out).
pub fn pack(trajectories: &[&Trajectory], device: Device) -> PackedBatch {
    pack_tail(trajectories, 0, device)
}

/// Packs the trajectories' ids from position `skip` on (their first `skip` ids are left out,
/// e.g. a prefix they share): row `i` holds `ids[skip..]` of trajectory `i`, right-padded.
fn pack_tail(trajectories: &[&Trajectory], skip: usize, device: Device) -> PackedBatch {
    let b = trajectories.len();
    let t = trajectories
        .iter()
        .map(|x| x.num_tokens().saturating_sub(skip))
        .max()
        .unwrap_or(2)
        .max(2);
    let mut ids = vec![0i64; b * t];
    let mut mask = vec![0f32; b * (t - 1)];
    let mut old = vec![0f32; b * (t - 1)];
    let mut tokens = 0;
    for (row, traj) in trajectories.iter().enumerate() {
        let all = traj.token_ids();
        let tok = all.get(skip..).unwrap_or(&[]);
        let m = traj.loss_mask();
        let m = m.get(skip..).unwrap_or(&[]);
        let lp = traj.sampling_logprobs();
        let lp = lp.get(skip..).unwrap_or(&[]);
        for (j, &id) in tok.iter().enumerate() {
            ids[row * t + j] = id as i64;
        }
        for j in 1..tok.len() {
            mask[row * (t - 1) + j - 1] = m[j];
            old[row * (t - 1) + j - 1] = lp[j];
            tokens += m[j] as usize;
        }
    }
    let (b, t) = (b as i64, t as i64);
    PackedBatch {
        ids: Tensor::from_slice(&ids).view([b, t]).to(device),
        mask: Tensor::from_slice(&mask).view([b, t - 1]).to(device),
        old_logprobs: Tensor::from_slice(&old).view([b, t - 1]).to(device),
        tokens,
    }
}

/// `trajectories` packed in micro-batches of `rows` trajectories (all in one when `rows` is 0),
/// each with the index of its first trajectory.
pub fn pack_chunks(
    trajectories: &[&Trajectory],
    rows: usize,
    device: Device,
) -> Vec<(usize, PackedBatch)> {
    pack_chunks_within(trajectories, rows, 0, device)
}

/// [`pack_chunks`] where a micro-batch also stays within `max_padded_tokens` (rows × longest
/// row; 0: no bound): consecutive trajectories, in order, each micro-batch as long as the next
/// one fits (a trajectory longer than the bound gets a micro-batch of its own). This bounds the
/// activations an update keeps for its backward pass.
pub fn pack_chunks_within(
    trajectories: &[&Trajectory],
    rows: usize,
    max_padded_tokens: usize,
    device: Device,
) -> Vec<(usize, PackedBatch)> {
    let max_rows = if rows == 0 { usize::MAX } else { rows };
    let mut chunks = Vec::new();
    let mut start = 0;
    while start < trajectories.len() {
        let mut end = start + 1;
        let mut longest = trajectories[start].num_tokens();
        while end < trajectories.len() && end - start < max_rows {
            let wider = longest.max(trajectories[end].num_tokens());
            if max_padded_tokens > 0 && (end - start + 1) * wider > max_padded_tokens {
                break;
            }
            longest = wider;
            end += 1;
        }
        chunks.push((start, pack(&trajectories[start..end], device)));
        start = end;
    }
    chunks
}

/// One forward/backward pass of a policy update.
pub enum MicroBatch {
    /// Whole rows.
    Whole(PackedBatch),
    /// Rows that all begin with the same `prefix_len` ids, none of them a policy token:
    /// `prefix` `[1, prefix_len]` goes through the model once, and `rest` holds each row from
    /// position `prefix_len` on (its mask and sampling logprobs cover `rest`'s own targets).
    Shared {
        /// The shared ids, `[1, prefix_len]`.
        prefix: Tensor,
        /// How many ids the rows share.
        prefix_len: usize,
        /// The rows without the prefix.
        rest: PackedBatch,
    },
}

impl MicroBatch {
    /// The packed rows (without the prefix when shared).
    pub fn rows(&self) -> &PackedBatch {
        match self {
            MicroBatch::Whole(packed) | MicroBatch::Shared { rest: packed, .. } => packed,
        }
    }

    /// How many ids each row's packing leaves out at the front (the shared prefix).
    pub fn offset(&self) -> usize {
        match self {
            MicroBatch::Whole(_) => 0,
            MicroBatch::Shared { prefix_len, .. } => *prefix_len,
        }
    }

    /// Log-probabilities and entropies of the rows' masked targets under `model` (see
    /// `PolicyModel::masked_token_logprobs` and `prefixed_token_logprobs`).
    pub fn logprobs(
        &self,
        model: &dyn agentrl_policy::PolicyModel,
        temperature: f64,
        entropy_grad: bool,
    ) -> (Tensor, Tensor) {
        match self {
            MicroBatch::Whole(p) => {
                model.masked_token_logprobs(&p.ids, &p.mask, temperature, entropy_grad)
            }
            MicroBatch::Shared { prefix, rest, .. } => model.prefixed_token_logprobs(
                prefix,
                &rest.ids,
                &rest.mask,
                temperature,
                entropy_grad,
            ),
        }
    }
}

/// The micro-batches of a policy update, in order, each with the index of its first
/// trajectory: runs of at least two consecutive trajectories that share their first
/// `min_shared` ids or more (before any policy token; a GRPO group's prompt) become
/// [`MicroBatch::Shared`], the others are cut as [`pack_chunks_within`] does. `rows` and
/// `max_padded_tokens` bound every micro-batch (0: no bound); `min_shared` 0 shares nothing.
pub fn pack_update(
    trajectories: &[&Trajectory],
    rows: usize,
    max_padded_tokens: usize,
    min_shared: usize,
    device: Device,
) -> Vec<(usize, MicroBatch)> {
    let whole = |from: usize, to: usize, out: &mut Vec<(usize, MicroBatch)>| {
        for (first, packed) in
            pack_chunks_within(&trajectories[from..to], rows, max_padded_tokens, device)
        {
            out.push((from + first, MicroBatch::Whole(packed)));
        }
    };
    if min_shared == 0 {
        let mut out = Vec::new();
        whole(0, trajectories.len(), &mut out);
        return out;
    }
    let ids: Vec<Vec<TokenId>> = trajectories.iter().map(|t| t.token_ids()).collect();
    // The most ids each row may share: those before its first policy token, less one (the
    // id before a policy token must be scored by the row's own rest).
    let limit: Vec<usize> = trajectories
        .iter()
        .map(|t| {
            let mask = t.loss_mask();
            mask.iter()
                .position(|&m| m > 0.0)
                .unwrap_or(mask.len())
                .saturating_sub(1)
        })
        .collect();
    let max_rows = if rows == 0 { usize::MAX } else { rows };
    let mut out = Vec::new();
    let (mut pending, mut i) = (0, 0);
    while i < trajectories.len() {
        let mut shared = limit[i];
        let mut end = i + 1;
        while end < trajectories.len() && end - i < max_rows {
            let common = ids[i]
                .iter()
                .zip(&ids[end])
                .take_while(|(a, b)| a == b)
                .count();
            let candidate = shared.min(common).min(limit[end]);
            let longest_rest = (i..=end)
                .map(|r| ids[r].len().saturating_sub(candidate))
                .max()
                .unwrap_or(0);
            // A shorter prefix for one more row must not save fewer positions than the run
            // saves now (a system prompt shared by every group is not worth splitting the
            // groups' longer prompts for).
            let saved_now = (end - i - 1) * shared;
            if candidate < min_shared
                || (end - i) * candidate < saved_now
                || (max_padded_tokens > 0 && (end - i + 1) * longest_rest > max_padded_tokens)
            {
                break;
            }
            shared = candidate;
            end += 1;
        }
        if end - i >= 2 {
            whole(pending, i, &mut out);
            let prefix: Vec<i64> = ids[i][..shared].iter().map(|&id| id as i64).collect();
            out.push((
                i,
                MicroBatch::Shared {
                    prefix: Tensor::from_slice(&prefix)
                        .view([1, shared as i64])
                        .to(device),
                    prefix_len: shared,
                    rest: pack_tail(&trajectories[i..end], shared, device),
                },
            ));
            i = end;
            pending = end;
        } else {
            i += 1;
        }
    }
    whole(pending, trajectories.len(), &mut out);
    out
}

/// Fixed cost of one more micro-batch in a behaviour-cloning step, in padded tokens: the
/// launch and bookkeeping of its forward and backward passes, which a split must save more
/// padding than to be worth it. Not critical: `learner/sft_step_16_multitask_mixture` took
/// the same time at 64 and 256, and a third longer with the fewest micro-batches.
pub const MICRO_BATCH_OVERHEAD_TOKENS: usize = 64;

/// `trajectories` sorted by length and cut into runs of similar length, packed one
/// micro-batch per run: the cut that needs the fewest padded tokens (rows × longest row of
/// each run) plus [`MICRO_BATCH_OVERHEAD_TOKENS`] per micro-batch, with at most `max_rows`
/// rows (0: no row limit) and at most `max_padded_tokens` padded tokens in each (a longer
/// trajectory gets a micro-batch of its own). A mixture's short and long episodes then do not
/// pad each other. Rows lose their order, so this is only for losses that treat every row
/// alike (behaviour cloning).
pub fn pack_by_length(
    trajectories: &[&Trajectory],
    max_rows: usize,
    max_padded_tokens: usize,
    device: Device,
) -> Vec<PackedBatch> {
    let mut by_length: Vec<(usize, &Trajectory)> =
        trajectories.iter().map(|t| (t.num_tokens(), *t)).collect();
    by_length.sort_by_key(|(length, _)| *length);
    let (lengths, sorted): (Vec<usize>, Vec<&Trajectory>) = by_length.into_iter().unzip();
    length_runs(
        &lengths,
        max_rows,
        max_padded_tokens,
        MICRO_BATCH_OVERHEAD_TOKENS,
    )
    .into_iter()
    .map(|run| pack(&sorted[run], device))
    .collect()
}

/// `trajectories` dealt into `parts` parts (at least 1) of similar lengths and sizes: sorted by
/// length, then dealt like cards, so each part spans the batch's lengths (for data-parallel
/// behaviour cloning, whose parts run at the same time and should take as long).
pub fn deal_by_length<'a>(
    trajectories: &[&'a Trajectory],
    parts: usize,
) -> Vec<Vec<&'a Trajectory>> {
    let parts = parts.max(1);
    let mut sorted = trajectories.to_vec();
    sorted.sort_by_key(|t| t.num_tokens());
    let mut dealt = vec![Vec::with_capacity(sorted.len() / parts + 1); parts];
    for (i, trajectory) in sorted.into_iter().enumerate() {
        dealt[i % parts].push(trajectory);
    }
    dealt
}

/// The trained (policy) tokens of packed micro-batches, at least 1: the loss denominator.
pub fn trained_tokens(chunks: &[(usize, PackedBatch)]) -> f64 {
    chunks.iter().map(|(_, p)| p.tokens).sum::<usize>().max(1) as f64
}

/// Rows of different lengths right-padded with zeros into a `[rows.len(), width]` tensor.
pub(crate) fn padded(rows: &[Vec<f32>], width: i64, device: Device) -> Tensor {
    let w = width as usize;
    let mut flat = vec![0f32; rows.len() * w];
    for (i, row) in rows.iter().enumerate() {
        let n = row.len().min(w);
        flat[i * w..i * w + n].copy_from_slice(&row[..n]);
    }
    Tensor::from_slice(&flat)
        .view([rows.len() as i64, width])
        .to(device)
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentrl_core::{FinishReason, Split, Task, Turn};

    /// A trajectory of `n` tokens: one injected id, then `n - 1` generated ones.
    fn of_length(n: usize) -> Trajectory {
        prompted(vec![1], n - 1)
    }

    /// A trajectory of `prompt` injected, then `generated` ids 2.
    fn prompted(prompt: Vec<u32>, generated: usize) -> Trajectory {
        let n = prompt.len() + generated + 1;
        let task = Task {
            env_id: "e".into(),
            id: format!("t{n}"),
            split: Split::Train,
            data: serde_json::Value::Null,
        };
        let turn = Turn {
            injected_ids: prompt,
            generated_ids: vec![2; generated],
            logprobs: vec![0.0; generated],
            policy_version: 0,
            policy_name: None,
            finish: FinishReason::Stop,
            reward: 0.0,
            stale: false,
            invalid_action: None,
        };
        Trajectory::for_task(&task, 0).with_turns(vec![turn])
    }

    #[test]
    fn packing_by_length_keeps_padding_within_the_budget() {
        let all: Vec<Trajectory> = [3, 50, 4, 60, 5].into_iter().map(of_length).collect();
        let refs: Vec<&Trajectory> = all.iter().collect();
        // Sorted 3, 4, 5 | 50, 60: a fourth row of 50 would pad to 200 > 120.
        let chunks = pack_by_length(&refs, 0, 120, Device::Cpu);
        let shapes: Vec<Vec<i64>> = chunks.iter().map(|c| c.ids.size()).collect();
        assert_eq!(shapes, [vec![3, 5], vec![2, 60]]);
        let tokens: usize = chunks.iter().map(|c| c.tokens).sum();
        assert_eq!(
            tokens,
            [3, 50, 4, 60, 5].iter().map(|n| n - 1).sum::<usize>()
        );
        // A row limit splits further: 3 4 | 5 | 50 60 pads 1 + 0 + 10 tokens, where
        // 3 4 | 5 50 | 60 would pad 1 + 45 + 0.
        let rows: Vec<i64> = pack_by_length(&refs, 2, 120, Device::Cpu)
            .iter()
            .map(|c| c.ids.size()[0])
            .collect();
        assert_eq!(rows, [2, 1, 2]);
        // Room for the whole batch does not make it one micro-batch: the 50 and 60 rows
        // would pad the short ones by 165 tokens, more than a second micro-batch costs.
        let shapes: Vec<Vec<i64>> = pack_by_length(&refs, 0, 300, Device::Cpu)
            .iter()
            .map(|c| c.ids.size())
            .collect();
        assert_eq!(shapes, [vec![3, 5], vec![2, 60]]);
        // Rows of nearly one length stay together.
        let close: Vec<Trajectory> = [60, 58, 61, 59].into_iter().map(of_length).collect();
        let close: Vec<&Trajectory> = close.iter().collect();
        assert_eq!(pack_by_length(&close, 0, 300, Device::Cpu).len(), 1);
        // A row longer than the budget gets a micro-batch of its own.
        let rows: Vec<i64> = pack_by_length(&refs, 0, 40, Device::Cpu)
            .iter()
            .map(|c| c.ids.size()[0])
            .collect();
        assert_eq!(rows, [3, 1, 1]);
        assert!(pack_by_length(&[], 0, 40, Device::Cpu).is_empty());
    }

    #[test]
    fn dealing_by_length_gives_every_part_a_share_of_each_length() {
        let all: Vec<Trajectory> = [9, 3, 7, 5, 4, 8, 6].into_iter().map(of_length).collect();
        let refs: Vec<&Trajectory> = all.iter().collect();
        let lengths = |parts: Vec<Vec<&Trajectory>>| -> Vec<Vec<usize>> {
            parts
                .iter()
                .map(|p| p.iter().map(|t| t.num_tokens()).collect())
                .collect()
        };
        assert_eq!(
            lengths(deal_by_length(&refs, 2)),
            [vec![3, 5, 7, 9], vec![4, 6, 8]]
        );
        assert_eq!(
            lengths(deal_by_length(&refs, 3)),
            [vec![3, 6, 9], vec![4, 7], vec![5, 8]]
        );
        // No part asked is one part; more parts than rows leave some empty.
        assert_eq!(
            lengths(deal_by_length(&refs, 0)),
            [vec![3, 4, 5, 6, 7, 8, 9]]
        );
        assert_eq!(deal_by_length(&refs[..1], 3)[1].len(), 0);
    }

    #[test]
    fn bounded_micro_batches_keep_the_order_and_the_token_budget() {
        let all: Vec<Trajectory> = [3, 50, 4, 60, 5].into_iter().map(of_length).collect();
        let refs: Vec<&Trajectory> = all.iter().collect();
        let cut = |rows, tokens| -> Vec<(usize, Vec<i64>)> {
            pack_chunks_within(&refs, rows, tokens, Device::Cpu)
                .iter()
                .map(|(first, p)| (*first, p.ids.size()))
                .collect()
        };
        // 3 50 (100 padded) | 4 60 (120) | 5: a third row would pad past 120.
        assert_eq!(
            cut(0, 120),
            [(0, vec![2, 50]), (2, vec![2, 60]), (4, vec![1, 5])]
        );
        // No token bound: the row limit alone, as `pack_chunks`.
        assert_eq!(
            cut(2, 0),
            [(0, vec![2, 50]), (2, vec![2, 60]), (4, vec![1, 5])]
        );
        assert_eq!(cut(0, 0), [(0, vec![5, 60])]);
        // A trajectory longer than the bound gets a micro-batch of its own.
        assert_eq!(cut(0, 10).len(), 5);
        assert!(pack_chunks_within(&[], 0, 100, Device::Cpu).is_empty());
    }

    #[test]
    fn runs_that_share_a_prompt_become_shared_micro_batches() {
        let p: Vec<u32> = (10..20).collect();
        let all = [
            prompted(vec![5, 6], 3),
            prompted(p.clone(), 4),
            prompted(p.clone(), 2),
            prompted([p.clone(), vec![30]].concat(), 5),
            prompted(vec![7; 12], 3),
        ];
        let refs: Vec<&Trajectory> = all.iter().collect();
        let parts = |min, tokens| -> Vec<(usize, usize, Vec<i64>)> {
            pack_update(&refs, 0, tokens, min, Device::Cpu)
                .iter()
                .map(|(first, mb)| (*first, mb.offset(), mb.rows().ids.size()))
                .collect()
        };
        // Rows 1-3 share the 10 prompt ids; the last of them is scored by each row's rest,
        // so 9 are shared. Every policy token stays in the rests: 4 + 2 + 5.
        let shared = parts(4, 0);
        assert_eq!(
            shared,
            [(0, 0, vec![1, 5]), (1, 9, vec![3, 7]), (4, 0, vec![1, 15])]
        );
        let update = pack_update(&refs, 0, 0, 4, Device::Cpu);
        assert_eq!(update[1].1.rows().tokens, 11);
        // Too short a prefix for the threshold, or off: whole rows only.
        assert!(parts(10, 0).iter().all(|(_, offset, _)| *offset == 0));
        assert_eq!(parts(0, 0), [(0, 0, vec![5, 16])]);
        // A token budget of 14 fits two rests of 7, not three.
        assert_eq!(parts(4, 14)[1], (1, 9, vec![2, 5]));
        // Two groups whose prompts share a 4-id system prompt: each group keeps its own
        // longer prefix rather than all four rows sharing the system prompt.
        let system = vec![40, 41, 42, 43];
        let groups = [
            prompted([system.clone(), vec![1; 8]].concat(), 2),
            prompted([system.clone(), vec![1; 8]].concat(), 3),
            prompted([system.clone(), vec![2; 8]].concat(), 2),
            prompted([system, vec![2; 8]].concat(), 2),
        ];
        let refs: Vec<&Trajectory> = groups.iter().collect();
        let offsets: Vec<(usize, usize)> = pack_update(&refs, 0, 0, 4, Device::Cpu)
            .iter()
            .map(|(first, mb)| (*first, mb.offset()))
            .collect();
        assert_eq!(offsets, [(0, 11), (2, 11)]);
    }
}
