//! An engine step's logits `[B, V]` out of libtorch into one row-major buffer, in whichever of
//! the two layouts the model's vocabulary head produced them (`CachedDecoder::step_head`):
//! row-major, or weight-major (a transposed view of `W · hᵀ`), which is transposed on the way.

use std::mem::MaybeUninit;

use agentrl_core::{Error, Result};
use tch::{Device, Kind, Tensor};

/// Vocabulary ids per tile of the transposition: a tile of 64 ids × 32 rows (8 KiB of f32)
/// stays in the L1 cache while it is read across and written along.
const TILE: usize = 64;

/// The logits `[rows, vocab]` in `logits` (f32, on the CPU) as one row-major vector: copied
/// when they are row-major, transposed on the way when they are a weight-major view
/// (strides `[1, rows]`), copied through a contiguous copy otherwise.
pub(super) fn row_major_logits(logits: &Tensor, rows: usize, vocab: usize) -> Result<Vec<f32>> {
    let size = logits.size();
    let (kind, device) = (logits.kind(), logits.device());
    if size != [rows as i64, vocab as i64] || kind != Kind::Float || device != Device::Cpu {
        return Err(Error::Policy(format!(
            "the model returned logits of shape {size:?} ({kind:?} on {device:?}) for {rows} \
             rows of a {vocab}-token vocabulary (expected f32 on the CPU)"
        )));
    }
    if rows > 1 && vocab > 1 && logits.stride() == [1, rows as i64] {
        // SAFETY: a [rows, vocab] f32 tensor on the CPU with strides [1, rows] covers exactly
        // rows × vocab consecutive f32 values from its data pointer (which includes the
        // storage offset), vocabulary-major; `logits` is borrowed for the whole read.
        let columns =
            unsafe { std::slice::from_raw_parts(logits.data_ptr() as *const f32, rows * vocab) };
        return Ok(transpose(columns, vocab, rows));
    }
    let flat = logits.contiguous().view([-1]);
    Vec::<f32>::try_from(&flat).map_err(|e| Error::Policy(format!("reading logits: {e}")))
}

/// `columns` `[vocab, rows]` (row-major) as `[rows, vocab]`, tile by tile; a large one split
/// by vocabulary ranges over the libtorch threads, idle meanwhile.
fn transpose(columns: &[f32], vocab: usize, rows: usize) -> Vec<f32> {
    let n = rows * vocab;
    let mut out: Vec<f32> = Vec::with_capacity(n);
    let threads = if n >= PARALLEL_VALUES {
        usize::try_from(tch::get_num_threads()).unwrap_or(1).max(1)
    } else {
        1
    };
    // Each part: a range of vocabulary ids, and that range of every row of the output.
    let per_part = vocab.div_ceil(threads).next_multiple_of(TILE);
    let mut parts: Vec<(usize, Vec<&mut [MaybeUninit<f32>]>)> = (0..vocab)
        .step_by(per_part)
        .map(|start| (start, Vec::with_capacity(rows)))
        .collect();
    for row in out.spare_capacity_mut()[..n].chunks_exact_mut(vocab) {
        let mut rest = row;
        for (start, part) in parts.iter_mut() {
            let len = per_part.min(vocab - *start);
            let (range, tail) = rest.split_at_mut(len);
            part.push(range);
            rest = tail;
        }
    }
    crate::threads::on_threads(parts.into_iter(), |(start, mut part)| {
        transpose_range(columns, rows, start, &mut part)
    });
    // SAFETY: the parts cover every vocabulary id of every row, so all `n` values were
    // written.
    unsafe { out.set_len(n) };
    out
}

/// Writes ids `start..start + len` of every row (`out[r]`, `len` long) from `columns`
/// `[vocab, rows]`, tile by tile.
fn transpose_range(
    columns: &[f32],
    rows: usize,
    start: usize,
    out: &mut [&mut [MaybeUninit<f32>]],
) {
    let len = out.first().map_or(0, |row| row.len());
    for t0 in (0..len).step_by(TILE) {
        let t1 = (t0 + TILE).min(len);
        let tile = &columns[(start + t0) * rows..(start + t1) * rows];
        for (r, row) in out.iter_mut().enumerate() {
            for (slot, from) in row[t0..t1].iter_mut().zip(tile.chunks_exact(rows)) {
                *slot = MaybeUninit::new(from[r]);
            }
        }
    }
}

/// Logits from which the transposition is split over the libtorch threads (a quarter of the
/// tiny Llama's 32-row decode step).
const PARALLEL_VALUES: usize = 1 << 18;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_layouts_read_as_the_same_rows() {
        // 3 rows of a 150-id vocabulary: not a multiple of the tile, so the last tile is short.
        let (rows, vocab) = (3usize, 150usize);
        let values: Vec<f32> = (0..rows * vocab).map(|i| i as f32 * 0.5 - 7.0).collect();
        let row_major = Tensor::from_slice(&values).view([rows as i64, vocab as i64]);
        let weight_major = row_major.tr().contiguous().tr();
        assert_eq!(weight_major.stride(), [1, rows as i64]);
        assert_eq!(row_major_logits(&row_major, rows, vocab).unwrap(), values);
        assert_eq!(
            row_major_logits(&weight_major, rows, vocab).unwrap(),
            values
        );
        // Any other strides (a column slice here) go through a contiguous copy.
        let wide = Tensor::from_slice(&values).view([vocab as i64, rows as i64]);
        let sliced = wide.narrow(1, 1, 2).tr();
        let want: Vec<f32> = Vec::try_from(&sliced.contiguous().view([-1])).unwrap();
        assert_eq!(row_major_logits(&sliced, 2, vocab).unwrap(), want);
    }

    #[test]
    fn a_large_transposition_split_over_threads_is_exact() {
        // Above the parallel threshold, with a vocabulary that is not a multiple of the tile.
        let (rows, vocab) = (7usize, 40_001usize);
        assert!(rows * vocab >= PARALLEL_VALUES);
        let columns: Vec<f32> = (0..rows * vocab).map(|i| i as f32).collect();
        crate::with_torch_threads(2, || {
            let got = transpose(&columns, vocab, rows);
            let want: Vec<f32> = (0..rows)
                .flat_map(|r| (0..vocab).map(move |v| (v * rows + r) as f32))
                .collect();
            assert!(got == want, "the split transposition differs");
        });
    }

    #[test]
    fn logits_of_the_wrong_shape_or_type_are_an_error_that_says_so() {
        let logits = Tensor::zeros([2, 10], (Kind::Float, Device::Cpu));
        let err = row_major_logits(&logits, 3, 10).unwrap_err().to_string();
        assert!(err.contains("[2, 10]") && err.contains("3 rows"), "{err}");
        let half = logits.to_kind(Kind::BFloat16);
        assert!(row_major_logits(&half, 2, 10).is_err());
    }
}
