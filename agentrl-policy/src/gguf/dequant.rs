//! ggml tensor types and their dequantisation to `f32`.
//!
//! Every supported type is stored as a sequence of fixed-size blocks; a block holds
//! [`GgmlType::block_len`] elements in [`GgmlType::block_bytes`] bytes. The layouts follow ggml:
//!
//! | type | elements | bytes | layout |
//! |---|---|---|---|
//! | F32 | 1 | 4 | little-endian IEEE single |
//! | F16 | 1 | 2 | little-endian IEEE half |
//! | BF16 | 1 | 2 | upper 16 bits of an IEEE single |
//! | Q8_0 | 32 | 34 | f16 scale `d`, 32 × i8 `q`; `x = d·q` |
//! | Q4_0 | 32 | 18 | f16 `d`, 16 bytes of nibbles; `x = d·(q − 8)`; low nibbles are elements 0..16, high nibbles 16..32 |
//! | Q4_1 | 32 | 20 | f16 `d`, f16 `m`, 16 bytes of nibbles as Q4_0; `x = d·q + m` |
//! | Q5_0 | 32 | 22 | f16 `d`, 32 fifth bits `qh` (u32), 16 bytes of nibbles as Q4_0; `x = d·(q − 16)` |
//! | Q5_1 | 32 | 24 | f16 `d`, f16 `m`, `qh` and nibbles as Q5_0; `x = d·q + m` |
//! | IQ4_NL | 32 | 18 | f16 `d`, 16 bytes of nibbles indexing a fixed 16-value table; `x = d·table[q]` |
//! | Q2_K | 256 | 84 | 16 bytes of 4-bit scale/min pairs, 64 bytes of 2-bit quants, f16 `d`, f16 `dmin` |
//! | Q3_K | 256 | 110 | 32 bytes of high bits, 64 bytes of 2-bit quants, 12 bytes of 6-bit scales, f16 `d` |
//! | Q4_K | 256 | 144 | f16 `d`, f16 `dmin`, 12 bytes of packed 6-bit scales and mins, 128 bytes of nibbles |
//! | Q5_K | 256 | 176 | as Q4_K, with 32 bytes of fifth bits before the nibbles |
//! | Q6_K | 256 | 210 | 128 bytes low nibbles `ql`, 64 bytes high 2-bit pairs `qh`, 16 × i8 scales, f16 `d` |
//! | IQ4_XS | 256 | 136 | f16 `d`, 6-bit scales of 8 sub-blocks (u16 high bits, 4 bytes low nibbles), 128 bytes of IQ4_NL nibbles |
//!
//! The K-quant layouts are decoded in [`super::kquant`]. These are the types llama.cpp writes for
//! the usual quantisations (`Q4_K_M`, `Q5_K_S`, `Q3_K_L`, ...), including the fallbacks it uses for
//! tensors whose rows are not a multiple of 256 (Q5_0, Q5_1, Q8_0, IQ4_NL: for example every
//! 896-wide matrix of Qwen2.5-0.5B).

use std::fmt;

use super::half::{f16_at, f16_to_f32};

/// A ggml tensor element type, identified by its on-disk type id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GgmlType {
    /// 32-bit float (id 0).
    F32,
    /// 16-bit IEEE half float (id 1).
    F16,
    /// 4-bit blocks of 32 with one f16 scale (id 2).
    Q4_0,
    /// 4-bit blocks of 32 with an f16 scale and an f16 minimum (id 3).
    Q4_1,
    /// 5-bit blocks of 32 with one f16 scale (id 6).
    Q5_0,
    /// 5-bit blocks of 32 with an f16 scale and an f16 minimum (id 7).
    Q5_1,
    /// 8-bit blocks of 32 with one f16 scale (id 8).
    Q8_0,
    /// 2-bit super-blocks of 256 with 4-bit sub-block scales and minimums (id 10).
    Q2K,
    /// 3-bit super-blocks of 256 with 6-bit sub-block scales (id 11).
    Q3K,
    /// 4-bit super-blocks of 256 with 6-bit sub-block scales and minimums (id 12).
    Q4K,
    /// 5-bit super-blocks of 256 with 6-bit sub-block scales and minimums (id 13).
    Q5K,
    /// 6-bit super-blocks of 256 with 8-bit sub-block scales (id 14).
    Q6K,
    /// 4-bit non-linear blocks of 32 with one f16 scale (id 20).
    IQ4NL,
    /// 4-bit non-linear super-blocks of 256 with 6-bit sub-block scales (id 23).
    IQ4XS,
    /// bfloat16 (id 30).
    BF16,
    /// Any other type id; it can be listed but not dequantised.
    Other(u32),
}

impl GgmlType {
    /// Every type this reader dequantises, in id order.
    pub const DEQUANTISABLE: [GgmlType; 15] = [
        Self::F32,
        Self::F16,
        Self::Q4_0,
        Self::Q4_1,
        Self::Q5_0,
        Self::Q5_1,
        Self::Q8_0,
        Self::Q2K,
        Self::Q3K,
        Self::Q4K,
        Self::Q5K,
        Self::Q6K,
        Self::IQ4NL,
        Self::IQ4XS,
        Self::BF16,
    ];

