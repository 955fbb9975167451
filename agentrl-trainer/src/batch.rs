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
