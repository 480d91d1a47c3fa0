//! Reading a source file: its tokens, the paths it writes and the modules it declares.

use std::collections::BTreeSet;

/// `text` up to its `#[cfg(test)] mod x { .. }` (taken to run to the end of the file, where
/// this crate keeps its test modules).
pub fn without_tests(text: &str) -> &str {
    let mut from = 0;
    while let Some(at) = text[from..].find("#[cfg(test)]") {
        let attr = from + at;
        let rest = text[attr + "#[cfg(test)]".len()..].trim_start();
        let item = rest.split(['{', ';']).next().unwrap_or("");
        if rest.starts_with("mod ") && rest[item.len()..].starts_with('{') {
            return &text[..attr];
        }
        from = attr + 1;
    }
    text
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    /// `::`
    PathSep,
    Punct(char),
}

/// The tokens of Rust source that matter to paths, each with its line (1-based); comments,
/// strings, characters and numbers are skipped.
fn tokens(code: &str) -> Vec<(Token, usize)> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    // Skips a string body from just after its opening quote, with escapes unless raw.
    let string = |i: &mut usize, line: &mut usize, hashes: Option<usize>| {
        while *i < chars.len() {
            let c = chars[*i];
            *i += 1;
            match c {
                '\n' => *line += 1,
                '\\' if hashes.is_none() => {
                    if chars.get(*i) == Some(&'\n') {
                        *line += 1;
                    }
                    *i += 1;
                }
                '"' => {
                    let n = hashes.unwrap_or(0);
                    if (0..n).all(|k| chars.get(*i + k) == Some(&'#')) {
                        *i += n;
                        return;
                    }
                }
                _ => {}
            }
        }
    };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if chars[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if c == '"' {
            i += 1;
            string(&mut i, &mut line, None);
        } else if c == '\'' {
            // A character literal ('a', '\n', '"') or a lifetime ('a, 'static).
            if next == Some('\\') {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                out.push((Token::Punct('\''), line));
                i += 1;
            }
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let after = chars.get(i).copied();
            if matches!(word.as_str(), "r" | "br") && matches!(after, Some('"' | '#')) {
                let mut hashes = 0;
                while chars.get(i) == Some(&'#') {
                    hashes += 1;
                    i += 1;
                }
                if chars.get(i) == Some(&'"') {
                    i += 1;
                    string(&mut i, &mut line, Some(hashes));
                }
            } else if word == "b" && after == Some('"') {
                i += 1;
                string(&mut i, &mut line, None);
            } else if word == "b" && after == Some('\'') {
                i += 1;
                if chars.get(i + 1) == Some(&'\\') {
                    i += 2;
                }
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else {
                out.push((Token::Ident(word), line));
            }
        } else if c.is_ascii_digit() {
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
        } else if c == ':' && next == Some(':') {
            out.push((Token::PathSep, line));
            i += 2;
        } else {
            out.push((Token::Punct(c), line));
            i += 1;
        }
    }
    out
}

/// A path written in a file.
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    /// Its segments, `crate`, `super` and `self` included.
    pub segments: Vec<String>,
    /// The inline `mod x { .. }` blocks it is written in, outermost first.
    pub inline: Vec<String>,
    pub line: usize,
    /// For a leaf of a `use`, the name it brings into scope; `None` for a glob and for a
    /// path in code.
    pub imports: Option<String>,
}

/// What one file says about modules: the paths it writes and the child modules it declares
/// (`mod x;`).
#[derive(Debug, Default)]
pub struct FileSays {
    pub paths: Vec<Written>,
    pub declares: BTreeSet<String>,
}

