//! GGUF reader tests: tiny files written here, quantised with the ggml block layouts, read back.

use agentrl_policy::gguf::{
    GgmlType, GgufError, GgufFile, MetaArray, MetaValue, f16_to_f32, f32_to_f16, permute_llama_qk,
    unpermute_llama_qk,
};

// ---------------------------------------------------------------- writer helpers

fn put_str(buf: &mut Vec<u8>, s: &str) {
    buf.extend_from_slice(&(s.len() as u64).to_le_bytes());
    buf.extend_from_slice(s.as_bytes());
}

/// A metadata value for the test writer: type tag plus encoded payload.
fn encode(v: &MetaValue) -> (u32, Vec<u8>) {
    let mut b = Vec::new();
    let ty = match v {
        MetaValue::U8(x) => {
            b.push(*x);
            0
        }
        MetaValue::I8(x) => {
            b.extend_from_slice(&x.to_le_bytes());
            1
        }
        MetaValue::U16(x) => {
            b.extend_from_slice(&x.to_le_bytes());
            2
        }
        MetaValue::I16(x) => {
            b.extend_from_slice(&x.to_le_bytes());
            3
        }
        MetaValue::U32(x) => {
            b.extend_from_slice(&x.to_le_bytes());
            4
        }
        MetaValue::I32(x) => {
            b.extend_from_slice(&x.to_le_bytes());
            5
        }
        MetaValue::F32(x) => {
            b.extend_from_slice(&x.to_le_bytes());
            6
        }
        MetaValue::Bool(x) => {
            b.push(u8::from(*x));
            7
        }
        MetaValue::String(s) => {
            put_str(&mut b, s);
            8
        }
        MetaValue::U64(x) => {
            b.extend_from_slice(&x.to_le_bytes());
            10
        }
        MetaValue::I64(x) => {
            b.extend_from_slice(&x.to_le_bytes());
            11
        }
        MetaValue::F64(x) => {
            b.extend_from_slice(&x.to_le_bytes());
            12
        }
        MetaValue::Array(a) => {
            let (et, items): (u32, Vec<Vec<u8>>) = match a {
                MetaArray::String(v) => (
                    8,
                    v.iter()
                        .map(|s| encode(&MetaValue::String(s.clone())).1)
                        .collect(),
                ),
                MetaArray::I32(v) => (5, v.iter().map(|x| x.to_le_bytes().to_vec()).collect()),
                MetaArray::F32(v) => (6, v.iter().map(|x| x.to_le_bytes().to_vec()).collect()),
                MetaArray::U8(v) => (0, v.iter().map(|x| vec![*x]).collect()),
                MetaArray::Array(v) => (
                    9,
                    v.iter()
                        .map(|x| encode(&MetaValue::Array(x.clone())).1)
                        .collect(),
                ),
                other => panic!("test writer does not encode {other:?}"),
            };
            b.extend_from_slice(&et.to_le_bytes());
            b.extend_from_slice(&(items.len() as u64).to_le_bytes());
            for it in items {
                b.extend_from_slice(&it);
            }
            9
        }
    };
    (ty, b)
}

struct TestTensor {
    name: &'static str,
    dims: Vec<u64>,
    ty: u32,
    data: Vec<u8>,
}

/// Writes a GGUF v3 file: header, metadata, tensor infos, padding, aligned tensor data.
fn write_gguf(kvs: &[(&str, MetaValue)], tensors: &[TestTensor], align: usize) -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    b.extend_from_slice(&3u32.to_le_bytes());
    b.extend_from_slice(&(tensors.len() as u64).to_le_bytes());
    b.extend_from_slice(&(kvs.len() as u64).to_le_bytes());
    for (k, v) in kvs {
        put_str(&mut b, k);
        let (ty, payload) = encode(v);
        b.extend_from_slice(&ty.to_le_bytes());
        b.extend_from_slice(&payload);
    }
    let mut offset = 0usize;
    let mut offsets = Vec::new();
    for t in tensors {
        put_str(&mut b, t.name);
        b.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
        for d in &t.dims {
            b.extend_from_slice(&d.to_le_bytes());
        }
        b.extend_from_slice(&t.ty.to_le_bytes());
        b.extend_from_slice(&(offset as u64).to_le_bytes());
        offsets.push(offset);
        offset = (offset + t.data.len()).div_ceil(align) * align;
    }
    let start = b.len().div_ceil(align) * align;
    b.resize(start, 0);
    for (t, off) in tensors.iter().zip(offsets) {
        b.resize(start + off, 0);
        b.extend_from_slice(&t.data);
    }
    b
}

