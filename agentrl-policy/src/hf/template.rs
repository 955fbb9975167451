//! Jinja chat templates as Hugging Face writes them in `tokenizer_config.json`.

use std::collections::BTreeMap;
use std::path::Path;

use agentrl_core::{Message, ToolSpec};
use minijinja::value::{Kwargs, Serde};
use minijinja::{Environment, Error, ErrorKind, Value};
use serde_json::Value as Json;

use super::HfError;

const DEFAULT: &str = "default";
/// The tokenizer settings file of a Hugging Face model directory.
pub const TOKENIZER_CONFIG_FILE: &str = "tokenizer_config.json";
/// The chat template file transformers 5 writes beside `tokenizer_config.json`.
pub const TEMPLATE_JINJA_FILE: &str = "chat_template.jinja";
/// The JSON chat template file (`{"chat_template": ...}`) some versions write instead.
pub const TEMPLATE_JSON_FILE: &str = "chat_template.json";
const TOOL_USE: &str = "tool_use";
/// The work one render may do (minijinja fuel: about one unit per instruction and per 64 bytes
/// of data a template creates, so at most ~256 MB). Real templates rendering long conversations
/// use well under 1% of it; a template that loops (nearly) forever or builds huge strings fails
/// with an error instead of hanging or exhausting memory. Nesting is bounded by minijinja's own
/// limits (parser depth 150, runtime recursion 500).
const TEMPLATE_FUEL: u64 = 4_000_000;

/// A compiled chat template plus the special-token strings it refers to.
///
/// Rendering mirrors `transformers`' `apply_chat_template`: blocks are trimmed as with
/// `trim_blocks`/`lstrip_blocks`, Python string and dict methods (`strip`, `startswith`,
/// `items`, ...) work, `tojson` writes JSON as Python's `json.dumps` does (`", "` and `": "`
/// separators, no HTML escaping, `indent=` supported), `raise_exception(msg)` fails the render
/// with `msg` and `strftime_now(fmt)` formats the current UTC time. Messages are passed as
/// their OpenAI JSON values, except that a missing `content` becomes `""` (most templates do
/// string operations on it); tool-call arguments stay JSON strings, which templates of the
/// Hermes/Qwen family print as they are.
pub struct ChatTemplate {
    env: Environment<'static>,
    has_tool_use: bool,
    bos_token: String,
    eos_token: String,
    extra: serde_json::Map<String, Json>,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("has_tool_use", &self.has_tool_use)
            .field("bos_token", &self.bos_token)
            .field("eos_token", &self.eos_token)
            .finish()
    }
}

impl ChatTemplate {
    /// Compiles one template source with the given BOS/EOS strings (may be empty).
    pub fn new(source: &str, bos_token: &str, eos_token: &str) -> Result<Self, HfError> {
        Self::build(source, None, bos_token, eos_token)
    }

    /// Reads the template and BOS/EOS tokens from the text of a `tokenizer_config.json`.
    ///
    /// `chat_template` may be a string or a list of `{"name", "template"}` objects; from a
    /// list, `default` (or the first one) is used, and `tool_use` when tools are given.
    pub fn from_tokenizer_config(json: &str) -> Result<Self, HfError> {
        let config = parse_tokenizer_config(json)?;
        let (bos, eos) = special_tokens(&config);
        match config.get("chat_template") {
            Some(value) => Self::from_template_value(value, &bos, &eos),
            None => Err(HfError::Config("no chat_template".into())),
        }
    }

    /// Compiles a `chat_template` JSON value: a string, or a list of `{"name", "template"}`.
    fn from_template_value(value: &Json, bos: &str, eos: &str) -> Result<Self, HfError> {
        match value {
            Json::String(source) => Self::build(source, None, bos, eos),
            Json::Array(list) => {
                let mut named: Vec<(&str, &str)> = Vec::new();
                for (i, item) in list.iter().enumerate() {
                    let name = item.get("name").and_then(Json::as_str);
                    let source = item.get("template").and_then(Json::as_str);
                    match (name, source) {
                        (Some(n), Some(s)) => named.push((n, s)),
                        _ => {
                            return Err(HfError::Config(format!(
                                "chat_template[{i}] lacks a string `name` or `template`"
                            )));
                        }
                    }
                }
                let default = named
                    .iter()
                    .find(|(n, _)| *n == DEFAULT)
                    .or_else(|| named.first())
                    .map(|(_, s)| *s)
                    .ok_or_else(|| HfError::Config("chat_template is an empty list".into()))?;
                let tool_use = named.iter().find(|(n, _)| *n == TOOL_USE).map(|(_, s)| *s);
                Self::build(default, tool_use, bos, eos)
            }
            _ => Err(HfError::Config(
                "chat_template is neither a string nor a list".into(),
            )),
        }
    }

