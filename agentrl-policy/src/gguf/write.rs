//! Writing GGUF v3 files: metadata of every type and tensors already encoded in a ggml type
//! (F32 and F16 built from `f32` values here), so a trained model can be handed to llama.cpp.
//!
//! The layout is the one [`super::GgufFile`] reads: header, metadata, tensor infos, padding to
//! the alignment, then each tensor's data at an aligned offset.

use std::io::Write;
use std::path::Path;

use super::{DEFAULT_ALIGNMENT, GgmlType, GgufError, MetaArray, MetaValue, f32_to_f16};

/// One tensor to write: its name, GGUF dims (innermost first: a row-major `[rows, cols]` matrix
/// is `[cols, rows]`), its ggml type and its encoded bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct GgufTensorData {
    /// Tensor name, e.g. `blk.0.attn_q.weight`.
    pub name: String,
    /// Dimensions, innermost first.
    pub dims: Vec<u64>,
    /// Element type of `data`.
    pub ggml_type: GgmlType,
    /// The encoded elements (blocks for quantised types).
    pub data: Vec<u8>,
}

impl GgufTensorData {
    /// An F32 tensor of row-major `shape` holding `values`.
    pub fn f32(name: impl Into<String>, shape: &[usize], values: &[f32]) -> Self {
        let data = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        Self::encoded(name, shape, GgmlType::F32, data)
    }

    /// An F16 tensor of row-major `shape` holding `values` rounded to half precision.
    pub fn f16(name: impl Into<String>, shape: &[usize], values: &[f32]) -> Self {
        let data = values
            .iter()
            .flat_map(|v| f32_to_f16(*v).to_le_bytes())
            .collect();
        Self::encoded(name, shape, GgmlType::F16, data)
    }

    /// A tensor of row-major `shape` whose `data` is already encoded as `ggml_type`.
    pub fn encoded(
        name: impl Into<String>,
        shape: &[usize],
        ggml_type: GgmlType,
        data: Vec<u8>,
    ) -> Self {
        GgufTensorData {
            name: name.into(),
            dims: shape.iter().rev().map(|&d| d as u64).collect(),
            ggml_type,
            data,
        }
    }

    /// The byte length its dims and type call for, if the type is known.
    fn expected_bytes(&self) -> Option<u64> {
        let elements: u64 = self.dims.iter().product();
        let (len, bytes) = (
            self.ggml_type.block_len()? as u64,
            self.ggml_type.block_bytes()? as u64,
        );
        elements
            .is_multiple_of(len)
            .then_some(elements / len * bytes)
    }
}

/// Encodes a whole GGUF v3 file in memory. A tensor whose byte length does not match its dims
/// and type, or a duplicate tensor name, is an error naming it.
pub fn encode_gguf(
    metadata: &[(String, MetaValue)],
    tensors: &[GgufTensorData],
) -> Result<Vec<u8>, GgufError> {
    encode_for(Path::new("(GGUF in memory)"), metadata, tensors)
}

/// [`encode_gguf`], with errors naming `path`.
fn encode_for(
    path: &Path,
    metadata: &[(String, MetaValue)],
    tensors: &[GgufTensorData],
) -> Result<Vec<u8>, GgufError> {
    let invalid = |tensor: &str, message: String| GgufError::Tensor {
        path: path.to_path_buf(),
        tensor: tensor.to_string(),
        offset: 0,
        message,
    };
    let align = DEFAULT_ALIGNMENT;
    let mut b = super::GGUF_MAGIC.to_vec();
    b.extend_from_slice(&3u32.to_le_bytes());
    b.extend_from_slice(&(tensors.len() as u64).to_le_bytes());
    b.extend_from_slice(&(metadata.len() as u64).to_le_bytes());
    for (key, value) in metadata {
        put_str(&mut b, key);
        b.extend_from_slice(&type_id(value).to_le_bytes());
        put_value(&mut b, value);
    }
    let mut offset = 0u64;
    let mut offsets = Vec::with_capacity(tensors.len());
    let mut seen = std::collections::HashSet::new();
    for t in tensors {
        if !seen.insert(t.name.as_str()) {
            return Err(invalid(&t.name, "the name is written twice".into()));
        }
        match t.expected_bytes() {
            Some(n) if n == t.data.len() as u64 => {}
            Some(n) => {
                return Err(invalid(
                    &t.name,
                    format!(
                        "{} with dims {:?} needs {n} bytes, got {}",
                        t.ggml_type,
                        t.dims,
                        t.data.len()
                    ),
                ));
            }
            None => {
                return Err(invalid(
                    &t.name,
                    format!("cannot size type {} with dims {:?}", t.ggml_type, t.dims),
                ));
            }
        }
        put_str(&mut b, &t.name);
        b.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
        for d in &t.dims {
            b.extend_from_slice(&d.to_le_bytes());
        }
        b.extend_from_slice(&t.ggml_type.id().to_le_bytes());
        b.extend_from_slice(&offset.to_le_bytes());
        offsets.push(offset);
        offset = (offset + t.data.len() as u64).div_ceil(align) * align;
    }
    let start = (b.len() as u64).div_ceil(align) * align;
    b.resize(start as usize, 0);
    for (t, off) in tensors.iter().zip(offsets) {
        b.resize((start + off) as usize, 0);
        b.extend_from_slice(&t.data);
    }
    Ok(b)
}