fn f16_round(x: f32) -> f32 {
    f16_to_f32(f32_to_f16(x))
}

fn values(n: usize, seed: f32) -> Vec<f32> {
    (0..n)
        .map(|i| ((i as f32 * 0.37 + seed).sin() * 1.7) + (i % 7) as f32 * 0.05)
        .collect()
}

// ---------------------------------------------------------------- quantisers (ggml layouts)

/// Q8_0: f16 scale + 32 i8; returns bytes and the values a correct reader must produce.
fn quant_q8_0(x: &[f32]) -> (Vec<u8>, Vec<f32>) {
    let (mut b, mut e) = (Vec::new(), Vec::new());
    for blk in x.chunks(32) {
        let amax = blk.iter().fold(0f32, |m, v| m.max(v.abs()));
        let d = f16_round(amax / 127.0);
        b.extend_from_slice(&f32_to_f16(d).to_le_bytes());
        for v in blk {
            let q = if d == 0.0 {
                0
            } else {
                (v / d).round().clamp(-127.0, 127.0) as i8
            };
            b.push(q as u8);
            e.push(d * f32::from(q));
        }
    }
    (b, e)
}

/// Q4_0: f16 d + 16 bytes; element i < 16 in the low nibble of byte i, element 16 + i in its high nibble.
fn quant_q4_0(x: &[f32]) -> (Vec<u8>, Vec<f32>) {
    let (mut b, mut e) = (Vec::new(), vec![0f32; x.len()]);
    for (bi, blk) in x.chunks(32).enumerate() {
        let amax = blk.iter().fold(0f32, |m, v| m.max(v.abs()));
        let d = f16_round(amax / 7.0);
        b.extend_from_slice(&f32_to_f16(d).to_le_bytes());
        let q: Vec<u8> = blk
            .iter()
            .map(|v| ((v / d).round() + 8.0).clamp(0.0, 15.0) as u8)
            .collect();
        for i in 0..16 {
            b.push(q[i] | (q[i + 16] << 4));
        }
        for (i, qi) in q.iter().enumerate() {
            e[bi * 32 + i] = (f32::from(*qi) - 8.0) * d;
        }
    }
    (b, e)
}

/// Q4_1: f16 d, f16 m + 16 bytes of nibbles as Q4_0; value q·d + m.
fn quant_q4_1(x: &[f32]) -> (Vec<u8>, Vec<f32>) {
    let (mut b, mut e) = (Vec::new(), vec![0f32; x.len()]);
    for (bi, blk) in x.chunks(32).enumerate() {
        let min = blk.iter().fold(f32::MAX, |m, v| m.min(*v));
        let max = blk.iter().fold(f32::MIN, |m, v| m.max(*v));
        let d = f16_round((max - min) / 15.0);
        let m = f16_round(min);
        b.extend_from_slice(&f32_to_f16(d).to_le_bytes());
        b.extend_from_slice(&f32_to_f16(m).to_le_bytes());
        let q: Vec<u8> = blk
            .iter()
            .map(|v| ((v - m) / d).round().clamp(0.0, 15.0) as u8)
            .collect();
        for i in 0..16 {
            b.push(q[i] | (q[i + 16] << 4));
        }
        for (i, qi) in q.iter().enumerate() {
            e[bi * 32 + i] = f32::from(*qi) * d + m;
        }
    }
    (b, e)
}

/// One Q4_K super-block from chosen d, dmin, 8 six-bit scales/mins and 256 nibbles.
fn block_q4_k(d: f32, dmin: f32, sc: [u8; 8], mn: [u8; 8], q: &[u8; 256]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&f32_to_f16(d).to_le_bytes());
    b.extend_from_slice(&f32_to_f16(dmin).to_le_bytes());
    let mut s = [0u8; 12];
    for j in 0..4 {
        s[j] = (sc[j] & 63) | ((sc[j + 4] >> 4) << 6);
        s[j + 4] = (mn[j] & 63) | ((mn[j + 4] >> 4) << 6);
        s[j + 8] = (sc[j + 4] & 0x0f) | ((mn[j + 4] & 0x0f) << 4);
    }
    b.extend_from_slice(&s);
    // Groups of 64 elements share 32 bytes: first 32 elements in low nibbles, next 32 in high.
    let mut qs = [0u8; 128];
    for (e, &qe) in q.iter().enumerate() {
        let (g, r) = (e / 64, e % 64);
        if r < 32 {
            qs[g * 32 + r] |= qe & 0x0f;
        } else {
            qs[g * 32 + r - 32] |= (qe & 0x0f) << 4;
        }
    }
    b.extend_from_slice(&qs);
    b
}