    /// The chat template of a Hugging Face model directory, with transformers' precedence:
    /// `source_override` (Jinja source given by the user) > `chat_template.jinja` >
    /// `chat_template.json` (`{"chat_template": ...}`) > the `chat_template` field of
    /// `tokenizer_config.json`. BOS/EOS strings come from `tokenizer_config.json`.
    pub fn from_model_dir(dir: &Path, source_override: Option<&str>) -> Result<Self, HfError> {
        let config_path = dir.join(TOKENIZER_CONFIG_FILE);
        let in_file = |e: HfError, path: &Path| HfError::Config(format!("{}: {e}", path.display()));
        let config = parse_tokenizer_config(&read_text(&config_path)?)
            .map_err(|e| in_file(e, &config_path))?;
        let (bos, eos) = special_tokens(&config);
        if let Some(source) = source_override {
            return Self::build(source, None, &bos, &eos);
        }
        let jinja = dir.join(TEMPLATE_JINJA_FILE);
        if jinja.is_file() {
            return Self::build(&read_text(&jinja)?, None, &bos, &eos)
                .map_err(|e| in_file(e, &jinja));
        }
        let json_file = dir.join(TEMPLATE_JSON_FILE);
        if json_file.is_file() {
            let wrapper = parse_tokenizer_config(&read_text(&json_file)?)
                .map_err(|e| in_file(e, &json_file))?;
            let value = wrapper
                .get("chat_template")
                .ok_or_else(|| in_file(HfError::Config("no chat_template".into()), &json_file))?;
            return Self::from_template_value(value, &bos, &eos)
                .map_err(|e| in_file(e, &json_file));
        }
        match config.get("chat_template") {
            Some(value) => {
                Self::from_template_value(value, &bos, &eos).map_err(|e| in_file(e, &config_path))
            }
            None => Err(HfError::Config(format!(
                "{}: no chat_template (and no {TEMPLATE_JINJA_FILE} or {TEMPLATE_JSON_FILE} \
                 beside it)",
                config_path.display()
            ))),
        }
    }

    /// Reads [`ChatTemplate::from_tokenizer_config`] from a file.
    pub fn from_tokenizer_config_file(path: impl AsRef<Path>) -> Result<Self, HfError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| HfError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_tokenizer_config(&text)
            .map_err(|e| HfError::Config(format!("{}: {e}", path.display())))
    }

    fn build(
        default: &str,
        tool_use: Option<&str>,
        bos_token: &str,
        eos_token: &str,
    ) -> Result<Self, HfError> {
        let mut env = Environment::new();
        let syntax = minijinja::syntax::SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .map_err(|e| HfError::Template(describe(&e)))?;
        env.set_syntax(syntax);
        env.set_fuel(Some(TEMPLATE_FUEL));
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_filter("tojson", py_tojson);
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", strftime_now);
        env.add_template_owned(DEFAULT, default.to_string())
            .map_err(|e| HfError::Template(describe(&e)))?;
        if let Some(source) = tool_use {
            env.add_template_owned(TOOL_USE, source.to_string())
                .map_err(|e| HfError::Template(format!("tool_use: {}", describe(&e))))?;
        }
        Ok(ChatTemplate {
            env,
            has_tool_use: tool_use.is_some(),
            bos_token: bos_token.to_string(),
            eos_token: eos_token.to_string(),
            extra: serde_json::Map::new(),
        })
    }

    /// Sets an extra template variable (e.g. `enable_thinking`), passed on every render.
    pub fn set_var(&mut self, name: &str, value: Json) {
        self.extra.insert(name.to_string(), value);
    }

    /// The BOS token string from the config (empty if none).
    pub fn bos_token(&self) -> &str {
        &self.bos_token
    }

    /// The EOS token string from the config (empty if none).
    pub fn eos_token(&self) -> &str {
        &self.eos_token
    }

    /// Renders a conversation; `add_generation_prompt` appends the assistant's header.
    pub fn render(
        &self,
        messages: &[Message],
        tools: &[ToolSpec],
        add_generation_prompt: bool,
    ) -> Result<String, HfError> {
        let messages: Vec<Json> = messages.iter().map(message_json).collect();
        let name = if !tools.is_empty() && self.has_tool_use {
            TOOL_USE
        } else {
            DEFAULT
        };
        let template = self
            .env
            .get_template(name)
            .map_err(|e| HfError::Template(describe(&e)))?;
        let mut ctx: BTreeMap<String, Value> = self
            .extra
            .iter()
            .map(|(k, v)| (k.clone(), Value::from(Serde(v))))
            .collect();
        ctx.insert("messages".into(), Value::from(Serde(&messages)));
        // `None` rather than `[]` without tools, as `transformers` passes them.
        let tools = if tools.is_empty() {
            Value::from(())
        } else {
            Value::from(Serde(tools))
        };
        ctx.insert("tools".into(), tools);
        ctx.insert(
            "add_generation_prompt".into(),
            Value::from(add_generation_prompt),
        );
        ctx.insert("bos_token".into(), Value::from(self.bos_token.as_str()));
        ctx.insert("eos_token".into(), Value::from(self.eos_token.as_str()));
        template
            .render(Value::from(ctx))
            .map_err(|e| HfError::Template(describe(&e)))
    }
}

