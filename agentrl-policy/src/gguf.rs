//! A reader (and, in [`mod@write`], a writer) for GGUF model files (versions 2 and 3), the format
//! of llama.cpp.
//!
//! A GGUF file is, all little-endian: the magic `GGUF`, a `u32` version, a `u64` tensor count, a
//! `u64` metadata count, the metadata key/value pairs (key: `u64` length + UTF-8 bytes; value: `u32`
//! type tag + payload, arrays as element type + `u64` count + elements), the tensor infos (name,
//! `u32` dimension count, `u64` dimensions innermost first, `u32` ggml type, `u64` offset), padding
//! to the alignment (`general.alignment`, default 32), then the tensor data; each tensor's offset
//! is relative to the start of that data section.
//!
//! [`GgufFile::open`] reads the whole file, validates every length against the bytes actually
//! present (a truncated or hostile file gives a [`GgufError`], never a panic or an allocation larger
//! than the file warrants) and keeps the tensor bytes; [`GgufFile::tensor_f32`] dequantises one
//! tensor on demand (see [`GgmlType`] for the supported types).
//!
//! Llama-architecture files store the Q and K projections with rows permuted for llama.cpp's RoPE
//! layout; [`unpermute_llama_qk`] restores the Hugging Face order.

mod dequant;
mod half;
mod kquant;
pub mod write;

pub use dequant::GgmlType;
pub use half::{f16_to_f32, f32_to_f16};
pub use write::{GgufTensorData, encode_gguf, tensors_of, write_gguf};

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The four magic bytes that start every GGUF file.
pub const GGUF_MAGIC: [u8; 4] = *b"GGUF";
/// The alignment of the data section and of every tensor when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// The most dimensions a tensor may have (ggml's limit).
pub const MAX_DIMS: u32 = 4;
/// The deepest nesting of arrays inside metadata values that the reader accepts.
pub const MAX_ARRAY_DEPTH: usize = 8;

/// Errors from reading or decoding a GGUF file; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    /// The file could not be read.
    #[error("{path}: cannot read GGUF file: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The header, metadata or tensor infos are invalid or truncated.
    #[error("{path}: malformed GGUF at byte offset {offset}: {message}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// Byte offset in the file where the problem was found.
        offset: u64,
        /// What is wrong.
        message: String,
    },
    /// A tensor's description or data is invalid, or its type cannot be dequantised.
    #[error("{path}: tensor '{tensor}' (data at byte offset {offset}): {message}")]
    Tensor {
        /// The file.
        path: PathBuf,
        /// The tensor name.
        tensor: String,
        /// Absolute byte offset of the tensor data in the file.
        offset: u64,
        /// What is wrong.
        message: String,
    },
    /// No tensor has the requested name.
    #[error("{path}: no tensor named '{tensor}'")]
    NoSuchTensor {
        /// The file.
        path: PathBuf,
        /// The requested name.
        tensor: String,
    },
    /// A metadata key is absent.
    #[error("{path}: metadata key '{key}' is missing")]
    MissingKey {
        /// The file.
        path: PathBuf,
        /// The key.
        key: String,
    },
    /// A metadata value has a different type than requested.
    #[error("{path}: metadata key '{key}' holds {found}, expected {expected}")]
    WrongType {
        /// The file.
        path: PathBuf,
        /// The key.
        key: String,
        /// The requested type.
        expected: &'static str,
        /// The type actually stored.
        found: String,
    },
    /// Arguments to a helper such as [`unpermute_llama_qk`] do not fit together.
    #[error("invalid shape: {0}")]
    Shape(String),
}

/// Result alias for this module.
pub type Result<T> = std::result::Result<T, GgufError>;

/// A homogeneous metadata array, stored compactly per element type.
#[derive(Debug, Clone, PartialEq)]
pub enum MetaArray {
    /// `u8` elements.
    U8(Vec<u8>),
    /// `i8` elements.
    I8(Vec<i8>),
    /// `u16` elements.
    U16(Vec<u16>),
    /// `i16` elements.
    I16(Vec<i16>),
    /// `u32` elements.
    U32(Vec<u32>),
    /// `i32` elements.
    I32(Vec<i32>),
    /// `f32` elements.
    F32(Vec<f32>),
    /// `bool` elements.
    Bool(Vec<bool>),
    /// String elements.
    String(Vec<String>),
    /// `u64` elements.
    U64(Vec<u64>),
    /// `i64` elements.
    I64(Vec<i64>),
    /// `f64` elements.
    F64(Vec<f64>),
    /// Nested arrays.
    Array(Vec<MetaArray>),
}