/// One Q6_K super-block from d, 16 i8 scales and 256 six-bit quants.
fn block_q6_k(d: f32, sc: [i8; 16], q: &[u8; 256]) -> Vec<u8> {
    let mut ql = [0u8; 128];
    let mut qh = [0u8; 64];
    for (e, &qe) in q.iter().enumerate() {
        let (n, r) = (e / 128, e % 128);
        let (k, l) = (r / 32, r % 32);
        let li = n * 64 + l + (k % 2) * 32;
        if k < 2 {
            ql[li] |= qe & 0x0f;
        } else {
            ql[li] |= (qe & 0x0f) << 4;
        }
        qh[n * 32 + l] |= ((qe >> 4) & 3) << (2 * k);
    }
    let mut b = ql.to_vec();
    b.extend_from_slice(&qh);
    b.extend(sc.iter().map(|s| *s as u8));
    b.extend_from_slice(&f32_to_f16(d).to_le_bytes());
    b
}

fn assert_close(got: &[f32], want: &[f32], tol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= tol, "{what}[{i}]: got {g}, want {w}");
    }
}

fn sample_file() -> (Vec<u8>, Vec<f32>) {
    let x = values(64, 0.3);
    let f16: Vec<u8> = x
        .iter()
        .flat_map(|v| f32_to_f16(*v).to_le_bytes())
        .collect();
    let kvs = vec![
        ("general.architecture", MetaValue::String("llama".into())),
        ("llama.block_count", MetaValue::U32(2)),
        ("llama.rope.freq_base", MetaValue::F32(10000.0)),
        ("t.i8", MetaValue::I8(-5)),
        ("t.u8", MetaValue::U8(200)),
        ("t.u16", MetaValue::U16(65000)),
        ("t.i16", MetaValue::I16(-300)),
        ("t.i32", MetaValue::I32(-7)),
        ("t.u64", MetaValue::U64(1 << 40)),
        ("t.i64", MetaValue::I64(-(1 << 40))),
        ("t.f64", MetaValue::F64(0.125)),
        ("t.bool", MetaValue::Bool(true)),
        (
            "tokenizer.ggml.tokens",
            MetaValue::Array(MetaArray::String(vec![
                "<s>".into(),
                "héllo".into(),
                String::new(),
            ])),
        ),
        (
            "t.scores",
            MetaValue::Array(MetaArray::F32(vec![0.5, -1.0])),
        ),
        ("t.types", MetaValue::Array(MetaArray::I32(vec![1, 3, 1]))),
        (
            "t.nested",
            MetaValue::Array(MetaArray::Array(vec![
                MetaArray::U8(vec![1, 2]),
                MetaArray::U8(vec![]),
            ])),
        ),
    ];
    let tensors = vec![
        TestTensor {
            name: "a.f32",
            dims: vec![8, 8],
            ty: 0,
            data: x.iter().flat_map(|v| v.to_le_bytes()).collect(),
        },
        TestTensor {
            name: "a.f16",
            dims: vec![64],
            ty: 1,
            data: f16,
        },
    ];
    (write_gguf(&kvs, &tensors, 32), x)
}

// ---------------------------------------------------------------- tests

#[test]
fn the_library_writer_matches_this_independent_writer_byte_for_byte() {
    let (bytes, _) = sample_file();
    let file = GgufFile::from_bytes(bytes.clone(), "sample.gguf").unwrap();
    let tensors = agentrl_policy::gguf::tensors_of(&file).unwrap();
    let written = agentrl_policy::gguf::encode_gguf(file.metadata(), &tensors).unwrap();
    assert_eq!(written, bytes);
}