/// A message as the template sees it: OpenAI JSON with `content: ""` instead of `null`.
/// Parses a JSON object file's text (`tokenizer_config.json`, `chat_template.json`).
fn parse_tokenizer_config(json: &str) -> Result<Json, HfError> {
    serde_json::from_str(json).map_err(|e| HfError::Config(format!("not valid JSON: {e}")))
}

/// The BOS and EOS strings of a tokenizer config (plain strings or `{"content": ...}` objects;
/// empty when absent).
fn special_tokens(config: &Json) -> (String, String) {
    let token = |key: &str| -> String {
        match config.get(key) {
            Some(Json::String(s)) => s.clone(),
            Some(Json::Object(o)) => o
                .get("content")
                .and_then(Json::as_str)
                .unwrap_or_default()
                .to_string(),
            _ => String::new(),
        }
    };
    (token("bos_token"), token("eos_token"))
}

/// Reads a text file, the error naming it.
fn read_text(path: &Path) -> Result<String, HfError> {
    std::fs::read_to_string(path).map_err(|source| HfError::Io {
        path: path.display().to_string(),
        source,
    })
}

fn message_json(message: &Message) -> Json {
    let mut value = serde_json::to_value(message).unwrap_or(Json::Null);
    if let Some(obj) = value.as_object_mut()
        && obj.get("content").is_none_or(Json::is_null)
    {
        obj.insert("content".into(), Json::String(String::new()));
    }
    value
}

/// A minijinja error with its chain of causes and, when known, the template line.
fn describe(e: &Error) -> String {
    let mut out = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        out.push_str(&format!(": {s}"));
        source = s.source();
    }
    out
}

fn raise_exception(message: String) -> Result<Value, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, message))
}

/// `tojson` as `transformers` defines it: Python's `json.dumps(x, ensure_ascii=False)`.
fn py_tojson(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let indent: Option<usize> = kwargs.get("indent")?;
    let mut out = Vec::new();
    let result = match indent {
        Some(n) => {
            let pad = vec![b' '; n];
            let formatter = serde_json::ser::PrettyFormatter::with_indent(&pad);
            let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
            serde::Serialize::serialize(value, &mut ser)
        }
        None => {
            let mut ser = serde_json::Serializer::with_formatter(&mut out, PyFormatter);
            serde::Serialize::serialize(value, &mut ser)
        }
    };
    result.map_err(|e| Error::new(ErrorKind::InvalidOperation, format!("tojson: {e}")))?;
    let text = String::from_utf8(out)
        .map_err(|e| Error::new(ErrorKind::InvalidOperation, format!("tojson: {e}")))?;
    Ok(Value::from_safe_string(text))
}

/// JSON with Python's default separators `", "` and `": "`.
struct PyFormatter;

impl serde_json::ser::Formatter for PyFormatter {
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            writer.write_all(b", ")
        }
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            writer.write_all(b", ")
        }
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
    ) -> std::io::Result<()> {
        writer.write_all(b": ")
    }
}

/// `strftime_now(fmt)`: the current UTC time; supports `%Y %y %m %d %e %b %B %a %A %H %M %S %j %%`.
fn strftime_now(format: String) -> Result<Value, Error> {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    Ok(Value::from(strftime(&format, secs)))
}