impl MetaArray {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            Self::U8(v) => v.len(),
            Self::I8(v) => v.len(),
            Self::U16(v) => v.len(),
            Self::I16(v) => v.len(),
            Self::U32(v) => v.len(),
            Self::I32(v) => v.len(),
            Self::F32(v) => v.len(),
            Self::Bool(v) => v.len(),
            Self::String(v) => v.len(),
            Self::U64(v) => v.len(),
            Self::I64(v) => v.len(),
            Self::F64(v) => v.len(),
            Self::Array(v) => v.len(),
        }
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The element type's name, e.g. `"string"`.
    pub fn elem_type_name(&self) -> &'static str {
        match self {
            Self::U8(_) => "u8",
            Self::I8(_) => "i8",
            Self::U16(_) => "u16",
            Self::I16(_) => "i16",
            Self::U32(_) => "u32",
            Self::I32(_) => "i32",
            Self::F32(_) => "f32",
            Self::Bool(_) => "bool",
            Self::String(_) => "string",
            Self::U64(_) => "u64",
            Self::I64(_) => "i64",
            Self::F64(_) => "f64",
            Self::Array(_) => "array",
        }
    }
}

/// One metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum MetaValue {
    /// Type 0.
    U8(u8),
    /// Type 1.
    I8(i8),
    /// Type 2.
    U16(u16),
    /// Type 3.
    I16(i16),
    /// Type 4.
    U32(u32),
    /// Type 5.
    I32(i32),
    /// Type 6.
    F32(f32),
    /// Type 7.
    Bool(bool),
    /// Type 8.
    String(String),
    /// Type 9.
    Array(MetaArray),
    /// Type 10.
    U64(u64),
    /// Type 11.
    I64(i64),
    /// Type 12.
    F64(f64),
}

impl MetaValue {
    /// A short description of the stored type, e.g. `"u32"` or `"array of string"`.
    pub fn type_name(&self) -> String {
        match self {
            Self::U8(_) => "u8".into(),
            Self::I8(_) => "i8".into(),
            Self::U16(_) => "u16".into(),
            Self::I16(_) => "i16".into(),
            Self::U32(_) => "u32".into(),
            Self::I32(_) => "i32".into(),
            Self::F32(_) => "f32".into(),
            Self::Bool(_) => "bool".into(),
            Self::String(_) => "string".into(),
            Self::Array(a) => format!("array of {}", a.elem_type_name()),
            Self::U64(_) => "u64".into(),
            Self::I64(_) => "i64".into(),
            Self::F64(_) => "f64".into(),
        }
    }

    /// The value as an integer, if it is one of the integer types.
    pub fn as_i128(&self) -> Option<i128> {
        match *self {
            Self::U8(v) => Some(v.into()),
            Self::I8(v) => Some(v.into()),
            Self::U16(v) => Some(v.into()),
            Self::I16(v) => Some(v.into()),
            Self::U32(v) => Some(v.into()),
            Self::I32(v) => Some(v.into()),
            Self::U64(v) => Some(v.into()),
            Self::I64(v) => Some(v.into()),
            _ => None,
        }
    }
}

/// Description of one tensor in the file.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorInfo {
    /// The tensor name, e.g. `blk.0.attn_q.weight`.
    pub name: String,
    /// Dimensions in GGUF order: innermost (contiguous) first, so a row-major `[rows, cols]`
    /// matrix is stored as `[cols, rows]`; see [`TensorInfo::shape`].
    pub dims: Vec<usize>,
    /// The element type.
    pub ggml_type: GgmlType,
    /// Offset of the data relative to the start of the data section.
    pub offset: u64,
    /// Number of elements.
    pub n_elements: usize,
    /// Size of the data in bytes (0 for types that cannot be dequantised).
    pub n_bytes: usize,
}

