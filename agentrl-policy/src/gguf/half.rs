//! IEEE 754 half-precision floats, as ggml stores its scales and F16 tensors.

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

/// The f16 at byte `at` of a block, as `f32` (0 past the end; callers pass whole blocks).
pub(super) fn f16_at(bytes: &[u8], at: usize) -> f32 {
    match bytes.get(at..at + 2) {
        Some(&[a, b]) => f16_to_f32(u16::from_le_bytes([a, b])),
        _ => 0.0,
    }
}
