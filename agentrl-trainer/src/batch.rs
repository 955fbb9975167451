//! Trajectories packed into right-padded tensors for the learner's forward passes.

use agentrl_core::Trajectory;
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
    let b = trajectories.len();
    let t = trajectories
        .iter()
        .map(|x| x.num_tokens())
        .max()
        .unwrap_or(2)
        .max(2);
    let mut ids = vec![0i64; b * t];
    let mut mask = vec![0f32; b * (t - 1)];
    let mut old = vec![0f32; b * (t - 1)];
    let mut tokens = 0;
    for (row, traj) in trajectories.iter().enumerate() {
        let tok = traj.token_ids();
        let m = traj.loss_mask();
        let lp = traj.sampling_logprobs();
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
    let rows = if rows == 0 {
        trajectories.len().max(1)
    } else {
        rows
    };
    trajectories
        .chunks(rows)
        .enumerate()
        .map(|(i, c)| (i * rows, pack(c, device)))
        .collect()
}

/// `trajectories` sorted by length and packed into micro-batches of at most `max_rows` rows
/// (0: no row limit) whose padded size (rows × longest row) stays within `max_padded_tokens`
/// (a longer trajectory gets a micro-batch of its own). Padding then stays small when lengths
/// differ, as in a multi-task batch. A batch that fits in one micro-batch is packed as it is;
/// otherwise rows lose their order, so this is only for losses that treat every row alike
/// (behaviour cloning).
pub fn pack_by_length(
    trajectories: &[&Trajectory],
    max_rows: usize,
    max_padded_tokens: usize,
    device: Device,
) -> Vec<PackedBatch> {
    let longest = trajectories
        .iter()
        .map(|t| t.num_tokens())
        .max()
        .unwrap_or(0);
    let rows = trajectories.len();
    if rows <= 1 || ((max_rows == 0 || rows <= max_rows) && rows * longest <= max_padded_tokens) {
        return vec![pack(trajectories, device)];
    }
    let mut sorted: Vec<&Trajectory> = trajectories.to_vec();
    sorted.sort_by_key(|t| t.num_tokens());
    let mut chunks = Vec::new();
    let mut start = 0;
    for end in 1..=sorted.len() {
        let rows = end - start;
        let next_fits = sorted.get(end).is_some_and(|next| {
            (max_rows == 0 || rows < max_rows)
                && (rows + 1) * next.num_tokens() <= max_padded_tokens
        });
        if !next_fits {
            chunks.push(pack(&sorted[start..end], device));
            start = end;
        }
    }
    chunks
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
        let task = Task {
            env_id: "e".into(),
            id: format!("t{n}"),
            split: Split::Train,
            data: serde_json::Value::Null,
        };
        let turn = Turn {
            injected_ids: vec![1],
            generated_ids: vec![2; n - 1],
            logprobs: vec![0.0; n - 1],
            policy_version: 0,
            policy_name: None,
            finish: FinishReason::Stop,
            reward: 0.0,
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
        // A row limit splits further; a row longer than the budget gets a chunk of its own.
        let rows: Vec<i64> = pack_by_length(&refs, 2, 120, Device::Cpu)
            .iter()
            .map(|c| c.ids.size()[0])
            .collect();
        assert_eq!(rows, [2, 2, 1], "3 4 | 5 50 | 60");
        // A batch that fits is one micro-batch in its own order.
        let whole = pack_by_length(&refs, 0, 300, Device::Cpu);
        assert_eq!(whole.len(), 1);
        assert_eq!(whole[0].ids.size(), [5, 60]);
        assert_eq!(whole[0].mask.sum(tch::Kind::Float).int64_value(&[]), 117);
        assert_eq!(whole[0].ids.get(1).size(), [60]);
        let second_row_tokens = whole[0].mask.get(1).sum(tch::Kind::Float).int64_value(&[]);
        assert_eq!(
            second_row_tokens, 49,
            "row 1 is still the 50-token trajectory"
        );
        let rows: Vec<i64> = pack_by_length(&refs, 0, 40, Device::Cpu)
            .iter()
            .map(|c| c.ids.size()[0])
            .collect();
        assert_eq!(rows, [3, 1, 1]);
    }
}