impl TensorInfo {
    /// Row-major shape (the reverse of [`TensorInfo::dims`]), e.g. `[rows, cols]` for a matrix.
    pub fn shape(&self) -> Vec<usize> {
        self.dims.iter().rev().copied().collect()
    }
}

/// A parsed GGUF file with its tensor data held in memory.
#[derive(Debug, Clone)]
pub struct GgufFile {
    path: PathBuf,
    version: u32,
    metadata: Vec<(String, MetaValue)>,
    meta_index: HashMap<String, usize>,
    tensors: Vec<TensorInfo>,
    tensor_index: HashMap<String, usize>,
    alignment: u64,
    data_offset: u64,
    bytes: Vec<u8>,
}

/// Bounds-checked little-endian reader over the file bytes.
struct Cursor<'a> {
    path: &'a Path,
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn err(&self, offset: usize, message: impl Into<String>) -> GgufError {
        GgufError::Malformed {
            path: self.path.to_path_buf(),
            offset: offset as u64,
            message: message.into(),
        }
    }

    fn remaining(&self) -> usize {
        self.bytes.len().saturating_sub(self.pos)
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.bytes.len());
        match end.and_then(|e| self.bytes.get(self.pos..e)) {
            Some(s) => {
                self.pos += n;
                Ok(s)
            }
            None => Err(self.err(
                self.pos,
                format!(
                    "file truncated: {what} needs {n} bytes, only {} left",
                    self.remaining()
                ),
            )),
        }
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let s = self.take(N, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(s);
        Ok(out)
    }

    fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.array::<1>(what)?[0])
    }
    fn u16(&mut self, what: &str) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }
    fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }
    fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// Reads a `u64` count of items that each need at least `min_size` bytes, rejecting counts
    /// the rest of the file cannot possibly hold (this bounds every allocation by the file size).
    fn count(&mut self, min_size: usize, what: &str) -> Result<usize> {
        let at = self.pos;
        let n = self.u64(what)?;
        let max = self.remaining() / min_size.max(1);
        match usize::try_from(n) {
            Ok(n) if n <= max => Ok(n),
            _ => Err(self.err(
                at,
                format!(
                    "{what} is {n}, but the {} remaining bytes hold at most {max}",
                    self.remaining()
                ),
            )),
        }
    }

    fn string(&mut self, what: &str) -> Result<String> {
        let at = self.pos;
        let len = self.count(1, &format!("length of {what}"))?;
        let raw = self.take(len, what)?;
        String::from_utf8(raw.to_vec())
            .map_err(|e| self.err(at, format!("{what} is not valid UTF-8: {e}")))
    }

    fn value(&mut self, ty: u32, depth: usize, what: &str) -> Result<MetaValue> {
        Ok(match ty {
            0 => MetaValue::U8(self.u8(what)?),
            1 => MetaValue::I8(self.u8(what)? as i8),
            2 => MetaValue::U16(self.u16(what)?),
            3 => MetaValue::I16(self.u16(what)? as i16),
            4 => MetaValue::U32(self.u32(what)?),
            5 => MetaValue::I32(self.u32(what)? as i32),
            6 => MetaValue::F32(f32::from_bits(self.u32(what)?)),
            7 => MetaValue::Bool(self.bool(what)?),
            8 => MetaValue::String(self.string(what)?),
            9 => MetaValue::Array(self.meta_array(depth + 1, what)?),
            10 => MetaValue::U64(self.u64(what)?),
            11 => MetaValue::I64(self.u64(what)? as i64),
            12 => MetaValue::F64(f64::from_bits(self.u64(what)?)),
            other => {
                return Err(self.err(
                    self.pos.saturating_sub(4),
                    format!("{what} has unknown value type {other}"),
                ));
            }
        })
    }

    fn bool(&mut self, what: &str) -> Result<bool> {
        let at = self.pos;
        match self.u8(what)? {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(self.err(at, format!("{what}: bool byte is {b}, expected 0 or 1"))),
        }
    }

    fn meta_array(&mut self, depth: usize, what: &str) -> Result<MetaArray> {
        if depth > MAX_ARRAY_DEPTH {
            return Err(self.err(
                self.pos,
                format!("{what}: arrays nested deeper than {MAX_ARRAY_DEPTH}"),
            ));
        }
        let ty_at = self.pos;
        let ty = self.u32(what)?;
        let min = match ty {
            0 | 1 | 7 => 1,
            2 | 3 => 2,
            4..=6 => 4,
            8 | 10..=12 => 8,
            9 => 12,
            other => {
                return Err(self.err(
                    ty_at,
                    format!("{what}: array has unknown element type {other}"),
                ));
            }
        };
        let n = self.count(min, &format!("element count of {what}"))?;
        macro_rules! fill {
            ($variant:ident, $read:expr) => {{
                let mut v = Vec::with_capacity(n);
                for _ in 0..n {
                    v.push($read);
                }
                MetaArray::$variant(v)
            }};
        }
        Ok(match ty {
            0 => fill!(U8, self.u8(what)?),
            1 => fill!(I8, self.u8(what)? as i8),
            2 => fill!(U16, self.u16(what)?),
            3 => fill!(I16, self.u16(what)? as i16),
            4 => fill!(U32, self.u32(what)?),
            5 => fill!(I32, self.u32(what)? as i32),
            6 => fill!(F32, f32::from_bits(self.u32(what)?)),
            7 => fill!(Bool, self.bool(what)?),
            8 => fill!(String, self.string(what)?),
            10 => fill!(U64, self.u64(what)?),
            11 => fill!(I64, self.u64(what)? as i64),
            12 => fill!(F64, f64::from_bits(self.u64(what)?)),
            _ => fill!(Array, self.meta_array(depth + 1, what)?),
        })
    }
}

