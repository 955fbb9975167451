//! Dequantisation of ggml's K-quants: super-blocks of 256 elements in sub-blocks of 16 or 32,
//! each sub-block with its own quantised scale (and, for Q2_K, Q4_K and Q5_K, minimum) under
//! the super-block's f16 `d` (and `dmin`). Byte layouts are in [`super::dequant`]'s table.
//!
//! Each function takes whole blocks: `data.len()` a multiple of the block's bytes and
//! `out.len()` the matching element count (the caller checks; extra bytes are not touched).

use super::half::f16_at;

/// The 6-bit scale and minimum of sub-block `j` (0..8) from the 12 packed Q4_K/Q5_K scale
/// bytes: sub-blocks 0..4 keep them in the low 6 bits of bytes `j` and `j + 4`; 4..8 in the
/// nibbles of byte `j + 4` with the high 2 bits in the top bits of bytes `j − 4` and `j`.
fn scale_min_k4(j: usize, s: &[u8]) -> (u8, u8) {
    if j < 4 {
        (s[j] & 63, s[j + 4] & 63)
    } else {
        (
            (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4),
            (s[j + 4] >> 4) | ((s[j] >> 6) << 4),
        )
    }
}

/// The scales and minimums, times `d` and `dmin`, of the two 32-element halves of Q4_K/Q5_K
/// group `g` (0..4): sub-blocks `2g` and `2g + 1`.
fn group_scales_k4(g: usize, d: f32, dmin: f32, scales: &[u8]) -> [(f32, f32); 2] {
    [2 * g, 2 * g + 1].map(|j| {
        let (sc, m) = scale_min_k4(j, scales);
        (d * f32::from(sc), dmin * f32::from(m))
    })
}

/// The 6-bit scale of Q3_K sub-block `j` (0..16), already less its offset of 32: the low 4
/// bits are the nibbles of bytes 0..8 (low nibbles for 0..8, high for 8..16), the high 2 bits
/// the bit pairs of bytes 8..12 (byte `8 + j % 4`, pair `j / 4`).
fn q3_k_scale(j: usize, s: &[u8]) -> f32 {
    let low = if j < 8 { s[j] & 0x0f } else { s[j - 8] >> 4 };
    let high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    f32::from(low | (high << 4)) - 32.0
}

/// Q2_K (84 bytes): 16 scale bytes (low nibble the sub-block's scale, high nibble its
/// minimum), 64 bytes of 2-bit quants, f16 `d` and `dmin`. Each half of 128 elements reads 32
/// quant bytes four times, two bits further each time; every 16 elements take the next scale.
pub(super) fn q2_k(data: &[u8], out: &mut [f32]) {
    for (o, b) in out.chunks_exact_mut(256).zip(data.chunks_exact(84)) {
        let (scales, rest) = b.split_at(16);
        let qs = &rest[..64];
        let (d, dmin) = (f16_at(b, 80), f16_at(b, 82));
        for (e, x) in o.iter_mut().enumerate() {
            let (half, shift, l) = (e / 128, (e % 128) / 32 * 2, e % 32);
            let sc = scales[e / 16];
            let q = (qs[32 * half + l] >> shift) & 3;
            *x = d * f32::from(sc & 0x0f) * f32::from(q) - dmin * f32::from(sc >> 4);
        }
    }
}

/// Q3_K (110 bytes): 32 bytes of high bits `hmask`, 64 bytes of 2-bit quants, 12 bytes of
/// 6-bit scales, f16 `d`. The quants are laid out as Q2_K's; element `e`'s third bit is bit
/// `e / 32` of `hmask[e % 32]`, and a clear bit subtracts 4 (quants −4..4).
pub(super) fn q3_k(data: &[u8], out: &mut [f32]) {
    for (o, b) in out.chunks_exact_mut(256).zip(data.chunks_exact(110)) {
        let (hmask, rest) = b.split_at(32);
        let (qs, rest) = rest.split_at(64);
        let scales = &rest[..12];
        let d = f16_at(b, 108);
        let sub_scales: [f32; 16] = std::array::from_fn(|j| d * q3_k_scale(j, scales));
        for (e, x) in o.iter_mut().enumerate() {
            let (half, shift, l) = (e / 128, (e % 128) / 32 * 2, e % 32);
            let low = i32::from((qs[32 * half + l] >> shift) & 3);
            let high_set = hmask[l] & (1 << (e / 32)) != 0;
            let q = low - if high_set { 0 } else { 4 };
            *x = sub_scales[e / 16] * q as f32;
        }
    }
}

