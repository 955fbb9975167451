//! What one source file says about modules: the `mod x;` files it declares, its inline
//! `mod x { … }` blocks, its `use` declarations, the multi-segment paths in its code
//! (`crate::a::f()`, `super::B`, `child::C`) and the names of the items it defines.
//!
//! Items under `#[cfg(test)]` (the `mod tests` blocks, which may `use super::*`) are skipped:
//! a test importing its parent is no circle between files.

use std::collections::BTreeSet;

use super::lex::{Tok, Token};

/// What a file (index 0) or one of its inline modules says.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ModuleScan {
    /// Path below the file's module: empty for the file itself, `["inner"]` for `mod inner {}`.
    pub inline_path: Vec<String>,
    /// Names of the `mod name;` declarations (modules in files of their own).
    pub declared: Vec<String>,
    /// The `use` declarations, one per imported path.
    pub uses: Vec<UseItem>,
    /// Paths of two or more segments in code, outside `use` declarations.
    pub paths: Vec<PathRef>,
    /// Names of the items defined at module level (fn, struct, enum, trait, type, const, …).
    pub items: BTreeSet<String>,
}

/// One imported path of a `use` declaration (`use a::{b, c::*}` gives two).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UseItem {
    /// The imported path as written (`self` in a group removed: `a::{self}` is `a`).
    pub path: Vec<String>,
    /// Whether it ends in `*`.
    pub glob: bool,
    /// The name it binds in the module (the last segment or the `as` name); none for globs
    /// and `as _`.
    pub binds: Option<String>,
    /// Line of the path's last segment.
    pub line: u32,
}

/// A path in code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathRef {
    /// Its segments (`crate::a::f` is `["crate", "a", "f"]`).
    pub segments: Vec<String>,
    /// Its line.
    pub line: u32,
}

/// Keywords that introduce an item whose name follows.
const ITEM_KEYWORDS: [&str; 8] = [
    "fn", "struct", "enum", "trait", "type", "const", "static", "union",
];

/// Scans the tokens of one file: the file's module first, then its inline modules.
pub fn scan(tokens: &[Token]) -> Vec<ModuleScan> {
    let mut scanner = Scanner {
        tokens,
        modules: vec![ModuleScan::default()],
        scopes: Vec::new(),
    };
    scanner.run();
    scanner.modules
}

/// An open `{`: the module it is in, and whether it is that module's own brace.
#[derive(Debug, Clone, Copy)]
struct Scope {
    /// Index of the enclosing module in `Scanner::modules`.
    module: usize,
    /// Whether this brace opens the inline module itself (items directly in it are
    /// module-level).
    opens_module: bool,
}

/// The state of [`scan`].
struct Scanner<'a> {
    /// The file's tokens.
    tokens: &'a [Token],
    /// What was found so far.
    modules: Vec<ModuleScan>,
    /// The open braces.
    scopes: Vec<Scope>,
}