impl GgufFile {
    /// Reads and parses the GGUF file at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|source| GgufError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_bytes(bytes, path)
    }

    /// Parses a GGUF file already in memory; `path` is only used in error messages.
    pub fn from_bytes(bytes: Vec<u8>, path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let parsed = parse(&bytes, &path)?;
        Ok(Self { bytes, ..parsed })
    }

    /// The file path given when opening.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The GGUF version (2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The data alignment in bytes.
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// Absolute byte offset of the tensor data section.
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }

    /// All metadata key/value pairs, in file order.
    pub fn metadata(&self) -> &[(String, MetaValue)] {
        &self.metadata
    }

    /// All tensor descriptions, in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// The description of the tensor called `name`, if any.
    pub fn tensor_info(&self, name: &str) -> Option<&TensorInfo> {
        self.tensor_index
            .get(name)
            .and_then(|&i| self.tensors.get(i))
    }

    /// The metadata value under `key`, if any.
    pub fn get(&self, key: &str) -> Option<&MetaValue> {
        self.meta_index
            .get(key)
            .and_then(|&i| self.metadata.get(i))
            .map(|(_, v)| v)
    }

    fn require(&self, key: &str) -> Result<&MetaValue> {
        self.get(key).ok_or_else(|| GgufError::MissingKey {
            path: self.path.clone(),
            key: key.to_string(),
        })
    }

    fn wrong(&self, key: &str, expected: &'static str, found: &MetaValue) -> GgufError {
        GgufError::WrongType {
            path: self.path.clone(),
            key: key.to_string(),
            expected,
            found: found.type_name(),
        }
    }

    /// The string under `key`.
    pub fn get_str(&self, key: &str) -> Result<&str> {
        match self.require(key)? {
            MetaValue::String(s) => Ok(s),
            other => Err(self.wrong(key, "string", other)),
        }
    }

    /// The integer under `key`, of any integer type, if it fits in `u32`.
    pub fn get_u32(&self, key: &str) -> Result<u32> {
        let v = self.require(key)?;
        v.as_i128()
            .and_then(|i| u32::try_from(i).ok())
            .ok_or_else(|| self.wrong(key, "integer in u32 range", v))
    }

    /// The integer under `key`, of any integer type, if it fits in `u64`.
    pub fn get_u64(&self, key: &str) -> Result<u64> {
        let v = self.require(key)?;
        v.as_i128()
            .and_then(|i| u64::try_from(i).ok())
            .ok_or_else(|| self.wrong(key, "integer in u64 range", v))
    }

    /// The integer under `key`, of any integer type, if it fits in `i64`.
    pub fn get_i64(&self, key: &str) -> Result<i64> {
        let v = self.require(key)?;
        v.as_i128()
            .and_then(|i| i64::try_from(i).ok())
            .ok_or_else(|| self.wrong(key, "integer in i64 range", v))
    }

    /// The float under `key` (an `f64` is narrowed to `f32`).
    pub fn get_f32(&self, key: &str) -> Result<f32> {
        match self.require(key)? {
            MetaValue::F32(x) => Ok(*x),
            MetaValue::F64(x) => Ok(*x as f32),
            other => Err(self.wrong(key, "float", other)),
        }
    }

    /// The float under `key` as `f64` (an `f32` is widened).
    pub fn get_f64(&self, key: &str) -> Result<f64> {
        match self.require(key)? {
            MetaValue::F32(x) => Ok(f64::from(*x)),
            MetaValue::F64(x) => Ok(*x),
            other => Err(self.wrong(key, "float", other)),
        }
    }

    /// The bool under `key`.
    pub fn get_bool(&self, key: &str) -> Result<bool> {
        match self.require(key)? {
            MetaValue::Bool(b) => Ok(*b),
            other => Err(self.wrong(key, "bool", other)),
        }
    }

    /// The array under `key`, of any element type.
    pub fn get_array(&self, key: &str) -> Result<&MetaArray> {
        match self.require(key)? {
            MetaValue::Array(a) => Ok(a),
            other => Err(self.wrong(key, "array", other)),
        }
    }

    /// The array of strings under `key` (e.g. `tokenizer.ggml.tokens`).
    pub fn get_array_str(&self, key: &str) -> Result<&[String]> {
        match self.require(key)? {
            MetaValue::Array(MetaArray::String(v)) => Ok(v),
            other => Err(self.wrong(key, "array of string", other)),
        }
    }

    /// The array of `f32` under `key` (e.g. `tokenizer.ggml.scores`).
    pub fn get_array_f32(&self, key: &str) -> Result<&[f32]> {
        match self.require(key)? {
            MetaValue::Array(MetaArray::F32(v)) => Ok(v),
            other => Err(self.wrong(key, "array of f32", other)),
        }
    }

    /// The array of `i32` under `key` (e.g. `tokenizer.ggml.token_type`).
    pub fn get_array_i32(&self, key: &str) -> Result<&[i32]> {
        match self.require(key)? {
            MetaValue::Array(MetaArray::I32(v)) => Ok(v),
            other => Err(self.wrong(key, "array of i32", other)),
        }
    }

    /// The raw bytes of the tensor called `name`.
    pub fn tensor_bytes(&self, name: &str) -> Result<&[u8]> {
        let info = self.find(name)?;
        self.bytes_of(info)
    }

    fn find(&self, name: &str) -> Result<&TensorInfo> {
        self.tensor_info(name)
            .ok_or_else(|| GgufError::NoSuchTensor {
                path: self.path.clone(),
                tensor: name.to_string(),
            })
    }

    fn tensor_err(&self, info: &TensorInfo, message: String) -> GgufError {
        GgufError::Tensor {
            path: self.path.clone(),
            tensor: info.name.clone(),
            offset: self.data_offset.saturating_add(info.offset),
            message,
        }
    }

    fn bytes_of(&self, info: &TensorInfo) -> Result<&[u8]> {
        let start = usize::try_from(self.data_offset.saturating_add(info.offset)).ok();
        start
            .and_then(|s| Some(s..s.checked_add(info.n_bytes)?))
            .and_then(|r| self.bytes.get(r))
            .ok_or_else(|| {
                self.tensor_err(
                    info,
                    format!(
                        "{} bytes of data run past the end of the file",
                        info.n_bytes
                    ),
                )
            })
    }

    /// Dequantises the tensor called `name` to `f32`.
    ///
    /// Returns the dimensions in GGUF order (innermost first, as [`TensorInfo::dims`]) and the
    /// values in storage order, which is row-major for the reversed dimensions
    /// ([`TensorInfo::shape`]). Types other than those of [`GgmlType`] give an error naming the
    /// type id.
    pub fn tensor_f32(&self, name: &str) -> Result<(Vec<usize>, Vec<f32>)> {
        let info = self.find(name)?;
        if let GgmlType::Other(id) = info.ggml_type {
            return Err(self.tensor_err(
                info,
                format!(
                    "cannot dequantise ggml type id {id} (supported: {})",
                    GgmlType::DEQUANTISABLE.map(|t| t.to_string()).join(", ")
                ),
            ));
        }
        let data = self.bytes_of(info)?;
        let mut out = vec![0f32; info.n_elements];
        dequant::dequantize_into(info.ggml_type, data, &mut out);
        Ok((info.dims.clone(), out))
    }
}