#[test]
fn metadata_of_every_type_reads_back() {
    let (bytes, _) = sample_file();
    let g = GgufFile::from_bytes(bytes, "sample.gguf").unwrap();
    assert_eq!(g.version(), 3);
    assert_eq!(g.alignment(), 32);
    assert_eq!(g.data_offset() % 32, 0);
    assert_eq!(g.get_str("general.architecture").unwrap(), "llama");
    assert_eq!(g.get_u32("llama.block_count").unwrap(), 2);
    assert_eq!(g.get_f32("llama.rope.freq_base").unwrap(), 10000.0);
    assert_eq!(g.get("t.i8"), Some(&MetaValue::I8(-5)));
    assert_eq!(g.get_u32("t.u8").unwrap(), 200);
    assert_eq!(g.get_u32("t.u16").unwrap(), 65000);
    assert_eq!(g.get_i64("t.i16").unwrap(), -300);
    assert_eq!(g.get_i64("t.i32").unwrap(), -7);
    assert_eq!(g.get_u64("t.u64").unwrap(), 1 << 40);
    assert_eq!(g.get_i64("t.i64").unwrap(), -(1 << 40));
    assert_eq!(g.get_f64("t.f64").unwrap(), 0.125);
    assert!(g.get_bool("t.bool").unwrap());
    assert_eq!(
        g.get_array_str("tokenizer.ggml.tokens").unwrap(),
        ["<s>", "héllo", ""]
    );
    assert_eq!(g.get_array_f32("t.scores").unwrap(), [0.5, -1.0]);
    assert_eq!(g.get_array_i32("t.types").unwrap(), [1, 3, 1]);
    assert_eq!(g.get_array("t.nested").unwrap().len(), 2);
    assert_eq!(g.metadata().len(), 16);
    // Type mismatches and missing keys are errors naming the key.
    let e = g.get_u32("t.i32").unwrap_err().to_string();
    assert!(e.contains("t.i32") && e.contains("sample.gguf"), "{e}");
    let e = g.get_str("llama.block_count").unwrap_err().to_string();
    assert!(e.contains("u32") && e.contains("string"), "{e}");
    assert!(matches!(
        g.get_str("nope"),
        Err(GgufError::MissingKey { .. })
    ));
}

#[test]
fn f32_and_f16_tensors_read_back() {
    let (bytes, x) = sample_file();
    let g = GgufFile::from_bytes(bytes, "sample.gguf").unwrap();
    assert_eq!(g.tensors().len(), 2);
    let info = g.tensor_info("a.f32").unwrap();
    assert_eq!(info.ggml_type, GgmlType::F32);
    assert_eq!(info.shape(), vec![8, 8]);
    let (dims, v) = g.tensor_f32("a.f32").unwrap();
    assert_eq!(dims, vec![8, 8]);
    assert_eq!(v, x);
    let (dims, v) = g.tensor_f32("a.f16").unwrap();
    assert_eq!(dims, vec![64]);
    let want: Vec<f32> = x.iter().map(|v| f16_round(*v)).collect();
    assert_eq!(v, want);
    assert_close(&v, &x, 2e-3, "f16 vs original");
    assert!(matches!(
        g.tensor_f32("missing"),
        Err(GgufError::NoSuchTensor { .. })
    ));
}

#[test]
fn f16_conversion_is_exact_on_special_values() {
    assert_eq!(f16_to_f32(0x3c00), 1.0);
    assert_eq!(f16_to_f32(0xc000), -2.0);
    assert_eq!(f16_to_f32(0x7bff), 65504.0);
    assert_eq!(f16_to_f32(0x0001), 2f32.powi(-24));
    assert_eq!(f16_to_f32(0x7c00), f32::INFINITY);
    assert!(f16_to_f32(0x7e00).is_nan());
    assert_eq!(f16_to_f32(0x8000).to_bits(), (-0.0f32).to_bits());
    for bits in 0..=u16::MAX {
        let v = f16_to_f32(bits);
        if !v.is_nan() {
            assert_eq!(f32_to_f16(v), bits, "round trip of {bits:#06x}");
        }
    }
}