impl<'a> Scanner<'a> {
    /// The token at `i`, if any.
    fn at(&self, i: usize) -> Option<&'a Token> {
        self.tokens.get(i)
    }

    /// The module the scanner is in.
    fn module(&self) -> usize {
        self.scopes.last().map_or(0, |s| s.module)
    }

    /// Whether the scanner is directly in a module (not in a function body, impl, …).
    fn at_module_level(&self) -> bool {
        self.scopes.last().is_none_or(|s| s.opens_module)
    }

    /// Walks all tokens.
    fn run(&mut self) {
        let mut i = 0;
        let mut test_only = false;
        while let Some(token) = self.at(i) {
            if token.is_punct('#') {
                let (next, is_cfg_test) = self.attribute(i);
                test_only |= is_cfg_test;
                i = next;
                continue;
            }
            if test_only {
                i = self.skip_item(i);
                test_only = false;
                continue;
            }
            match &token.tok {
                Tok::Ident(word) if word == "pub" => {
                    // The visibility (`pub(in crate::a)` included) is no reference.
                    i += 1;
                    if self.at(i).is_some_and(|t| t.is_punct('(')) {
                        i = self.skip_balanced(i);
                    }
                    continue;
                }
                Tok::Ident(word) if word == "mod" => {
                    i = self.module_item(i);
                }
                Tok::Ident(word) if word == "use" => {
                    i = self.use_declaration(i + 1);
                }
                Tok::Ident(word) if word == "macro_rules" => {
                    if let Some(name) = self.at(i + 2).and_then(Token::ident) {
                        let module = self.module();
                        self.modules[module].items.insert(name.to_string());
                    }
                    i += 1;
                }
                Tok::Ident(word) if ITEM_KEYWORDS.contains(&word.as_str()) => {
                    if self.at_module_level()
                        && let Some(name) = self.at(i + 1).and_then(Token::ident)
                        && !matches!(name, "fn" | "unsafe" | "async" | "extern")
                    {
                        let module = self.module();
                        self.modules[module].items.insert(name.to_string());
                    }
                    i += 1;
                }
                Tok::Ident(_) => i = self.code_path(i),
                Tok::PathSep => {
                    // `::std::x`: an absolute path names another crate.
                    i += 1;
                    while self
                        .at(i)
                        .is_some_and(|t| t.ident().is_some() || t.tok == Tok::PathSep)
                    {
                        i += 1;
                    }
                    continue;
                }
                Tok::Punct('{') => {
                    let module = self.module();
                    self.scopes.push(Scope {
                        module,
                        opens_module: false,
                    });
                    i += 1;
                }
                Tok::Punct('}') => {
                    self.scopes.pop();
                    i += 1;
                }
                _ => i += 1,
            }
        }
    }

    /// An attribute starting at `#` (outer or inner): the index after it, and whether it is
    /// exactly `#[cfg(test)]`.
    fn attribute(&self, i: usize) -> (usize, bool) {
        let mut open = i + 1;
        if self.at(open).is_some_and(|t| t.is_punct('!')) {
            open += 1;
        }
        if !self.at(open).is_some_and(|t| t.is_punct('[')) {
            return (i + 1, false);
        }
        let end = self.skip_balanced(open);
        let inner = &self.tokens[open + 1..end.saturating_sub(1).max(open + 1)];
        let is_cfg_test = open == i + 1
            && inner.len() == 4
            && inner[0].is_ident("cfg")
            && inner[1].is_punct('(')
            && inner[2].is_ident("test")
            && inner[3].is_punct(')');
        (end, is_cfg_test)
    }

    /// The index after the bracket group opening at `i` (`(`, `[` or `{`).
    fn skip_balanced(&self, i: usize) -> usize {
        let mut depth = 0usize;
        let mut j = i;
        while let Some(token) = self.at(j) {
            j += 1;
            match token.tok {
                Tok::Punct('(' | '[' | '{') => depth += 1,
                Tok::Punct(')' | ']' | '}') => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        return j;
                    }
                }
                _ => {}
            }
        }
        j
    }

    /// The index after the item starting at `i`: after its `;` or its `{…}` body.
    fn skip_item(&self, i: usize) -> usize {
        let mut depth = 0usize;
        let mut j = i;
        while let Some(token) = self.at(j) {
            j += 1;
            match token.tok {
                Tok::Punct('(' | '[') => depth += 1,
                Tok::Punct(')' | ']') => depth = depth.saturating_sub(1),
                Tok::Punct('{') if depth == 0 => return self.skip_balanced(j - 1),
                Tok::Punct('{') => depth += 1,
                Tok::Punct('}') => {
                    if depth == 0 {
                        // The end of the enclosing block: leave it to the caller.
                        return j - 1;
                    }
                    depth -= 1;
                }
                Tok::Punct(';') if depth == 0 => return j,
                _ => {}
            }
        }
        j
    }

    /// `mod name;` or `mod name {`, at `i` (the `mod`): records it and returns the next index.
    fn module_item(&mut self, i: usize) -> usize {
        let Some(name) = self.at(i + 1).and_then(Token::ident).map(str::to_string) else {
            return i + 1;
        };
        let parent = self.module();
        match self.at(i + 2).map(|t| &t.tok) {
            Some(Tok::Punct(';')) => {
                self.modules[parent].declared.push(name);
                i + 3
            }
            Some(Tok::Punct('{')) => {
                let mut inline_path = self.modules[parent].inline_path.clone();
                inline_path.push(name);
                self.modules.push(ModuleScan {
                    inline_path,
                    ..ModuleScan::default()
                });
                self.scopes.push(Scope {
                    module: self.modules.len() - 1,
                    opens_module: true,
                });
                i + 3
            }
            _ => i + 2,
        }
    }

    /// A `use` declaration whose tree starts at `i`: records its paths and returns the index
    /// after it.
    fn use_declaration(&mut self, i: usize) -> usize {
        let mut found = Vec::new();
        let end = self.use_tree(i, &[], &mut found);
        let module = self.module();
        self.modules[module].uses.extend(found);
        // Only a real `use …;` ends in `;` (`impl Trait + use<'a>` does not).
        if self.at(end).is_some_and(|t| t.is_punct(';')) {
            end + 1
        } else {
            end
        }
    }

    /// One use tree at `i` below `prefix`: `a::b`, `a::b as c`, `a::*`, `a::{…}`.
    fn use_tree(&self, mut i: usize, prefix: &[String], found: &mut Vec<UseItem>) -> usize {
        let mut path = prefix.to_vec();
        if self.at(i).is_some_and(|t| t.tok == Tok::PathSep) {
            i += 1;
        }
        while let Some(token) = self.at(i) {
            match &token.tok {
                Tok::Ident(word) => {
                    let line = token.line;
                    path.push(word.clone());
                    i += 1;
                    if self.at(i).is_some_and(|t| t.tok == Tok::PathSep) {
                        i += 1;
                        continue;
                    }
                    if word == "self" {
                        path.pop();
                    }
                    let mut binds = path.last().cloned();
                    if self.at(i).is_some_and(|t| t.is_ident("as")) {
                        binds = self
                            .at(i + 1)
                            .and_then(Token::ident)
                            .filter(|name| *name != "_")
                            .map(str::to_string);
                        i += 2;
                    }
                    found.push(UseItem {
                        path,
                        glob: false,
                        binds,
                        line,
                    });
                    return i;
                }
                Tok::Punct('*') => {
                    found.push(UseItem {
                        path,
                        glob: true,
                        binds: None,
                        line: token.line,
                    });
                    return i + 1;
                }
                Tok::Punct('{') => {
                    i += 1;
                    while let Some(token) = self.at(i) {
                        if token.is_punct('}') {
                            return i + 1;
                        }
                        if token.is_punct(',') {
                            i += 1;
                            continue;
                        }
                        let next = self.use_tree(i, &path, found);
                        if next == i {
                            return i;
                        }
                        i = next;
                    }
                    return i;
                }
                _ => return i,
            }
        }
        i
    }

    /// A path starting with the identifier at `i`: recorded when it has two or more segments.
    fn code_path(&mut self, i: usize) -> usize {
        let line = self.tokens[i].line;
        let mut segments = Vec::new();
        let mut j = i;
        while let Some(word) = self.at(j).and_then(Token::ident) {
            segments.push(word.to_string());
            j += 1;
            let continues = self.at(j).is_some_and(|t| t.tok == Tok::PathSep)
                && self.at(j + 1).and_then(Token::ident).is_some();
            if !continues {
                break;
            }
            j += 1;
        }
        if segments.len() >= 2 {
            let module = self.module();
            self.modules[module].paths.push(PathRef { segments, line });
        }
        j
    }
}