fn align_up(x: u64, align: u64) -> Option<u64> {
    x.checked_add(align - 1).map(|v| v / align * align)
}

fn parse(bytes: &[u8], path: &Path) -> Result<GgufFile> {
    let mut c = Cursor {
        path,
        bytes,
        pos: 0,
    };
    let magic = c.array::<4>("magic")?;
    if magic != GGUF_MAGIC {
        return Err(c.err(
            0,
            format!("bad magic {magic:02x?}, expected \"GGUF\" (not a GGUF file)"),
        ));
    }
    let version = c.u32("version")?;
    if !(2..=3).contains(&version) {
        return Err(c.err(
            4,
            format!("unsupported GGUF version {version} (this reader handles 2 and 3)"),
        ));
    }
    // Minimum encoded sizes: tensor info = name length + n_dims + type + offset; kv = key length +
    // type + 1-byte value.
    let n_tensors = c.count(8 + 4 + 4 + 8, "tensor count")?;
    let n_kv = c.count(8 + 4 + 1, "metadata count")?;

    let mut metadata = Vec::with_capacity(n_kv);
    let mut meta_index = HashMap::with_capacity(n_kv);
    for i in 0..n_kv {
        let key_at = c.pos;
        let key = c.string(&format!("metadata key #{i}"))?;
        let ty = c.u32(&format!("type of metadata '{key}'"))?;
        let value = c.value(ty, 0, &format!("metadata '{key}'"))?;
        if meta_index.insert(key.clone(), metadata.len()).is_some() {
            return Err(c.err(key_at, format!("duplicate metadata key '{key}'")));
        }
        metadata.push((key, value));
    }

    let alignment = match meta_index
        .get("general.alignment")
        .and_then(|&i| metadata.get(i))
    {
        None => DEFAULT_ALIGNMENT,
        Some((_, MetaValue::U32(a))) if a.is_power_of_two() => u64::from(*a),
        Some((_, v)) => {
            return Err(c.err(
                0,
                format!("general.alignment must be a u32 power of two, found {v:?}"),
            ));
        }
    };

    let mut infos = Vec::with_capacity(n_tensors);
    let mut tensor_index = HashMap::with_capacity(n_tensors);
    for i in 0..n_tensors {
        let at = c.pos;
        let name = c.string(&format!("name of tensor #{i}"))?;
        let n_dims = c.u32(&format!("dimension count of tensor '{name}'"))?;
        if n_dims > MAX_DIMS {
            return Err(c.err(
                at,
                format!("tensor '{name}' has {n_dims} dimensions (at most {MAX_DIMS})"),
            ));
        }
        let mut dims = Vec::with_capacity(n_dims as usize);
        let mut n_elements: usize = 1;
        for _ in 0..n_dims {
            let d_at = c.pos;
            let d = c.u64(&format!("dimensions of tensor '{name}'"))?;
            let d = usize::try_from(d).ok();
            match d.and_then(|d| Some((d, n_elements.checked_mul(d)?))) {
                Some((d, n)) => {
                    dims.push(d);
                    n_elements = n;
                }
                None => {
                    return Err(c.err(d_at, format!("tensor '{name}' has an absurd size")));
                }
            }
        }
        let ggml_type = GgmlType::from_id(c.u32(&format!("type of tensor '{name}'"))?);
        let offset = c.u64(&format!("offset of tensor '{name}'"))?;
        if !offset.is_multiple_of(alignment) {
            return Err(c.err(
                at,
                format!(
                    "tensor '{name}' offset {offset} is not a multiple of the alignment {alignment}"
                ),
            ));
        }
        let n_bytes = match (ggml_type.block_len(), ggml_type.block_bytes()) {
            (Some(bl), Some(bb)) => {
                let row = dims.first().copied().unwrap_or(1);
                if !row.is_multiple_of(bl) {
                    return Err(c.err(
                        at,
                        format!("tensor '{name}' ({ggml_type}): innermost dimension {row} is not a multiple of the block size {bl}"),
                    ));
                }
                match (n_elements / bl).checked_mul(bb) {
                    Some(n) => n,
                    None => return Err(c.err(at, format!("tensor '{name}' has an absurd size"))),
                }
            }
            _ => 0,
        };
        if tensor_index.insert(name.clone(), infos.len()).is_some() {
            return Err(c.err(at, format!("duplicate tensor name '{name}'")));
        }
        infos.push(TensorInfo {
            name,
            dims,
            ggml_type,
            offset,
            n_elements,
            n_bytes,
        });
    }

    let data_offset = align_up(c.pos as u64, alignment)
        .filter(|&d| d <= bytes.len() as u64 || infos.is_empty())
        .ok_or_else(|| c.err(c.pos, "file truncated: the tensor data section is missing"))?;
    let data_len = (bytes.len() as u64).saturating_sub(data_offset);
    for info in &infos {
        let end = info.offset.checked_add(info.n_bytes as u64);
        if end.is_none_or(|e| e > data_len) {
            return Err(GgufError::Tensor {
                path: path.to_path_buf(),
                tensor: info.name.clone(),
                offset: data_offset.saturating_add(info.offset),
                message: format!(
                    "file truncated: {} bytes of {} data run past the end of the file ({} bytes)",
                    info.n_bytes,
                    info.ggml_type,
                    bytes.len()
                ),
            });
        }
    }

    Ok(GgufFile {
        path: path.to_path_buf(),
        version,
        metadata,
        meta_index,
        tensors: infos,
        tensor_index,
        alignment,
        data_offset,
        bytes: Vec::new(),
    })
}