/// Writes a GGUF v3 file to `path` (through a temporary file renamed into place, so a reader
/// never sees half a file).
pub fn write_gguf(
    path: impl AsRef<Path>,
    metadata: &[(String, MetaValue)],
    tensors: &[GgufTensorData],
) -> Result<(), GgufError> {
    let path = path.as_ref();
    let bytes = encode_for(path, metadata, tensors)?;
    let io = |source: std::io::Error| GgufError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut tmp_name = path.as_os_str().to_owned();
    tmp_name.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp_name);
    let mut file = std::fs::File::create(&tmp).map_err(io)?;
    file.write_all(&bytes).map_err(io)?;
    file.sync_all().map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

fn put_str(b: &mut Vec<u8>, s: &str) {
    b.extend_from_slice(&(s.len() as u64).to_le_bytes());
    b.extend_from_slice(s.as_bytes());
}

/// The GGUF type tag of a value.
fn type_id(value: &MetaValue) -> u32 {
    match value {
        MetaValue::U8(_) => 0,
        MetaValue::I8(_) => 1,
        MetaValue::U16(_) => 2,
        MetaValue::I16(_) => 3,
        MetaValue::U32(_) => 4,
        MetaValue::I32(_) => 5,
        MetaValue::F32(_) => 6,
        MetaValue::Bool(_) => 7,
        MetaValue::String(_) => 8,
        MetaValue::Array(_) => 9,
        MetaValue::U64(_) => 10,
        MetaValue::I64(_) => 11,
        MetaValue::F64(_) => 12,
    }
}

/// The GGUF type tag of an array's elements.
fn element_type_id(array: &MetaArray) -> u32 {
    match array {
        MetaArray::U8(_) => 0,
        MetaArray::I8(_) => 1,
        MetaArray::U16(_) => 2,
        MetaArray::I16(_) => 3,
        MetaArray::U32(_) => 4,
        MetaArray::I32(_) => 5,
        MetaArray::F32(_) => 6,
        MetaArray::Bool(_) => 7,
        MetaArray::String(_) => 8,
        MetaArray::Array(_) => 9,
        MetaArray::U64(_) => 10,
        MetaArray::I64(_) => 11,
        MetaArray::F64(_) => 12,
    }
}

fn put_value(b: &mut Vec<u8>, value: &MetaValue) {
    match value {
        MetaValue::U8(x) => b.push(*x),
        MetaValue::I8(x) => b.extend_from_slice(&x.to_le_bytes()),
        MetaValue::U16(x) => b.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I16(x) => b.extend_from_slice(&x.to_le_bytes()),
        MetaValue::U32(x) => b.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I32(x) => b.extend_from_slice(&x.to_le_bytes()),
        MetaValue::F32(x) => b.extend_from_slice(&x.to_le_bytes()),
        MetaValue::Bool(x) => b.push(u8::from(*x)),
        MetaValue::String(s) => put_str(b, s),
        MetaValue::Array(a) => put_array(b, a),
        MetaValue::U64(x) => b.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I64(x) => b.extend_from_slice(&x.to_le_bytes()),
        MetaValue::F64(x) => b.extend_from_slice(&x.to_le_bytes()),
    }
}

/// An array value: element type, `u64` count, then the elements.
fn put_array(b: &mut Vec<u8>, array: &MetaArray) {
    b.extend_from_slice(&element_type_id(array).to_le_bytes());
    b.extend_from_slice(&(array.len() as u64).to_le_bytes());
    fn each<T>(b: &mut Vec<u8>, items: &[T], put: impl Fn(&mut Vec<u8>, &T)) {
        for item in items {
            put(b, item);
        }
    }
    match array {
        MetaArray::U8(v) => b.extend_from_slice(v),
        MetaArray::I8(v) => each(b, v, |b, x| b.extend_from_slice(&x.to_le_bytes())),
        MetaArray::U16(v) => each(b, v, |b, x| b.extend_from_slice(&x.to_le_bytes())),
        MetaArray::I16(v) => each(b, v, |b, x| b.extend_from_slice(&x.to_le_bytes())),
        MetaArray::U32(v) => each(b, v, |b, x| b.extend_from_slice(&x.to_le_bytes())),
        MetaArray::I32(v) => each(b, v, |b, x| b.extend_from_slice(&x.to_le_bytes())),
        MetaArray::F32(v) => each(b, v, |b, x| b.extend_from_slice(&x.to_le_bytes())),
        MetaArray::Bool(v) => each(b, v, |b, x| b.push(u8::from(*x))),
        MetaArray::String(v) => each(b, v, |b, s| put_str(b, s)),
        MetaArray::U64(v) => each(b, v, |b, x| b.extend_from_slice(&x.to_le_bytes())),
        MetaArray::I64(v) => each(b, v, |b, x| b.extend_from_slice(&x.to_le_bytes())),
        MetaArray::F64(v) => each(b, v, |b, x| b.extend_from_slice(&x.to_le_bytes())),
        MetaArray::Array(v) => each(b, v, put_array),
    }
}

/// Every tensor of `file` as [`GgufTensorData`] (encoded bytes copied), e.g. to write the file
/// again with other metadata.
pub fn tensors_of(file: &super::GgufFile) -> Result<Vec<GgufTensorData>, GgufError> {
    file.tensors()
        .iter()
        .map(|info| {
            Ok(GgufTensorData {
                name: info.name.clone(),
                dims: info.dims.iter().map(|&d| d as u64).collect(),
                ggml_type: info.ggml_type,
                data: file.tensor_bytes(&info.name)?.to_vec(),
            })
        })
        .collect()
}