#[test]
fn q8_0_q4_0_q4_1_and_bf16_dequantise() {
    let x = values(128, 1.1);
    let (q8, e8) = quant_q8_0(&x);
    let (q40, e40) = quant_q4_0(&x);
    let (q41, e41) = quant_q4_1(&x);
    let bf16: Vec<u8> = x
        .iter()
        .flat_map(|v| ((v.to_bits() >> 16) as u16).to_le_bytes())
        .collect();
    let tensors = vec![
        TestTensor {
            name: "q8",
            dims: vec![64, 2],
            ty: 8,
            data: q8,
        },
        TestTensor {
            name: "q40",
            dims: vec![32, 4],
            ty: 2,
            data: q40,
        },
        TestTensor {
            name: "q41",
            dims: vec![128],
            ty: 3,
            data: q41,
        },
        TestTensor {
            name: "bf16",
            dims: vec![128],
            ty: 30,
            data: bf16,
        },
    ];
    let bytes = write_gguf(&[("general.alignment", MetaValue::U32(64))], &tensors, 64);
    let g = GgufFile::from_bytes(bytes, "quant.gguf").unwrap();
    assert_eq!(g.alignment(), 64);
    let (dims, v) = g.tensor_f32("q8").unwrap();
    assert_eq!(dims, vec![64, 2]);
    assert_close(&v, &e8, 1e-6, "q8_0");
    assert_close(&v, &x, 0.02, "q8_0 vs original");
    let (_, v) = g.tensor_f32("q40").unwrap();
    assert_close(&v, &e40, 1e-6, "q4_0");
    assert_close(&v, &x, 0.2, "q4_0 vs original");
    let (_, v) = g.tensor_f32("q41").unwrap();
    assert_close(&v, &e41, 1e-6, "q4_1");
    assert_close(&v, &x, 0.15, "q4_1 vs original");
    let (_, v) = g.tensor_f32("bf16").unwrap();
    assert_close(&v, &x, 0.02, "bf16");

    // Hand-computed Q4_0 block: d = 0.5, byte i = (low i, high 15 - i).
    let mut blk = f32_to_f16(0.5).to_le_bytes().to_vec();
    blk.extend((0..16u8).map(|i| i | ((15 - i) << 4)));
    let g = GgufFile::from_bytes(
        write_gguf(
            &[],
            &[TestTensor {
                name: "h",
                dims: vec![32],
                ty: 2,
                data: blk,
            }],
            32,
        ),
        "hand.gguf",
    )
    .unwrap();
    let (_, v) = g.tensor_f32("h").unwrap();
    assert_eq!(v[0], -4.0); // (0 - 8) * 0.5
    assert_eq!(v[15], 3.5); // (15 - 8) * 0.5
    assert_eq!(v[16], 3.5); // high nibble of byte 0 = 15
    assert_eq!(v[31], -4.0);
}

#[test]
fn q4_k_and_q6_k_dequantise_from_chosen_blocks() {
    let sc = [1u8, 63, 17, 32, 5, 48, 20, 33];
    let mn = [0u8, 7, 63, 16, 31, 2, 50, 9];
    let mut q4 = [0u8; 256];
    for (i, q) in q4.iter_mut().enumerate() {
        *q = ((i * 7 + i / 13) % 16) as u8;
    }
    let (d, dmin) = (0.5f32, 0.25f32);
    let mut q4k = block_q4_k(d, dmin, sc, mn, &q4);
    let want4: Vec<f32> = (0..256)
        .map(|e| d * f32::from(sc[e / 32]) * f32::from(q4[e]) - dmin * f32::from(mn[e / 32]))
        .collect();
    // A second super-block with other values checks block stepping.
    q4k.extend(block_q4_k(0.125, 1.0, mn, sc, &q4));
    let mut want4b = want4.clone();
    want4b.extend(
        (0..256).map(|e| 0.125 * f32::from(mn[e / 32]) * f32::from(q4[e]) - f32::from(sc[e / 32])),
    );

    let s6 = [1i8, -2, 3, 127, -128, 5, 9, -9, 10, 20, -30, 40, 0, 1, 2, 3];
    let mut q6 = [0u8; 256];
    for (i, q) in q6.iter_mut().enumerate() {
        *q = ((i * 11 + i / 5) % 64) as u8;
    }
    let d6 = 0.0625f32;
    let q6k = block_q6_k(d6, s6, &q6);
    let want6: Vec<f32> = (0..256)
        .map(|e| d6 * f32::from(s6[e / 16]) * (f32::from(q6[e]) - 32.0))
        .collect();

    let tensors = vec![
        TestTensor {
            name: "q4k",
            dims: vec![256, 2],
            ty: 12,
            data: q4k,
        },
        TestTensor {
            name: "q6k",
            dims: vec![256],
            ty: 14,
            data: q6k,
        },
    ];
    let g = GgufFile::from_bytes(write_gguf(&[], &tensors, 32), "k.gguf").unwrap();
    let (dims, v) = g.tensor_f32("q4k").unwrap();
    assert_eq!(dims, vec![256, 2]);
    assert_eq!(v, want4b);
    // Spot checks computed by hand: element 0 is sub-block 0 (scale 1, min 0), q = 0.
    assert_eq!(v[0], 0.0);
    // Element 40: sub-block 1 (scale 63, min 7), q = (280 + 3) % 16 = 11 → 0.5·63·11 − 0.25·7.
    assert_eq!(v[40], 0.5 * 63.0 * 11.0 - 1.75);
    let (_, v) = g.tensor_f32("q6k").unwrap();
    assert_eq!(v, want6);
    // Element 200: scale index 12 (= 0) → 0.
    assert_eq!(v[200], 0.0);
    // Element 1: q = 11, scale 1 → 0.0625·(11 − 32).
    assert_eq!(v[1], 0.0625 * -21.0);
}

