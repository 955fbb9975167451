//! A reader for the few parts of Cargo manifests that xtask needs: the keys of a table
//! (`[features]`), a string (`[package] name`) and arrays of strings (`[workspace] members`).
//!
//! It is not a TOML parser: it knows tables (`[a]`, `[a.b]`, `[[bin]]`), `key = value` lines,
//! values that span lines (arrays and inline tables), quoted keys, basic and literal strings and
//! `#` comments. That covers Cargo manifests as people write them.

use std::fs;
use std::path::Path;

use crate::{Failure, Result};

/// One `key = value` entry of a manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    /// The table it belongs to (`features`, `package`, `bin`; empty before the first header).
    table: String,
    /// The key, unquoted.
    key: String,
    /// The raw value text, comments removed, lines of a multi-line value joined by newlines.
    value: String,
}

/// The entries of a Cargo manifest, in file order.
#[derive(Debug, Default)]
pub struct Manifest {
    /// Every `key = value` entry.
    entries: Vec<Entry>,
}

impl Manifest {
    /// Reads and parses the manifest at `path`.
    pub fn read(path: &Path) -> Result<Self> {
        let text = fs::read_to_string(path)
            .map_err(|e| Failure::new(format!("cannot read {}: {e}", path.display())))?;
        Ok(Self::parse(&text))
    }

    /// Parses manifest text.
    pub fn parse(text: &str) -> Self {
        let mut entries = Vec::new();
        let mut table = String::new();
        let mut lines = text.lines();
        while let Some(line) = lines.next() {
            let line = strip_comment(line);
            let trimmed = line.trim();
            if trimmed.is_empty() {
                continue;
            }
            if let Some(header) = table_header(trimmed) {
                table = header;
                continue;
            }
            let Some(eq) = find_unquoted(trimmed, '=') else {
                continue;
            };
            let key = unquote(trimmed[..eq].trim());
            let mut value = trimmed[eq + 1..].trim().to_string();
            while open_brackets(&value) > 0 {
                let Some(next) = lines.next() else { break };
                value.push('\n');
                value.push_str(strip_comment(next).trim());
            }
            entries.push(Entry {
                table: table.clone(),
                key,
                value,
            });
        }
        Self { entries }
    }

    /// The keys of `table`, in file order (for `[[array]]` tables, of all its instances).
    pub fn keys(&self, table: &str) -> Vec<&str> {
        self.entries
            .iter()
            .filter(|e| e.table == table)
            .map(|e| e.key.as_str())
            .collect()
    }

    /// The string value of `key` in `table` (the first one, for `[[array]]` tables).
    pub fn string(&self, table: &str, key: &str) -> Option<String> {
        self.strings(table, key).into_iter().next()
    }

    /// Every string in the values of `key` in `table`: the elements of an array, or one string.
    pub fn strings(&self, table: &str, key: &str) -> Vec<String> {
        self.entries
            .iter()
            .filter(|e| e.table == table && e.key == key)
            .flat_map(|e| string_literals(&e.value))
            .collect()
    }
}

/// The folders of the workspace members, from the root Cargo.toml.
pub fn workspace_members(root: &Path) -> Result<Vec<String>> {
    let manifest = Manifest::read(&root.join("Cargo.toml"))?;
    let members = manifest.strings("workspace", "members");
    if members.is_empty() {
        return Err(Failure::new(
            "the root Cargo.toml lists no [workspace] members",
        ));
    }
    if let Some(glob) = members.iter().find(|m| m.contains('*')) {
        return Err(Failure::new(format!(
            "workspace member `{glob}` is a glob; xtask reads plain member folders only"
        )));
    }
    Ok(members)
}

/// `[name]` or `[[name]]` → `name` (spaces around dots removed); anything else → `None`.
fn table_header(line: &str) -> Option<String> {
    let inner = line
        .strip_prefix("[[")
        .and_then(|s| s.strip_suffix("]]"))
        .or_else(|| line.strip_prefix('[').and_then(|s| s.strip_suffix(']')))?;
    let parts: Vec<String> = inner.split('.').map(|p| unquote(p.trim())).collect();
    Some(parts.join("."))
}

