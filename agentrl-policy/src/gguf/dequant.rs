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
//! | Q4_K | 256 | 144 | f16 `d`, f16 `dmin`, 12 bytes of packed 6-bit scales and mins, 128 bytes of nibbles |
//! | Q6_K | 256 | 210 | 128 bytes low nibbles `ql`, 64 bytes high 2-bit pairs `qh`, 16 × i8 scales, f16 `d` |

use std::fmt;

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
    /// 8-bit blocks of 32 with one f16 scale (id 8).
    Q8_0,
    /// 4-bit super-blocks of 256 with 6-bit sub-block scales and minimums (id 12).
    Q4K,
    /// 6-bit super-blocks of 256 with 8-bit sub-block scales (id 14).
    Q6K,
    /// bfloat16 (id 30).
    BF16,
    /// Any other type id; it can be listed but not dequantised.
    Other(u32),
}

impl GgmlType {
    /// Maps an on-disk type id to a type (`Other` for ids this reader cannot dequantise).
    pub fn from_id(id: u32) -> Self {
        match id {
            0 => Self::F32,
            1 => Self::F16,
            2 => Self::Q4_0,
            3 => Self::Q4_1,
            8 => Self::Q8_0,
            12 => Self::Q4K,
            14 => Self::Q6K,
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
            Self::Q8_0 => 8,
            Self::Q4K => 12,
            Self::Q6K => 14,
            Self::BF16 => 30,
            Self::Other(id) => id,
        }
    }

    /// Elements per block, or `None` for unsupported types.
    pub fn block_len(self) -> Option<usize> {
        match self {
            Self::F32 | Self::F16 | Self::BF16 => Some(1),
            Self::Q4_0 | Self::Q4_1 | Self::Q8_0 => Some(32),
            Self::Q4K | Self::Q6K => Some(256),
            Self::Other(_) => None,
        }
    }

    /// Bytes per block, or `None` for unsupported types.
    pub fn block_bytes(self) -> Option<usize> {
        match self {
            Self::F32 => Some(4),
            Self::F16 | Self::BF16 => Some(2),
            Self::Q4_0 => Some(18),
            Self::Q4_1 => Some(20),
            Self::Q8_0 => Some(34),
            Self::Q4K => Some(144),
            Self::Q6K => Some(210),
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
            Self::Q8_0 => f.write_str("Q8_0"),
            Self::Q4K => f.write_str("Q4_K"),
            Self::Q6K => f.write_str("Q6_K"),
            Self::BF16 => f.write_str("BF16"),
            Self::Other(id) => write!(f, "ggml type id {id}"),
        }
    }
}

/// Converts IEEE 754 half-precision bits to `f32` (exact, including subnormals, infinities, NaN).
pub fn f16_to_f32(bits: u16) -> f32 {
    let sign = u32::from(bits >> 15) << 31;
    let exp = u32::from((bits >> 10) & 0x1f);
    let mant = u32::from(bits & 0x3ff);
    let out = match (exp, mant) {
        (0, 0) => sign,
        (0, _) => {
            // Subnormal half: value = mant · 2^-24, exactly representable as a normal f32.
            let v = mant as f32 * f32::from_bits(0x3380_0000); // 2^-24
            return if sign != 0 { -v } else { v };
        }
        (0x1f, 0) => sign | 0x7f80_0000,
        (0x1f, _) => sign | 0x7fc0_0000 | (mant << 13),
        _ => sign | ((exp + 112) << 23) | (mant << 13),
    };
    f32::from_bits(out)
}

