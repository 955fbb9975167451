//! TensorBoard event files for a run (`[logging] tensorboard = true`), written in pure Rust.
//!
//! An event file is a TFRecord file: each record is its length (u64, little-endian), the
//! masked CRC-32C of those 8 bytes, the data, and the masked CRC-32C of the data. The data is
//! an `Event` protobuf message, hand-encoded here: `wall_time` (field 1, double), `step`
//! (field 2, varint), `file_version` (field 3, string; only in the file's first event) and
//! `summary` (field 5: `Summary { repeated Value value = 1 }` with
//! `Value { string tag = 1; float simple_value = 2 }`).
//!
//! Every record of `metrics.jsonl` becomes one event holding all its numeric fields as
//! scalars (see [`flatten_record`]); the learning curve is also written under `curve/`.
//! One process writes one file per directory (`events.out.tfevents.{secs}.{host}.{pid}`),
//! however many writers it opens there; each record is one `write` of an append-only file,
//! so nothing is buffered when a run is killed.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use agentrl_core::{Error, Result};

/// The `file_version` of the first event of every event file.
pub const FILE_VERSION: &str = "brain.Event:2";

/// The reflected CRC-32C (Castagnoli) polynomial.
const CRC32C_POLY: u32 = 0x82F6_3B78;

/// The byte-at-a-time CRC-32C table, built at compile time.
const CRC32C_TABLE: [u32; 256] = crc32c_table();

/// Builds [`CRC32C_TABLE`].
const fn crc32c_table() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ CRC32C_POLY
            } else {
                crc >> 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
}

/// The CRC-32C (Castagnoli) of `data`.
pub fn crc32c(data: &[u8]) -> u32 {
    !data.iter().fold(!0u32, |crc, &b| {
        CRC32C_TABLE[((crc ^ b as u32) & 0xFF) as usize] ^ (crc >> 8)
    })
}

/// The masked CRC-32C of `data`, as TFRecord stores it.
pub fn masked_crc32c(data: &[u8]) -> u32 {
    // ((crc >> 15) | (crc << 17)) + 0xa282ead8
    crc32c(data).rotate_right(15).wrapping_add(0xA282_EAD8)
}

/// One TFRecord: length, masked CRC of the length, `data`, masked CRC of `data`.
pub fn frame_record(data: &[u8]) -> Vec<u8> {
    let len = (data.len() as u64).to_le_bytes();
    let mut out = Vec::with_capacity(data.len() + 16);
    out.extend_from_slice(&len);
    out.extend_from_slice(&masked_crc32c(&len).to_le_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(&masked_crc32c(data).to_le_bytes());
    out
}

/// Protobuf wire type of varints.
const WIRE_VARINT: u8 = 0;
/// Protobuf wire type of doubles.
const WIRE_FIXED64: u8 = 1;
/// Protobuf wire type of strings and messages.
const WIRE_LEN: u8 = 2;
/// Protobuf wire type of floats.
const WIRE_FIXED32: u8 = 5;

/// Appends `v` as a protobuf varint.
fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7F) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends a field key.
fn put_key(out: &mut Vec<u8>, field: u32, wire: u8) {
    put_varint(out, (u64::from(field) << 3) | u64::from(wire));
}