    /// Maps an on-disk type id to a type (`Other` for ids this reader cannot dequantise).
    pub fn from_id(id: u32) -> Self {
        match id {
            0 => Self::F32,
            1 => Self::F16,
            2 => Self::Q4_0,
            3 => Self::Q4_1,
            6 => Self::Q5_0,
            7 => Self::Q5_1,
            8 => Self::Q8_0,
            10 => Self::Q2K,
            11 => Self::Q3K,
            12 => Self::Q4K,
            13 => Self::Q5K,
            14 => Self::Q6K,
            20 => Self::IQ4NL,
            23 => Self::IQ4XS,
            30 => Self::BF16,
            other => Self::Other(other),
        }
    }

    /// The on-disk type id.
    pub fn id(self) -> u32 {
        match self {
            Self::F32 => 0,
            Self::F16 => 1,
            Self::Q4_0 => 2,
            Self::Q4_1 => 3,
            Self::Q5_0 => 6,
            Self::Q5_1 => 7,
            Self::Q8_0 => 8,
            Self::Q2K => 10,
            Self::Q3K => 11,
            Self::Q4K => 12,
            Self::Q5K => 13,
            Self::Q6K => 14,
            Self::IQ4NL => 20,
            Self::IQ4XS => 23,
            Self::BF16 => 30,
            Self::Other(id) => id,
        }
    }

    /// Elements per block, or `None` for unsupported types.
    pub fn block_len(self) -> Option<usize> {
        match self {
            Self::F32 | Self::F16 | Self::BF16 => Some(1),
            Self::Q4_0 | Self::Q4_1 | Self::Q5_0 | Self::Q5_1 | Self::Q8_0 | Self::IQ4NL => {
                Some(32)
            }
            Self::Q2K | Self::Q3K | Self::Q4K | Self::Q5K | Self::Q6K | Self::IQ4XS => Some(256),
            Self::Other(_) => None,
        }
    }

    /// Bytes per block, or `None` for unsupported types.
    pub fn block_bytes(self) -> Option<usize> {
        match self {
            Self::F32 => Some(4),
            Self::F16 | Self::BF16 => Some(2),
            Self::Q4_0 | Self::IQ4NL => Some(18),
            Self::Q4_1 => Some(20),
            Self::Q5_0 => Some(22),
            Self::Q5_1 => Some(24),
            Self::Q8_0 => Some(34),
            Self::Q2K => Some(84),
            Self::Q3K => Some(110),
            Self::Q4K => Some(144),
            Self::Q5K => Some(176),
            Self::Q6K => Some(210),
            Self::IQ4XS => Some(136),
            Self::Other(_) => None,
        }
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::F32 => f.write_str("F32"),
            Self::F16 => f.write_str("F16"),
            Self::Q4_0 => f.write_str("Q4_0"),
            Self::Q4_1 => f.write_str("Q4_1"),
            Self::Q5_0 => f.write_str("Q5_0"),
            Self::Q5_1 => f.write_str("Q5_1"),
            Self::Q8_0 => f.write_str("Q8_0"),
            Self::Q2K => f.write_str("Q2_K"),
            Self::Q3K => f.write_str("Q3_K"),
            Self::Q4K => f.write_str("Q4_K"),
            Self::Q5K => f.write_str("Q5_K"),
            Self::Q6K => f.write_str("Q6_K"),
            Self::IQ4NL => f.write_str("IQ4_NL"),
            Self::IQ4XS => f.write_str("IQ4_XS"),
            Self::BF16 => f.write_str("BF16"),
            Self::Other(id) => write!(f, "ggml type id {id}"),
        }
    }
}

/// The 16 values a 4-bit IQ4_NL / IQ4_XS index stands for (before the block's scale).
const IQ4_VALUES: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