/// Converts `f32` to IEEE 754 half-precision bits, rounding to nearest even (for writers and tests).
pub fn f32_to_f16(value: f32) -> u16 {
    let bits = value.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exp = ((bits >> 23) & 0xff) as i32;
    let mant = bits & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if mant != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        // Subnormal half: shift the full mantissa (with its implicit bit) into place.
        let m = mant | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = m >> shift;
        let rem = m & ((1 << shift) - 1);
        let halfway = 1 << (shift - 1);
        let round = rem > halfway || (rem == halfway && half & 1 == 1);
        return sign | (half + u32::from(round)) as u16;
    }
    let half = ((e as u32) << 10) | (mant >> 13);
    let rem = mant & 0x1fff;
    let round = rem > 0x1000 || (rem == 0x1000 && half & 1 == 1);
    // A carry out of the mantissa correctly bumps the exponent (up to infinity).
    sign | (half + u32::from(round)) as u16
}

fn f16_at(bytes: &[u8], at: usize) -> f32 {
    match bytes.get(at..at + 2) {
        Some(&[a, b]) => f16_to_f32(u16::from_le_bytes([a, b])),
        _ => 0.0,
    }
}

/// The 6-bit scale and minimum of sub-block `j` (0..8) from the 12 packed Q4_K scale bytes.
fn q4k_scale_min(j: usize, s: &[u8; 12]) -> (u8, u8) {
    if j < 4 {
        (s[j] & 63, s[j + 4] & 63)
    } else {
        (
            (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4),
            (s[j + 4] >> 4) | ((s[j] >> 6) << 4),
        )
    }
}

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
        GgmlType::Q4_0 => {
            for (o, b) in out.chunks_exact_mut(32).zip(data.chunks_exact(18)) {
                let d = f16_at(b, 0);
                let (lo, hi) = o.split_at_mut(16);
                for ((l, h), &q) in lo.iter_mut().zip(hi.iter_mut()).zip(&b[2..18]) {
                    *l = d * (f32::from(q & 0x0f) - 8.0);
                    *h = d * (f32::from(q >> 4) - 8.0);
                }
            }
        }
        GgmlType::Q4_1 => {
            for (o, b) in out.chunks_exact_mut(32).zip(data.chunks_exact(20)) {
                let d = f16_at(b, 0);
                let m = f16_at(b, 2);
                let (lo, hi) = o.split_at_mut(16);
                for ((l, h), &q) in lo.iter_mut().zip(hi.iter_mut()).zip(&b[4..20]) {
                    *l = d * f32::from(q & 0x0f) + m;
                    *h = d * f32::from(q >> 4) + m;
                }
            }
        }
        GgmlType::Q4K => {
            for (o, b) in out.chunks_exact_mut(256).zip(data.chunks_exact(144)) {
                let d = f16_at(b, 0);
                let dmin = f16_at(b, 2);
                let mut scales = [0u8; 12];
                scales.copy_from_slice(&b[4..16]);
                let qs = &b[16..144];
                // Four groups of 64 elements; each uses 32 bytes: low nibbles, then high nibbles.
                for (g, (og, qg)) in o.chunks_exact_mut(64).zip(qs.chunks_exact(32)).enumerate() {
                    let (sc1, m1) = q4k_scale_min(2 * g, &scales);
                    let (sc2, m2) = q4k_scale_min(2 * g + 1, &scales);
                    let (d1, m1) = (d * f32::from(sc1), dmin * f32::from(m1));
                    let (d2, m2) = (d * f32::from(sc2), dmin * f32::from(m2));
                    let (lo, hi) = og.split_at_mut(32);
                    for ((l, h), &q) in lo.iter_mut().zip(hi.iter_mut()).zip(qg) {
                        *l = d1 * f32::from(q & 0x0f) - m1;
                        *h = d2 * f32::from(q >> 4) - m2;
                    }
                }
            }
        }
        GgmlType::Q6K => {
            for (o, b) in out.chunks_exact_mut(256).zip(data.chunks_exact(210)) {
                let (ql, rest) = b.split_at(128);
                let (qh, rest) = rest.split_at(64);
                let (sc, dbytes) = rest.split_at(16);
                let d = f16_at(dbytes, 0);
                // Two halves of 128 elements; each uses 64 bytes of ql, 32 of qh and 8 scales.
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
        GgmlType::Other(_) => {}
    }
}