/// Appends a length-delimited field (string or message).
fn put_bytes(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    put_key(out, field, WIRE_LEN);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// A `Summary.Value` with a `simple_value`.
fn encode_value(tag: &str, value: f32) -> Vec<u8> {
    let mut out = Vec::with_capacity(tag.len() + 8);
    put_bytes(&mut out, 1, tag.as_bytes());
    put_key(&mut out, 2, WIRE_FIXED32);
    out.extend_from_slice(&value.to_le_bytes());
    out
}

/// An `Event` message: `wall_time`, `step`, and the `file_version` or a summary of `scalars`
/// (values narrowed to f32, as TensorBoard stores them).
pub fn encode_event(
    wall_time: f64,
    step: i64,
    file_version: Option<&str>,
    scalars: &[(String, f64)],
) -> Vec<u8> {
    let mut out = Vec::new();
    put_key(&mut out, 1, WIRE_FIXED64);
    out.extend_from_slice(&wall_time.to_le_bytes());
    put_key(&mut out, 2, WIRE_VARINT);
    put_varint(&mut out, step as u64);
    if let Some(version) = file_version {
        put_bytes(&mut out, 3, version.as_bytes());
    }
    if !scalars.is_empty() {
        let mut summary = Vec::new();
        for (tag, value) in scalars {
            put_bytes(&mut summary, 1, &encode_value(tag, *value as f32));
        }
        put_bytes(&mut out, 5, &summary);
    }
    out
}

/// The scalars of one `metrics.jsonl` record, tagged `KIND/KEY` (`eval/LABEL/KEY` for
/// evaluations): numbers and booleans (as 0/1) at any depth, nested objects joined with `/`
/// (`rl_step/per_task/maze/success_rate`); strings, arrays, null, non-finite numbers and the
/// top-level `kind`, `label` and `step` are skipped. The learning curve (`rl_step`'s
/// `reward_mean` and `success_rate`, every evaluation's `success_rate`) is repeated as
/// `curve/reward_mean`, `curve/success_rate` and `curve/eval_success_rate`.
pub fn flatten_record(record: &serde_json::Value) -> Vec<(String, f64)> {
    let Some(fields) = record.as_object() else {
        return Vec::new();
    };
    let kind = record["kind"].as_str().unwrap_or("metrics");
    let prefix = match (kind, record["label"].as_str()) {
        ("eval", Some(label)) => format!("eval/{label}"),
        _ => kind.to_string(),
    };
    let mut out = Vec::new();
    for (key, value) in fields {
        if !matches!(key.as_str(), "kind" | "label" | "step") {
            flatten_into(&format!("{prefix}/{key}"), value, &mut out);
        }
    }
    out.extend(curve_aliases(kind, fields));
    out
}

/// Appends `value` (a number, a boolean or an object of them) as scalars under `tag`.
fn flatten_into(tag: &str, value: &serde_json::Value, out: &mut Vec<(String, f64)>) {
    match value {
        serde_json::Value::Number(n) => {
            if let Some(v) = n.as_f64().filter(|v| v.is_finite()) {
                out.push((tag.to_string(), v));
            }
        }
        serde_json::Value::Bool(b) => out.push((tag.to_string(), f64::from(u8::from(*b)))),
        serde_json::Value::Object(fields) => {
            for (key, inner) in fields {
                flatten_into(&format!("{tag}/{key}"), inner, out);
            }
        }
        _ => {}
    }
}

/// The `curve/` copies of a record's learning-curve scalars.
fn curve_aliases(
    kind: &str,
    fields: &serde_json::Map<String, serde_json::Value>,
) -> Vec<(String, f64)> {
    let pairs: &[(&str, &str)] = match kind {
        "rl_step" => &[
            ("reward_mean", "curve/reward_mean"),
            ("success_rate", "curve/success_rate"),
        ],
        "eval" => &[("success_rate", "curve/eval_success_rate")],
        _ => &[],
    };
    pairs
        .iter()
        .filter_map(|(key, alias)| {
            let v = fields.get(*key)?.as_f64().filter(|v| v.is_finite())?;
            Some((alias.to_string(), v))
        })
        .collect()
}

/// The record's `step` field, when it is a non-negative integer.
pub fn record_step(record: &serde_json::Value) -> Option<i64> {
    record["step"].as_u64().and_then(|s| i64::try_from(s).ok())
}

/// Writes `metrics.jsonl` records as scalar events into a directory's event file.
pub struct EventWriter {
    path: PathBuf,
    file: std::fs::File,
    last_step: i64,
}

impl EventWriter {
    /// Opens this process's event file in `dir` (creating both; a new file starts with the
    /// `file_version` event).
    pub fn open(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io("creating the TensorBoard directory", dir, e))?;
        let (path, fresh) = file_for(dir);
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| Error::io("opening the TensorBoard event file", &path, e))?;
        let mut writer = EventWriter {
            path,
            file,
            last_step: 0,
        };
        if fresh {
            writer.write_event(&encode_event(unix_seconds(), 0, Some(FILE_VERSION), &[]))?;
        }
        Ok(writer)
    }

    /// The event file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes one event with `scalars` at `step`.
    pub fn write_scalars(&mut self, step: i64, scalars: &[(String, f64)]) -> Result<()> {
        self.last_step = step;
        self.write_event(&encode_event(unix_seconds(), step, None, scalars))
    }

    /// Writes one metrics record as one event (see [`flatten_record`]); its step is the
    /// record's `step`, else one more than this writer's previous event's (1 for its first).
    /// Records without scalars write nothing.
    pub fn write_record(&mut self, record: &serde_json::Value) -> Result<()> {
        let scalars = flatten_record(record);
        if scalars.is_empty() {
            return Ok(());
        }
        let step = record_step(record).unwrap_or(self.last_step + 1);
        self.write_scalars(step, &scalars)
    }

    /// Frames `event` and appends it in one write (flushed: the file is unbuffered).
    fn write_event(&mut self, event: &[u8]) -> Result<()> {
        self.file
            .write_all(&frame_record(event))
            .and_then(|_| self.file.flush())
            .map_err(|e| Error::io("writing the TensorBoard event file", &self.path, e))
    }
}