/// The line without a `#` comment (a `#` inside a string is kept).
fn strip_comment(line: &str) -> &str {
    match find_unquoted(line, '#') {
        Some(at) => &line[..at],
        None => line,
    }
}

/// The characters of `text` outside TOML strings, with their byte offsets (quotes and the
/// strings between them are skipped; `\"` does not end a basic string).
fn unquoted_chars(text: &str) -> impl Iterator<Item = (usize, char)> + '_ {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    text.char_indices().filter(move |&(_, c)| match quote {
        Some(q) => {
            if escaped {
                escaped = false;
            } else if c == '\\' && q == '"' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            false
        }
        None if c == '"' || c == '\'' => {
            quote = Some(c);
            false
        }
        None => true,
    })
}

/// Byte offset of the first `wanted` outside a string.
fn find_unquoted(text: &str, wanted: char) -> Option<usize> {
    unquoted_chars(text)
        .find(|&(_, c)| c == wanted)
        .map(|(at, _)| at)
}

/// How many `[`/`{` are still open at the end of `value` (outside strings).
fn open_brackets(value: &str) -> i32 {
    unquoted_chars(value)
        .map(|(_, c)| match c {
            '[' | '{' => 1,
            ']' | '}' => -1,
            _ => 0,
        })
        .sum()
}

/// A key without its quotes: `"a-b"` → `a-b`; a bare key is returned as it is.
fn unquote(key: &str) -> String {
    string_literals(key)
        .into_iter()
        .next()
        .filter(|_| key.starts_with(['"', '\'']))
        .unwrap_or_else(|| key.to_string())
}

/// The contents of every string literal in `value`, escapes of basic strings resolved.
fn string_literals(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c != '"' && c != '\'' {
            continue;
        }
        let mut text = String::new();
        while let Some(d) = chars.next() {
            if d == c {
                break;
            }
            if d == '\\' && c == '"' {
                match chars.next() {
                    Some('n') => text.push('\n'),
                    Some('t') => text.push('\t'),
                    Some(other) => text.push(other),
                    None => break,
                }
            } else {
                text.push(d);
            }
        }
        out.push(text);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MANIFEST: &str = r#"
[package]
name = "demo-crate" # the name
version.workspace = true

[features]
default = [
    "search",   # BM25
    "sql",
]
## doc comment
search = ["dep:tantivy"]
"sql" = []
web-extra = ["dep:reqwest", "tokio/net"]

[dependencies]
tantivy = { version = "0.27", optional = true }

[[bin]]
name = "one"
path = "src/one.rs"

[[bin]]
name = "two"
"#;

    #[test]
    fn reads_feature_keys_across_multi_line_values_and_comments() {
        let manifest = Manifest::parse(MANIFEST);
        assert_eq!(
            manifest.keys("features"),
            ["default", "search", "sql", "web-extra"]
        );
        assert_eq!(manifest.strings("features", "default"), ["search", "sql"]);
        assert_eq!(
            manifest.strings("features", "web-extra"),
            ["dep:reqwest", "tokio/net"]
        );
    }

    #[test]
    fn reads_strings_of_plain_and_array_tables() {
        let manifest = Manifest::parse(MANIFEST);
        assert_eq!(
            manifest.string("package", "name").as_deref(),
            Some("demo-crate")
        );
        assert_eq!(manifest.strings("bin", "name"), ["one", "two"]);
        assert_eq!(manifest.strings("bin", "path"), ["src/one.rs"]);
        assert_eq!(manifest.keys("dependencies"), ["tantivy"]);
        assert!(manifest.keys("lib").is_empty());
    }

    #[test]
    fn keeps_hashes_and_equals_inside_strings() {
        let manifest = Manifest::parse("[a]\nx = \"a#b=c\" # note\n'y' = 'lit\\eral'\n");
        assert_eq!(manifest.string("a", "x").as_deref(), Some("a#b=c"));
        assert_eq!(manifest.string("a", "y").as_deref(), Some("lit\\eral"));
    }

    #[test]
    fn reads_workspace_members() {
        let manifest =
            Manifest::parse("[workspace]\nresolver = \"3\"\nmembers = [\"a\",\n \"b\"]\n");
        assert_eq!(manifest.strings("workspace", "members"), ["a", "b"]);
    }
}