/// Q4_K (144 bytes): f16 `d`, f16 `dmin`, 12 bytes of packed 6-bit scales and minimums, 128
/// bytes of nibbles. Four groups of 64 elements; each uses 32 bytes, low nibbles first.
pub(super) fn q4_k(data: &[u8], out: &mut [f32]) {
    for (o, b) in out.chunks_exact_mut(256).zip(data.chunks_exact(144)) {
        let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
        let scales = &b[4..16];
        for (g, (og, qg)) in o
            .chunks_exact_mut(64)
            .zip(b[16..144].chunks_exact(32))
            .enumerate()
        {
            let [(d1, m1), (d2, m2)] = group_scales_k4(g, d, dmin, scales);
            let (lo, hi) = og.split_at_mut(32);
            for ((l, h), &q) in lo.iter_mut().zip(hi.iter_mut()).zip(qg) {
                *l = d1 * f32::from(q & 0x0f) - m1;
                *h = d2 * f32::from(q >> 4) - m2;
            }
        }
    }
}

/// Q5_K (176 bytes): Q4_K's `d`, `dmin` and scales, then 32 bytes of fifth bits `qh`, then 128
/// bytes of nibbles laid out as Q4_K's. Group `g`'s low nibbles take bit `2g` of `qh[l]`, its
/// high nibbles bit `2g + 1`.
pub(super) fn q5_k(data: &[u8], out: &mut [f32]) {
    for (o, b) in out.chunks_exact_mut(256).zip(data.chunks_exact(176)) {
        let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
        let scales = &b[4..16];
        let qh = &b[16..48];
        for (g, (og, qg)) in o
            .chunks_exact_mut(64)
            .zip(b[48..176].chunks_exact(32))
            .enumerate()
        {
            let [(d1, m1), (d2, m2)] = group_scales_k4(g, d, dmin, scales);
            let (lo, hi) = og.split_at_mut(32);
            for (l, ((x_lo, x_hi), &q)) in lo.iter_mut().zip(hi.iter_mut()).zip(qg).enumerate() {
                let fifth_lo = ((qh[l] >> (2 * g)) & 1) << 4;
                let fifth_hi = ((qh[l] >> (2 * g + 1)) & 1) << 4;
                *x_lo = d1 * f32::from((q & 0x0f) | fifth_lo) - m1;
                *x_hi = d2 * f32::from((q >> 4) | fifth_hi) - m2;
            }
        }
    }
}

/// Q6_K (210 bytes): 128 bytes of low nibbles `ql`, 64 bytes of high bit pairs `qh`, 16 i8
/// scales, f16 `d`. Two halves of 128 elements; each uses 64 bytes of `ql`, 32 of `qh` and 8
/// scales; quants are offset by 32.
pub(super) fn q6_k(data: &[u8], out: &mut [f32]) {
    for (o, b) in out.chunks_exact_mut(256).zip(data.chunks_exact(210)) {
        let (ql, rest) = b.split_at(128);
        let (qh, rest) = rest.split_at(64);
        let (sc, dbytes) = rest.split_at(16);
        let d = f16_at(dbytes, 0);
        for (half, oh) in o.chunks_exact_mut(128).enumerate() {
            let ql = &ql[64 * half..64 * half + 64];
            let qh = &qh[32 * half..32 * half + 32];
            let sc = &sc[8 * half..8 * half + 8];
            for l in 0..32 {
                let is = l / 16;
                let q1 = i32::from((ql[l] & 0x0f) | ((qh[l] & 3) << 4)) - 32;
                let q2 = i32::from((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
                let q3 = i32::from((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                let q4 = i32::from((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                let s = |k: usize| d * f32::from(sc[is + k] as i8);
                oh[l] = s(0) * q1 as f32;
                oh[l + 32] = s(2) * q2 as f32;
                oh[l + 64] = s(4) * q3 as f32;
                oh[l + 96] = s(6) * q4 as f32;
            }
        }
    }
}