/// The event file of this process in `dir`, and whether it is new (the first writer of the
/// process there names it).
fn file_for(dir: &Path) -> (PathBuf, bool) {
    static FILES: OnceLock<Mutex<HashMap<PathBuf, PathBuf>>> = OnceLock::new();
    let key = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let mut files = FILES
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(path) = files.get(&key).filter(|p| p.exists()) {
        return (path.clone(), false);
    }
    let path = dir.join(file_name());
    files.insert(key, path.clone());
    (path, true)
}

/// `events.out.tfevents.{unix seconds}.{host}.{pid}`.
fn file_name() -> String {
    format!(
        "events.out.tfevents.{}.{}.{}",
        unix_seconds() as u64,
        host_name(),
        std::process::id()
    )
}

/// The machine's name when it is known (letters, digits, `-`, `_` only), else `agentrl`.
fn host_name() -> String {
    let name = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .unwrap_or_default();
    let clean: String = name
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
        .collect();
    if clean.is_empty() {
        "agentrl".to_string()
    } else {
        clean
    }
}

/// Seconds since the Unix epoch.
fn unix_seconds() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn crc32c_matches_the_check_value() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(b""), 0);
        // RFC 3720 B.4: 32 bytes of zeros.
        assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
    }

    #[test]
    fn masked_crc_matches_tensorflows() {
        // Values of TensorFlow's `masked_crc32c` (as the `tensorboard` package computes it).
        assert_eq!(masked_crc32c(b"123456789"), 0xC78A_B0E5);
        assert_eq!(masked_crc32c(&0u64.to_le_bytes()), 0x0798_0329);
        let crc = crc32c(b"123456789");
        assert_eq!(
            masked_crc32c(b"123456789"),
            crc.rotate_right(15).wrapping_add(0xA282_EAD8)
        );
    }

    /// A decoded protobuf field: (number, varint value or raw bytes).
    #[derive(Debug, PartialEq)]
    enum Field {
        Varint(u64),
        Fixed64([u8; 8]),
        Fixed32([u8; 4]),
        Bytes(Vec<u8>),
    }

    fn read_varint(data: &[u8], pos: &mut usize) -> u64 {
        let mut v = 0u64;
        let mut shift = 0;
        loop {
            let b = data[*pos];
            *pos += 1;
            v |= u64::from(b & 0x7F) << shift;
            if b < 0x80 {
                return v;
            }
            shift += 7;
        }
    }

    fn parse_message(data: &[u8]) -> Vec<(u64, Field)> {
        let mut pos = 0;
        let mut out = Vec::new();
        while pos < data.len() {
            let key = read_varint(data, &mut pos);
            let field = match key & 7 {
                0 => Field::Varint(read_varint(data, &mut pos)),
                1 => {
                    let b: [u8; 8] = data[pos..pos + 8].try_into().unwrap();
                    pos += 8;
                    Field::Fixed64(b)
                }
                2 => {
                    let len = read_varint(data, &mut pos) as usize;
                    pos += len;
                    Field::Bytes(data[pos - len..pos].to_vec())
                }
                5 => {
                    let b: [u8; 4] = data[pos..pos + 4].try_into().unwrap();
                    pos += 4;
                    Field::Fixed32(b)
                }
                w => panic!("unexpected wire type {w}"),
            };
            out.push((key >> 3, field));
        }
        out
    }

    /// Splits a TFRecord stream into its data, checking both CRCs of each record.
    fn unframe(mut bytes: &[u8]) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while !bytes.is_empty() {
            let len_bytes = &bytes[..8];
            let len = u64::from_le_bytes(len_bytes.try_into().unwrap()) as usize;
            let len_crc = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
            assert_eq!(len_crc, masked_crc32c(len_bytes));
            let data = &bytes[12..12 + len];
            let data_crc = u32::from_le_bytes(bytes[12 + len..16 + len].try_into().unwrap());
            assert_eq!(data_crc, masked_crc32c(data));
            out.push(data.to_vec());
            bytes = &bytes[16 + len..];
        }
        out
    }

    #[test]
    fn a_record_round_trips() {
        let scalars = vec![
            ("rl_step/loss".to_string(), 0.25),
            ("a/b".to_string(), -3.5),
        ];
        let event = encode_event(1_700_000_000.5, 300, None, &scalars);
        let records = unframe(&frame_record(&event));
        assert_eq!(records, vec![event.clone()]);
        let fields = parse_message(&records[0]);
        assert_eq!(
            fields[0],
            (1, Field::Fixed64(1_700_000_000.5f64.to_le_bytes()))
        );
        assert_eq!(fields[1], (2, Field::Varint(300)));
        let Field::Bytes(summary) = &fields[2].1 else {
            panic!("no summary: {fields:?}")
        };
        assert_eq!(fields[2].0, 5);
        let values = parse_message(summary);
        assert_eq!(values.len(), 2);
        let Field::Bytes(first) = &values[0].1 else {
            panic!("value is not a message")
        };
        assert_eq!(
            parse_message(first),
            vec![
                (1, Field::Bytes(b"rl_step/loss".to_vec())),
                (2, Field::Fixed32(0.25f32.to_le_bytes())),
            ]
        );
    }

    #[test]
    fn the_first_event_has_the_file_version() {
        let event = encode_event(2.0, 0, Some(FILE_VERSION), &[]);
        let fields = parse_message(&event);
        assert_eq!(fields.len(), 3);
        assert_eq!(fields[1], (2, Field::Varint(0)));
        assert_eq!(
            fields[2],
            (3, Field::Bytes(FILE_VERSION.as_bytes().to_vec()))
        );
    }

    #[test]
    fn varints_use_seven_bits_per_byte() {
        let mut out = Vec::new();
        put_varint(&mut out, 300);
        assert_eq!(out, [0xAC, 0x02]);
        let mut pos = 0;
        let mut big = Vec::new();
        put_varint(&mut big, u64::MAX);
        assert_eq!(big.len(), 10);
        assert_eq!(read_varint(&big, &mut pos), u64::MAX);
    }

    fn tags(scalars: &[(String, f64)]) -> Vec<&str> {
        scalars.iter().map(|(t, _)| t.as_str()).collect()
    }

    #[test]
    fn an_rl_step_flattens_with_per_task_nesting() {
        let record = json!({
            "kind": "rl_step", "step": 7, "reward_mean": 0.5, "success_rate": 0.25,
            "note": "text", "list": [1, 2], "missing": null, "dynamic": true,
            "per_task": {"maze": {"success_rate": 1.0, "env": "maze"}},
        });
        let scalars = flatten_record(&record);
        let mut names = tags(&scalars);
        names.sort_unstable();
        assert_eq!(
            names,
            [
                "curve/reward_mean",
                "curve/success_rate",
                "rl_step/dynamic",
                "rl_step/per_task/maze/success_rate",
                "rl_step/reward_mean",
                "rl_step/success_rate",
            ]
        );
        let value = |tag: &str| scalars.iter().find(|(t, _)| t == tag).map(|(_, v)| *v);
        assert_eq!(value("rl_step/dynamic"), Some(1.0));
        assert_eq!(value("rl_step/per_task/maze/success_rate"), Some(1.0));
        assert_eq!(record_step(&record), Some(7));
    }

    #[test]
    fn an_eval_record_is_tagged_with_its_label() {
        let mut record = json!({
            "kind": "eval", "label": "after_rl", "step": 40, "success_rate": 0.75,
            "tool_use_rate": false,
        });
        // serde_json cannot hold NaN; a non-finite value arrives as null.
        record["reward_mean"] = json!(f64::NAN);
        let scalars = flatten_record(&record);
        assert_eq!(
            scalars,
            vec![
                ("eval/after_rl/success_rate".to_string(), 0.75),
                ("eval/after_rl/tool_use_rate".to_string(), 0.0),
                ("curve/eval_success_rate".to_string(), 0.75),
            ]
        );
    }

    #[test]
    fn records_without_kind_or_object_shape() {
        assert_eq!(
            flatten_record(&json!({"loss": 1.5})),
            vec![("metrics/loss".to_string(), 1.5)]
        );
        assert!(flatten_record(&json!([1, 2])).is_empty());
        assert_eq!(record_step(&json!({"step": -1})), None);
    }

    #[test]
    fn a_writer_appends_framed_events_to_one_file_per_directory() {
        let dir = tempfile::tempdir().unwrap();
        let mut first = EventWriter::open(dir.path()).unwrap();
        first
            .write_record(&json!({"kind": "sft_step", "step": 25, "loss": 2.0}))
            .unwrap();
        first
            .write_record(&json!({"kind": "x", "s": "only text"}))
            .unwrap();
        let mut second = EventWriter::open(dir.path()).unwrap();
        assert_eq!(second.path(), first.path());
        second.write_record(&json!({"kind": "x", "v": 1})).unwrap();
        let name = first.path().file_name().unwrap().to_string_lossy();
        assert!(name.starts_with("events.out.tfevents."), "{name}");
        let records = unframe(&std::fs::read(first.path()).unwrap());
        assert_eq!(records.len(), 3, "file version + two events with scalars");
        let steps: Vec<Field> = records
            .iter()
            .map(|r| parse_message(r).remove(1).1)
            .collect();
        assert_eq!(
            steps,
            [Field::Varint(0), Field::Varint(25), Field::Varint(1)]
        );
    }
}