/// The paths `code` writes (in `use` trees and in code, two segments or more) and the
/// modules it declares.
pub fn read_file(code: &str) -> FileSays {
    let tokens = tokens(code);
    let mut says = FileSays::default();
    let ident = |at: usize| match tokens.get(at) {
        Some((Token::Ident(name), _)) => Some(name.as_str()),
        _ => None,
    };
    let punct = |at: usize, c: char| tokens.get(at).is_some_and(|(t, _)| *t == Token::Punct(c));
    // Inline modules open around the current token: (name, brace depth inside it).
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0;
    let mut i = 0;
    while i < tokens.len() {
        let starts_path =
            i == 0 || !matches!(tokens[i - 1].0, Token::PathSep | Token::Punct('.' | '\''));
        match &tokens[i].0 {
            Token::Punct('{') => {
                depth += 1;
                i += 1;
            }
            Token::Punct('}') => {
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
                depth -= 1;
                i += 1;
            }
            Token::Ident(word) if word == "mod" && ident(i + 1).is_some() => {
                let name = ident(i + 1).unwrap().to_owned();
                if punct(i + 2, ';') {
                    says.declares.insert(name);
                } else if punct(i + 2, '{') {
                    inline.push((name, depth + 1));
                }
                i += 2;
            }
            Token::Ident(word) if word == "use" && starts_path => {
                let names: Vec<String> = inline.iter().map(|(n, _)| n.clone()).collect();
                i = use_tree(&tokens, i + 1, Vec::new(), &names, &mut says.paths);
            }
            Token::Ident(first) if starts_path => {
                let mut segments = vec![first.clone()];
                let mut line = tokens[i].1;
                i += 1;
                while tokens.get(i).is_some_and(|(t, _)| *t == Token::PathSep) {
                    let Some(name) = ident(i + 1) else { break };
                    segments.push(name.to_owned());
                    line = tokens[i + 1].1;
                    i += 2;
                }
                if segments.len() > 1 {
                    says.paths.push(Written {
                        segments,
                        inline: inline.iter().map(|(n, _)| n.clone()).collect(),
                        line,
                        imports: None,
                    });
                }
            }
            _ => i += 1,
        }
    }
    says
}

/// Reads the use tree at `at` (after `use`, or inside a group) below `prefix`, adding each of
/// its leaves to `out`; returns where it ends.
fn use_tree(
    tokens: &[(Token, usize)],
    mut at: usize,
    prefix: Vec<String>,
    inline: &[String],
    out: &mut Vec<Written>,
) -> usize {
    let mut segments = prefix;
    let mut line = tokens.get(at).map_or(0, |t| t.1);
    if tokens.get(at).is_some_and(|(t, _)| *t == Token::PathSep) {
        at += 1;
    }
    let leaf = |segments: Vec<String>, line, imports, out: &mut Vec<Written>| {
        out.push(Written {
            segments,
            inline: inline.to_vec(),
            line,
            imports,
        })
    };
    loop {
        match tokens.get(at) {
            Some((Token::Ident(name), l)) => {
                segments.push(name.clone());
                line = *l;
                at += 1;
                if tokens.get(at).is_some_and(|(t, _)| *t == Token::PathSep) {
                    at += 1;
                } else {
                    break;
                }
            }
            Some((Token::Punct('{'), _)) => {
                at += 1;
                while let Some((token, _)) = tokens.get(at) {
                    match token {
                        Token::Punct('}') => return at + 1,
                        Token::Punct(',') => at += 1,
                        _ => {
                            let before = at;
                            at = use_tree(tokens, at, segments.clone(), inline, out);
                            at = at.max(before + 1);
                        }
                    }
                }
                return at;
            }
            Some((Token::Punct('*'), l)) => {
                leaf(segments, *l, None, out);
                return at + 1;
            }
            _ => break,
        }
    }
    if segments.last().is_some_and(|s| s == "self") {
        segments.pop();
    }
    let mut name = segments.last().cloned();
    if let Some((Token::Ident(word), _)) = tokens.get(at) {
        if word == "as" {
            if let Some((Token::Ident(alias), _)) = tokens.get(at + 1) {
                name = Some(alias.clone());
            }
            at += 2;
        }
    }
    if !segments.is_empty() {
        leaf(segments, line, name, out);
    }
    at
}

#[test]
fn the_reader_sees_paths_groups_and_aliases_and_skips_comments_strings_and_tests() {
    let text = "use crate::a::B;\n// crate::commented\nfn f() { crate::c::d(); x.y::<T>(); }\n\
                use crate::{e, f::{g, h as k, self}, i::*};\nmod child;\n\
                fn g() { child::run(); let s = r#\"crate::in_string\"#; let c = '\"'; }\n\
                #[cfg(test)]\nmod tests {\n use crate::tested;\n}\n";
    let says = read_file(without_tests(text));
    let paths: Vec<(String, Option<String>)> = says
        .paths
        .iter()
        .map(|p| (p.segments.join("::"), p.imports.clone()))
        .collect();
    let some = |s: &str| Some(s.to_owned());
    assert_eq!(
        paths,
        [
            ("crate::a::B".to_owned(), some("B")),
            ("crate::c::d".to_owned(), None),
            ("crate::e".to_owned(), some("e")),
            ("crate::f::g".to_owned(), some("g")),
            ("crate::f::h".to_owned(), some("k")),
            ("crate::f".to_owned(), some("f")),
            ("crate::i".to_owned(), None),
            ("child::run".to_owned(), None),
        ]
    );
    assert_eq!(says.declares, BTreeSet::from(["child".to_owned()]));
}