/// Dequantises whole blocks of `ty` from `data` into `out`.
///
/// `data.len()` must be a multiple of the block size in bytes and `out.len()` the matching
/// element count; the caller checks both (blocks beyond either are not touched).
pub(crate) fn dequantize_into(ty: GgmlType, data: &[u8], out: &mut [f32]) {
    match ty {
        GgmlType::F32 => {
            for (o, c) in out.iter_mut().zip(data.chunks_exact(4)) {
                *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            }
        }
        GgmlType::F16 => {
            for (o, c) in out.iter_mut().zip(data.chunks_exact(2)) {
                *o = f16_to_f32(u16::from_le_bytes([c[0], c[1]]));
            }
        }
        GgmlType::BF16 => {
            for (o, c) in out.iter_mut().zip(data.chunks_exact(2)) {
                *o = f32::from_bits(u32::from(u16::from_le_bytes([c[0], c[1]])) << 16);
            }
        }
        GgmlType::Q8_0 => {
            for (o, b) in out.chunks_exact_mut(32).zip(data.chunks_exact(34)) {
                let d = f16_at(b, 0);
                for (x, &q) in o.iter_mut().zip(&b[2..34]) {
                    *x = d * f32::from(q as i8);
                }
            }
        }
        GgmlType::Q4_0 => nibble_blocks(data, out, 18, 2, |b| {
            let d = f16_at(b, 0);
            std::array::from_fn(|q| d * (q as f32 - 8.0))
        }),
        GgmlType::Q4_1 => nibble_blocks(data, out, 20, 4, |b| {
            let (d, m) = (f16_at(b, 0), f16_at(b, 2));
            std::array::from_fn(|q| d * q as f32 + m)
        }),
        GgmlType::IQ4NL => nibble_blocks(data, out, 18, 2, |b| {
            let d = f16_at(b, 0);
            IQ4_VALUES.map(|v| d * f32::from(v))
        }),
        GgmlType::Q5_0 => fifth_bit_blocks(data, out, 22, 2, |b| {
            let d = f16_at(b, 0);
            std::array::from_fn(|q| d * (q as f32 - 16.0))
        }),
        GgmlType::Q5_1 => fifth_bit_blocks(data, out, 24, 4, |b| {
            let (d, m) = (f16_at(b, 0), f16_at(b, 2));
            std::array::from_fn(|q| d * q as f32 + m)
        }),
        GgmlType::Q2K => super::kquant::q2_k(data, out),
        GgmlType::Q3K => super::kquant::q3_k(data, out),
        GgmlType::Q4K => super::kquant::q4_k(data, out),
        GgmlType::Q5K => super::kquant::q5_k(data, out),
        GgmlType::Q6K => super::kquant::q6_k(data, out),
        GgmlType::IQ4XS => iq4_xs(data, out),
        GgmlType::Other(_) => {}
    }
}

/// Blocks of 32 whose 16 bytes of nibbles start at byte `quants_at` (low nibbles are elements
/// 0..16, high nibbles 16..32); `table(block)` gives the element each nibble value stands for.
fn nibble_blocks(
    data: &[u8],
    out: &mut [f32],
    block_bytes: usize,
    quants_at: usize,
    table: impl Fn(&[u8]) -> [f32; 16],
) {
    for (o, b) in out.chunks_exact_mut(32).zip(data.chunks_exact(block_bytes)) {
        spread_nibbles(o, &b[quants_at..quants_at + 16], &table(b));
    }
}

/// Writes 32 elements from 16 bytes of nibbles through `table`: low nibbles are elements
/// 0..16, high nibbles 16..32.
fn spread_nibbles(out: &mut [f32], quants: &[u8], table: &[f32; 16]) {
    let (lo, hi) = out.split_at_mut(16);
    for ((l, h), &q) in lo.iter_mut().zip(hi.iter_mut()).zip(quants) {
        *l = table[usize::from(q & 0x0f)];
        *h = table[usize::from(q >> 4)];
    }
}

/// Blocks of 32 five-bit quants: a little-endian u32 of fifth bits at `qh_at` (bit `j` for
/// element `j`), then 16 bytes of nibbles as in [`nibble_blocks`]; `table(block)` gives the
/// element each quant value (0..32) stands for.
fn fifth_bit_blocks(
    data: &[u8],
    out: &mut [f32],
    block_bytes: usize,
    qh_at: usize,
    table: impl Fn(&[u8]) -> [f32; 32],
) {
    for (o, b) in out.chunks_exact_mut(32).zip(data.chunks_exact(block_bytes)) {
        let table = table(b);
        let qh = u32::from_le_bytes([b[qh_at], b[qh_at + 1], b[qh_at + 2], b[qh_at + 3]]);
        let quants = &b[qh_at + 4..qh_at + 20];
        for (j, &q) in quants.iter().enumerate() {
            let low = usize::from(q & 0x0f) | (((qh >> j) & 1) << 4) as usize;
            let high = usize::from(q >> 4) | (((qh >> (j + 16)) & 1) << 4) as usize;
            o[j] = table[low];
            o[j + 16] = table[high];
        }
    }
}

/// IQ4_XS: super-blocks of 256 in 8 sub-blocks of 32, each with a 6-bit scale (`− 32`) whose
/// low 4 bits are nibbles of the 4 bytes at 4 and high 2 bits pairs of the u16 at 2, and IQ4_NL
/// nibbles.
fn iq4_xs(data: &[u8], out: &mut [f32]) {
    for (o, b) in out.chunks_exact_mut(256).zip(data.chunks_exact(136)) {
        let d = f16_at(b, 0);
        let scales_high = u16::from_le_bytes([b[2], b[3]]);
        for (sub, (os, qs)) in o
            .chunks_exact_mut(32)
            .zip(b[8..136].chunks_exact(16))
            .enumerate()
        {
            let low = (b[4 + sub / 2] >> (4 * (sub % 2))) & 0x0f;
            let high = ((scales_high >> (2 * sub)) & 3) as u8;
            let dl = d * (f32::from(low | (high << 4)) - 32.0);
            spread_nibbles(os, qs, &IQ4_VALUES.map(|v| dl * f32::from(v)));
        }
    }
}