/// Undoes llama.cpp's permutation of a Llama Q or K projection matrix (row-major `[rows, cols]`).
///
/// When converting a Hugging Face Llama checkpoint, llama.cpp reorders the rows of each attention
/// head so that RoPE can rotate adjacent pairs: within a head of `d = rows / n_head` rows, the
/// Hugging Face row `s·d/2 + i` (half `s` ∈ {0, 1}, `i` < `d/2`) is stored at row `2·i + s`. This
/// function restores the Hugging Face order. Pass the number of query heads for `attn_q` and the
/// number of key/value heads for `attn_k`.
pub fn unpermute_llama_qk(
    data: &[f32],
    n_head: usize,
    rows: usize,
    cols: usize,
) -> Result<Vec<f32>> {
    qk_reorder(data, n_head, rows, cols, false)
}

/// The forward permutation that llama.cpp applies (inverse of [`unpermute_llama_qk`]).
pub fn permute_llama_qk(data: &[f32], n_head: usize, rows: usize, cols: usize) -> Result<Vec<f32>> {
    qk_reorder(data, n_head, rows, cols, true)
}

fn qk_reorder(
    data: &[f32],
    n_head: usize,
    rows: usize,
    cols: usize,
    forward: bool,
) -> Result<Vec<f32>> {
    if rows.checked_mul(cols) != Some(data.len()) {
        return Err(GgufError::Shape(format!(
            "{} values do not form a {rows}×{cols} matrix",
            data.len()
        )));
    }
    let pairs = n_head.checked_mul(2).unwrap_or(0);
    if pairs == 0 || !rows.is_multiple_of(pairs) {
        return Err(GgufError::Shape(format!(
            "{rows} rows cannot be split into {n_head} heads of an even size"
        )));
    }
    let head_dim = rows / n_head;
    let half = head_dim / 2;
    let mut out = vec![0f32; data.len()];
    for h in 0..n_head {
        for s in 0..2 {
            for i in 0..half {
                let hf = h * head_dim + s * half + i;
                let gg = h * head_dim + 2 * i + s;
                let (dst, src) = if forward { (gg, hf) } else { (hf, gg) };
                out[dst * cols..(dst + 1) * cols]
                    .copy_from_slice(&data[src * cols..(src + 1) * cols]);
            }
        }
    }
    Ok(out)
}