#[cfg(test)]
mod tests {
    use super::super::lex::tokenize;
    use super::*;

    /// Scans `src`.
    fn scan_src(src: &str) -> Vec<ModuleScan> {
        scan(&tokenize(src))
    }

    /// The uses of a scan as `path[::*] => binds` strings.
    fn uses(scan: &ModuleScan) -> Vec<String> {
        scan.uses
            .iter()
            .map(|u| {
                format!(
                    "{}{} => {}",
                    u.path.join("::"),
                    if u.glob { "::*" } else { "" },
                    u.binds.as_deref().unwrap_or("-")
                )
            })
            .collect()
    }

    #[test]
    fn flattens_use_trees() {
        let scans = scan_src(
            "use crate::{a::{self, B as C}, d::*};\npub(crate) use super::e::F;\nuse x::y as _;",
        );
        assert_eq!(
            uses(&scans[0]),
            [
                "crate::a => a",
                "crate::a::B => C",
                "crate::d::* => -",
                "super::e::F => F",
                "x::y => -"
            ]
        );
    }

    #[test]
    fn finds_declarations_items_and_code_paths() {
        let scans = scan_src(
            "//! doc\nmod a;\npub mod b;\npub(crate) const fn f() -> u8 { crate::a::g(); Vec::<u8>::new(); 0 }\n\
             struct S;\nimpl S { fn method() {} }\nfn h() -> impl Sized + use<> { super::x::Y }\n",
        );
        assert_eq!(scans.len(), 1);
        assert_eq!(scans[0].declared, ["a", "b"]);
        assert_eq!(scans[0].items.iter().collect::<Vec<_>>(), ["S", "f", "h"]);
        let paths: Vec<(String, u32)> = scans[0]
            .paths
            .iter()
            .map(|p| (p.segments.join("::"), p.line))
            .collect();
        assert_eq!(
            paths,
            [
                ("crate::a::g".to_string(), 4),
                ("super::x::Y".to_string(), 7)
            ]
        );
    }

    #[test]
    fn skips_cfg_test_items_but_not_other_cfgs() {
        let scans = scan_src(
            "#[cfg(test)]\nmod tests {\n    use super::*;\n    fn t() { crate::x::y(); }\n}\n\
             #[cfg(test)]\n#[allow(unused)]\nuse crate::helpers::H;\n#[cfg(test)]\nmod more;\n\
             #[cfg(feature = \"tch\")]\nuse crate::tch_only::T;\nfn after() { crate::z::w() }\n",
        );
        assert_eq!(scans.len(), 1);
        assert_eq!(uses(&scans[0]), ["crate::tch_only::T => T"]);
        assert!(scans[0].declared.is_empty());
        assert_eq!(scans[0].paths.len(), 1);
        assert_eq!(scans[0].paths[0].segments, ["crate", "z", "w"]);
    }

    #[test]
    fn inline_modules_get_their_own_scan() {
        let scans = scan_src(
            "fn top() {}\npub(crate) mod inner {\n    use super::top;\n    pub fn f() { deeper::g() }\n    mod deeper { pub fn g() {} }\n}\nfn after() {}\n",
        );
        assert_eq!(scans.len(), 3);
        assert_eq!(scans[0].items.iter().collect::<Vec<_>>(), ["after", "top"]);
        assert_eq!(scans[1].inline_path, ["inner"]);
        assert_eq!(uses(&scans[1]), ["super::top => top"]);
        assert_eq!(scans[1].paths[0].segments, ["deeper", "g"]);
        assert_eq!(scans[2].inline_path, ["inner", "deeper"]);
        assert_eq!(scans[2].items.iter().collect::<Vec<_>>(), ["g"]);
    }
}