/// Decodes a hex string (the fixture's block bytes).
fn from_hex(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("fixture hex"))
        .collect()
}

/// `tests/fixtures/ggml_blocks.json` holds 512 elements of every quantised type, with the
/// values llama.cpp's own Python reader (`gguf`) dequantises them to; `ggml_blocks.py` writes
/// it. Each is read back through a GGUF file here, so the layouts are checked against an
/// independent implementation, including the types llama.cpp's `Q*_K_M` files mix in (Q5_0,
/// Q5_1, IQ4_NL for rows that are not a multiple of 256).
#[test]
fn every_type_dequantises_as_the_reference_reader_does() {
    let fixture: serde_json::Value =
        serde_json::from_str(include_str!("fixtures/ggml_blocks.json")).expect("fixture JSON");
    let entries = fixture.as_array().expect("a list of types");
    let mut tested = Vec::new();
    for entry in entries {
        let name = entry["type"].as_str().expect("type");
        let id = entry["id"].as_u64().expect("id") as u32;
        let ty = GgmlType::from_id(id);
        assert_eq!(ty.to_string(), name, "type id {id}");
        let want: Vec<f32> = entry["values"]
            .as_array()
            .expect("values")
            .iter()
            .map(|v| v.as_f64().expect("a number") as f32)
            .collect();
        let tensors = vec![TestTensor {
            name: "t",
            dims: vec![256, 2],
            ty: id,
            data: from_hex(entry["bytes"].as_str().expect("bytes")),
        }];
        let g = GgufFile::from_bytes(write_gguf(&[], &tensors, 32), "blocks.gguf").unwrap();
        let (_, got) = g.tensor_f32("t").unwrap();
        assert_eq!(got.len(), want.len(), "{name}: element count");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-6 * w.abs().max(1.0),
                "{name}[{i}]: got {g}, the reference reader {w}"
            );
        }
        tested.push(ty);
    }
    for ty in GgmlType::DEQUANTISABLE {
        let plain = matches!(ty, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16);
        assert!(
            plain || tested.contains(&ty),
            "{ty} has no reference blocks"
        );
    }
}

#[test]
fn unknown_type_is_a_clear_error() {
    let tensors = vec![TestTensor {
        name: "weird",
        dims: vec![4],
        ty: 99,
        data: vec![],
    }];
    let g = GgufFile::from_bytes(write_gguf(&[], &tensors, 32), "w.gguf").unwrap();
    assert_eq!(
        g.tensor_info("weird").unwrap().ggml_type,
        GgmlType::Other(99)
    );
    let e = g.tensor_f32("weird").unwrap_err().to_string();
    assert!(
        e.contains("99") && e.contains("weird") && e.contains("w.gguf"),
        "{e}"
    );
}

#[test]
fn every_truncation_is_an_error_not_a_panic() {
    let (bytes, _) = sample_file();
    for len in 0..bytes.len() {
        let r = GgufFile::from_bytes(bytes[..len].to_vec(), "cut.gguf");
        let e = r.expect_err("truncated file must not parse").to_string();
        assert!(e.contains("cut.gguf"), "{e}");
    }
    let e = GgufFile::from_bytes(bytes[..10].to_vec(), "cut.gguf")
        .unwrap_err()
        .to_string();
    assert!(e.contains("truncated") && e.contains("offset 8"), "{e}");
    let x = values(64, 0.0);
    let (q8, _) = quant_q8_0(&x);
    let full = write_gguf(
        &[],
        &[TestTensor {
            name: "t",
            dims: vec![64],
            ty: 8,
            data: q8,
        }],
        32,
    );
    let e = GgufFile::from_bytes(full[..full.len() - 1].to_vec(), "d.gguf")
        .unwrap_err()
        .to_string();
    assert!(e.contains("'t'") && e.contains("truncated"), "{e}");
}