/// Formats a Unix time (UTC) with a subset of C's `strftime`; other `%x` are kept as written.
pub(crate) fn strftime(format: &str, unix_secs: u64) -> String {
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    const DAYS: [&str; 7] = [
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
        "Monday",
        "Tuesday",
        "Wednesday",
    ];
    let days = unix_secs / 86_400;
    let rem = unix_secs % 86_400;
    let (year, month, day) = civil_from_days(days as i64);
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let cumulative = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
    let yday = cumulative[(month - 1) as usize] + day + u32::from(leap && month > 2);
    let month_name = MONTHS[(month - 1) as usize];
    let weekday = DAYS[(days % 7) as usize];
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('Y') => out.push_str(&year.to_string()),
            Some('y') => out.push_str(&format!("{:02}", year.rem_euclid(100))),
            Some('m') => out.push_str(&format!("{month:02}")),
            Some('d') => out.push_str(&format!("{day:02}")),
            Some('e') => out.push_str(&format!("{day:>2}")),
            Some('b') => out.push_str(&month_name[..3]),
            Some('B') => out.push_str(month_name),
            Some('a') => out.push_str(&weekday[..3]),
            Some('A') => out.push_str(weekday),
            Some('H') => out.push_str(&format!("{:02}", rem / 3600)),
            Some('M') => out.push_str(&format!("{:02}", rem % 3600 / 60)),
            Some('S') => out.push_str(&format!("{:02}", rem % 60)),
            Some('j') => out.push_str(&format!("{yday:03}")),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

/// Year, month (1-12) and day (1-31) of a day count since 1970-01-01 (Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::strftime;

    #[test]
    fn strftime_formats_known_dates() {
        assert_eq!(strftime("%d %b %Y", 0), "01 Jan 1970");
        // 2024-02-29 12:34:56 UTC, a Thursday.
        assert_eq!(
            strftime("%Y-%m-%d %H:%M:%S %A %j %%", 1_709_210_096),
            "2024-02-29 12:34:56 Thursday 060 %"
        );
    }
}

#[cfg(test)]
mod dir_tests {
    use super::*;

    /// Writes `files` into a fresh directory and returns it.
    fn model_dir(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("temp dir");
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text).expect("write test file");
        }
        dir
    }

    /// Which template a directory resolves to: the render of one user message.
    fn rendered(dir: &Path, source_override: Option<&str>) -> String {
        let template = ChatTemplate::from_model_dir(dir, source_override).expect("template");
        template
            .render(&[Message::user("x")], &[], false)
            .expect("render")
    }

    const CONFIG_WITH: &str =
        r#"{"bos_token": "<s>", "eos_token": "</s>", "chat_template": "config{{ bos_token }}"}"#;
    const CONFIG_WITHOUT: &str = r#"{"bos_token": "<s>", "eos_token": {"content": "</s>"}}"#;
    const JSON_FILE: &str = r#"{"chat_template": [{"name": "default", "template": "json"},
        {"name": "tool_use", "template": "tools"}]}"#;

    #[test]
    fn precedence_is_override_then_jinja_then_json_then_config() {
        let all = model_dir(&[
            (TOKENIZER_CONFIG_FILE, CONFIG_WITH),
            (TEMPLATE_JINJA_FILE, "jinja{{ eos_token }}"),
            (TEMPLATE_JSON_FILE, JSON_FILE),
        ]);
        assert_eq!(rendered(all.path(), Some("override")), "override");
        assert_eq!(rendered(all.path(), None), "jinja</s>");
        let json = model_dir(&[
            (TOKENIZER_CONFIG_FILE, CONFIG_WITH),
            (TEMPLATE_JSON_FILE, JSON_FILE),
        ]);
        assert_eq!(rendered(json.path(), None), "json");
        let config = model_dir(&[(TOKENIZER_CONFIG_FILE, CONFIG_WITH)]);
        assert_eq!(rendered(config.path(), None), "config<s>");
    }

    #[test]
    fn transformers5_directory_without_config_template_loads() {
        let dir = model_dir(&[
            (TOKENIZER_CONFIG_FILE, CONFIG_WITHOUT),
            (
                TEMPLATE_JINJA_FILE,
                "{{ messages[0].content }}{{ eos_token }}",
            ),
        ]);
        assert_eq!(rendered(dir.path(), None), "x</s>");
    }

    #[test]
    fn override_helps_a_directory_without_any_template() {
        let dir = model_dir(&[(TOKENIZER_CONFIG_FILE, CONFIG_WITHOUT)]);
        let Err(e) = ChatTemplate::from_model_dir(dir.path(), None) else {
            panic!("a directory without a template loaded");
        };
        assert!(e.to_string().contains("no chat_template"), "{e}");
        assert_eq!(rendered(dir.path(), Some("{{ bos_token }}!")), "<s>!");
    }
}