#[test]
fn hostile_headers_are_rejected() {
    let (good, _) = sample_file();
    let mut bad = good.clone();
    bad[0] = b'X';
    let e = GgufFile::from_bytes(bad, "m.gguf").unwrap_err().to_string();
    assert!(e.contains("magic"), "{e}");

    let mut bad = good.clone();
    bad[4..8].copy_from_slice(&1u32.to_le_bytes());
    let e = GgufFile::from_bytes(bad, "v.gguf").unwrap_err().to_string();
    assert!(e.contains("version 1"), "{e}");

    let mut bad = good.clone();
    bad[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    let e = GgufFile::from_bytes(bad, "n.gguf").unwrap_err().to_string();
    assert!(e.contains("tensor count") && e.contains("offset 8"), "{e}");

    let mut bad = good.clone();
    bad[16..24].copy_from_slice(&(1u64 << 60).to_le_bytes());
    let e = GgufFile::from_bytes(bad, "k.gguf").unwrap_err().to_string();
    assert!(e.contains("metadata count"), "{e}");

    // The first key's length sits at offset 24.
    let mut bad = good.clone();
    bad[24..32].copy_from_slice(&(u64::MAX - 3).to_le_bytes());
    let e = GgufFile::from_bytes(bad, "s.gguf").unwrap_err().to_string();
    assert!(
        e.contains("length of metadata key #0") && e.contains("offset 24"),
        "{e}"
    );

    // A huge string array count in a tiny file.
    let mut b = b"GGUF".to_vec();
    b.extend_from_slice(&3u32.to_le_bytes());
    b.extend_from_slice(&0u64.to_le_bytes());
    b.extend_from_slice(&1u64.to_le_bytes());
    put_str(&mut b, "arr");
    b.extend_from_slice(&9u32.to_le_bytes());
    b.extend_from_slice(&8u32.to_le_bytes());
    b.extend_from_slice(&(u64::MAX / 2).to_le_bytes());
    let e = GgufFile::from_bytes(b, "a.gguf").unwrap_err().to_string();
    assert!(e.contains("element count of metadata 'arr'"), "{e}");

    // Deeply nested arrays stop at the depth limit instead of overflowing the stack.
    let mut b = b"GGUF".to_vec();
    b.extend_from_slice(&3u32.to_le_bytes());
    b.extend_from_slice(&0u64.to_le_bytes());
    b.extend_from_slice(&1u64.to_le_bytes());
    put_str(&mut b, "deep");
    b.extend_from_slice(&9u32.to_le_bytes());
    for _ in 0..10_000 {
        b.extend_from_slice(&9u32.to_le_bytes());
        b.extend_from_slice(&1u64.to_le_bytes());
    }
    let e = GgufFile::from_bytes(b, "deep.gguf")
        .unwrap_err()
        .to_string();
    assert!(e.contains("nested"), "{e}");

    // Tensor with absurd dimensions: product overflows / exceeds the file.
    let huge = write_gguf(
        &[],
        &[TestTensor {
            name: "big",
            dims: vec![1 << 32, 1 << 32, 1 << 32],
            ty: 0,
            data: vec![],
        }],
        32,
    );
    let e = GgufFile::from_bytes(huge, "big.gguf")
        .unwrap_err()
        .to_string();
    assert!(e.contains("'big'"), "{e}");
    let huge = write_gguf(
        &[],
        &[TestTensor {
            name: "big2",
            dims: vec![1 << 20, 1 << 20],
            ty: 0,
            data: vec![],
        }],
        32,
    );
    let e = GgufFile::from_bytes(huge, "big2.gguf")
        .unwrap_err()
        .to_string();
    assert!(e.contains("'big2'") && e.contains("past the end"), "{e}");

    // Block types need the innermost dimension to be a whole number of blocks.
    let odd = write_gguf(
        &[],
        &[TestTensor {
            name: "odd",
            dims: vec![33],
            ty: 8,
            data: vec![0; 68],
        }],
        32,
    );
    let e = GgufFile::from_bytes(odd, "odd.gguf")
        .unwrap_err()
        .to_string();
    assert!(e.contains("'odd'") && e.contains("block size 32"), "{e}");
}

#[test]
fn open_reads_from_disk_and_names_missing_files() {
    let (bytes, _) = sample_file();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("m.gguf");
    std::fs::write(&p, bytes).unwrap();
    let g = GgufFile::open(&p).unwrap();
    assert_eq!(g.path(), p.as_path());
    assert_eq!(g.tensors().len(), 2);
    let e = GgufFile::open(dir.path().join("nope.gguf"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("nope.gguf"), "{e}");
}

#[test]
fn unpermute_inverts_permute() {
    let (n_head, rows, cols) = (3, 12, 5);
    let m: Vec<f32> = (0..rows * cols).map(|i| i as f32).collect();
    let p = permute_llama_qk(&m, n_head, rows, cols).unwrap();
    assert_ne!(p, m);
    // Head 0 (4 rows): stored rows are HF rows [0, 2, 1, 3].
    assert_eq!(&p[cols..2 * cols], &m[2 * cols..3 * cols]);
    assert_eq!(&p[2 * cols..3 * cols], &m[cols..2 * cols]);
    assert_eq!(unpermute_llama_qk(&p, n_head, rows, cols).unwrap(), m);
    assert_eq!(
        permute_llama_qk(
            &unpermute_llama_qk(&m, n_head, rows, cols).unwrap(),
            n_head,
            rows,
            cols
        )
        .unwrap(),
        m
    );
    assert!(unpermute_llama_qk(&m, 5, rows, cols).is_err());
    assert!(unpermute_llama_qk(&m[1..], n_head, rows, cols).is_err());
    assert!(unpermute_llama_qk(&m, 0, rows, cols).is_err());
}

/// Opt-in: `AGENTRL_SMOLLM2_GGUF=/path/SmolLM2-135M-Instruct.Q4_1.gguf cargo test -p agentrl-policy --test gguf -- --ignored`.
#[test]
#[ignore = "needs the SmolLM2 GGUF file named by AGENTRL_SMOLLM2_GGUF"]
fn smollm2_file_reads() {
    let Ok(path) = std::env::var("AGENTRL_SMOLLM2_GGUF") else {
        eprintln!("AGENTRL_SMOLLM2_GGUF not set; skipping");
        return;
    };
    let g = GgufFile::open(&path).unwrap();
    assert_eq!(g.get_str("general.architecture").unwrap(), "llama");
    assert_eq!(g.get_u32("llama.block_count").unwrap(), 30);
    assert_eq!(g.get_u32("llama.embedding_length").unwrap(), 576);
    assert_eq!(g.get_u32("llama.attention.head_count").unwrap(), 9);
    assert_eq!(g.get_u32("llama.attention.head_count_kv").unwrap(), 3);
    let tokens = g.get_array_str("tokenizer.ggml.tokens").unwrap();
    assert_eq!(tokens.len(), 49152);
    assert_eq!(tokens[1], "<|im_start|>");
    assert_eq!(tokens[2], "<|im_end|>");
    for ty in [GgmlType::Q4_1, GgmlType::Q8_0, GgmlType::F32] {
        let info = g
            .tensors()
            .iter()
            .find(|t| t.ggml_type == ty)
            .unwrap_or_else(|| panic!("no {ty} tensor"));
        let (dims, v) = g.tensor_f32(&info.name).unwrap();
        assert_eq!(v.len(), dims.iter().product::<usize>());
        assert!(v.iter().all(|x| x.is_finite()), "{}", info.name);
        let mean_abs = v.iter().map(|x| x.abs()).sum::<f32>() / v.len() as f32;
        eprintln!("{} {ty} {dims:?} mean |x| = {mean_abs}", info.name);
        assert!(
            mean_abs > 1e-4 && mean_abs < 10.0,
            "{}: {mean_abs}",
            info.name
        );
    }
    let q = g.tensor_f32("blk.0.attn_q.weight").unwrap();
    assert_eq!(q.0, vec![576, 576]);
    let hf = unpermute_llama_qk(&q.1, 9, 576, 576).unwrap();
    assert_eq!(hf.len(), q.1.len());
}
