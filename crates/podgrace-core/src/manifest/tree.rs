//! The spanned value tree: each YAML document parsed once, every node with its line and column.
//!
//! Built from the event stream of `granit-parser`, the parser serde-saphyr runs on (re-exported
//! as `serde_saphyr::granit_parser`). Scalars are resolved the way Kubernetes' YAML decoder
//! (`sigs.k8s.io/yaml`, go-yaml v2, YAML 1.1 core types) resolves them: plain `30` is an integer,
//! quoted `"30"` stays a string, `yes`/`on`/`true` are booleans, `~`/`null`/empty are null.
//! Aliases are expanded (with a node budget against alias bombs) and `<<` merge keys applied.

use std::borrow::Cow;

use serde_saphyr::granit_parser::{Event, Options as ParserOptions, Parser, ScalarStyle};

/// A 1-based line and column (columns count characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Pos {
    pub line: u32,
    pub col: u32,
}

/// One YAML node with where it starts.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Node<'a> {
    pub pos: Pos,
    pub value: Value<'a>,
}

/// The resolved value of a node.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value<'a> {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Cow<'a, str>),
    Seq(Vec<Node<'a>>),
    Map(Vec<Entry<'a>>),
}

/// A mapping entry; keys are strings (non-string keys keep their source text, as JSON needs).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Entry<'a> {
    pub key: Cow<'a, str>,
    pub key_pos: Pos,
    pub value: Node<'a>,
}

/// A YAML syntax error or a document beyond the limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SyntaxError {
    pub pos: Pos,
    pub message: String,
}

/// At most this many nodes per file, counting alias expansions (an alias bomb stops here).
const NODE_BUDGET: usize = 5_000_000;

impl<'a> Node<'a> {
    /// The entry of a mapping with this key.
    pub fn get(&self, key: &str) -> Option<&Node<'a>> {
        self.entry(key).map(|e| &e.value)
    }

    /// The mapping entry with this key (the key's own position is in it).
    pub fn entry(&self, key: &str) -> Option<&Entry<'a>> {
        match &self.value {
            Value::Map(entries) => entries.iter().find(|e| e.key == key),
            _ => None,
        }
    }

    /// The `i`-th element of a sequence.
    pub fn index(&self, i: usize) -> Option<&Node<'a>> {
        match &self.value {
            Value::Seq(items) => items.get(i),
            _ => None,
        }
    }

    /// The string value of a scalar string node.
    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// A short description for type errors (`integer 8080`, `a mapping`; a string is quoted as
    /// an excerpt, see [`super::excerpt::quote`]).
    pub fn describe(&self) -> String {
        match &self.value {
            Value::Null => "null".to_string(),
            Value::Bool(b) => format!("boolean `{b}`"),
            Value::Int(i) => format!("integer `{i}`"),
            Value::Float(f) => format!("floating point `{f}`"),
            Value::Str(s) => format!("string {}", super::excerpt::quote(s)),
            Value::Seq(_) => "a sequence".to_string(),
            Value::Map(_) => "a mapping".to_string(),
        }
    }
}

/// Parses every document of `text` into trees. Documents are returned in order; a syntax error
/// stops parsing and is returned together with the documents completed before it.
pub(crate) fn parse_documents(text: &str) -> (Vec<Node<'_>>, Option<SyntaxError>) {
    let mut options = ParserOptions::default();
    options.emit_comments = false;
    let parser = Parser::new_from_str_with_options(text, options);
    let mut builder = Builder::default();
    for item in parser {
        match item {
            Ok((event, span)) => {
                let pos = Pos {
                    line: to_u32(span.start.line()),
                    col: to_u32(span.start.col().saturating_add(1)),
                };
                if let Err(e) = builder.event(event, pos) {
                    return (builder.docs, Some(e));
                }
            }
            Err(e) => {
                let mark = e.marker();
                let pos = Pos {
                    line: to_u32(mark.line()),
                    col: to_u32(mark.col().saturating_add(1)),
                };
                return (
                    builder.docs,
                    Some(SyntaxError {
                        pos,
                        message: e.info(),
                    }),
                );
            }
        }
    }
    (builder.docs, None)
}

fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// An open collection on the builder's stack.
enum Open<'a> {
    Seq {
        node_pos: Pos,
        anchor: usize,
        items: Vec<Node<'a>>,
    },
    Map {
        node_pos: Pos,
        anchor: usize,
        entries: Vec<Entry<'a>>,
        key: Option<(Cow<'a, str>, Pos)>,
    },
}

#[derive(Default)]
struct Builder<'a> {
    stack: Vec<Open<'a>>,
    /// Anchored nodes of the current document, by anchor id.
    anchors: Vec<Option<Node<'a>>>,
    docs: Vec<Node<'a>>,
    /// The current document's root, once complete.
    root: Option<Node<'a>>,
    nodes: usize,
}

impl<'a> Builder<'a> {
    fn event(&mut self, event: Event<'a>, pos: Pos) -> Result<(), SyntaxError> {
        match event {
            Event::DocumentStart(..) => {
                self.anchors.clear();
                self.root = None;
            }
            Event::DocumentEnd => {
                // An empty document has no root: it is skipped like a null one.
                if let Some(root) = self.root.take() {
                    self.docs.push(root);
                }
            }
            Event::Scalar(text, style, anchor, tag) => {
                let tag_suffix = tag.as_ref().map(|t| t.suffix().to_string());
                let value = resolve_scalar(text, style, tag_suffix.as_deref());
                self.complete(Node { pos, value }, anchor, pos)?;
            }
            Event::SequenceStart(_, anchor, _) => {
                self.stack.push(Open::Seq {
                    node_pos: pos,
                    anchor,
                    items: Vec::new(),
                });
            }
            Event::MappingStart(_, anchor, _) => {
                self.stack.push(Open::Map {
                    node_pos: pos,
                    anchor,
                    entries: Vec::new(),
                    key: None,
                });
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let (node, anchor) = match self.stack.pop() {
                    Some(Open::Seq {
                        node_pos,
                        anchor,
                        items,
                    }) => (
                        Node {
                            pos: node_pos,
                            value: Value::Seq(items),
                        },
                        anchor,
                    ),
                    Some(Open::Map {
                        node_pos,
                        anchor,
                        entries,
                        ..
                    }) => (
                        Node {
                            pos: node_pos,
                            value: Value::Map(apply_merges(entries)),
                        },
                        anchor,
                    ),
                    None => {
                        return Err(SyntaxError {
                            pos,
                            message: "unbalanced collection end".into(),
                        })
                    }
                };
                self.complete(node, anchor, pos)?;
            }
            Event::Alias(id) => {
                let Some(anchored) = self.anchors.get(id).and_then(|n| n.as_ref()) else {
                    return Err(SyntaxError {
                        pos,
                        message: "alias to an unknown anchor".into(),
                    });
                };
                // Counted before cloning, so an alias bomb stops before it allocates.
                self.nodes = self.nodes.saturating_add(count_nodes(anchored));
                if self.nodes > NODE_BUDGET {
                    return Err(SyntaxError {
                        pos,
                        message: format!("more than {NODE_BUDGET} nodes (alias expansion?)"),
                    });
                }
                let node = anchored.clone();
                self.complete(node, 0, pos)?;
            }
            _ => {}
        }
        Ok(())
    }

    /// Attaches a finished node to its parent (or makes it the document root).
    fn complete(&mut self, node: Node<'a>, anchor: usize, pos: Pos) -> Result<(), SyntaxError> {
        self.nodes = self.nodes.saturating_add(1);
        if self.nodes > NODE_BUDGET {
            return Err(SyntaxError {
                pos,
                message: format!("more than {NODE_BUDGET} nodes (alias expansion?)"),
            });
        }
        if anchor != 0 {
            if self.anchors.len() <= anchor {
                self.anchors.resize(anchor + 1, None);
            }
            if let Some(slot) = self.anchors.get_mut(anchor) {
                *slot = Some(node.clone());
            }
        }
        match self.stack.last_mut() {
            None => {
                // `null` documents are skipped.
                if node.value != Value::Null {
                    self.root = Some(node);
                }
            }
            Some(Open::Seq { items, .. }) => items.push(node),
            Some(Open::Map { entries, key, .. }) => match key.take() {
                None => {
                    let text = key_text(node.value);
                    *key = Some((text, node.pos));
                }
                Some((k, key_pos)) => entries.push(Entry {
                    key: k,
                    key_pos,
                    value: node,
                }),
            },
        }
        Ok(())
    }
}

fn count_nodes(node: &Node<'_>) -> usize {
    match &node.value {
        Value::Seq(items) => items.iter().map(count_nodes).sum::<usize>() + 1,
        Value::Map(entries) => entries.iter().map(|e| count_nodes(&e.value)).sum::<usize>() + 1,
        _ => 1,
    }
}

/// The string a key becomes in JSON (`1: x` has the key `"1"`).
fn key_text(value: Value<'_>) -> Cow<'_, str> {
    match value {
        Value::Str(s) => s,
        Value::Null => Cow::Borrowed("null"),
        Value::Bool(b) => Cow::Owned(b.to_string()),
        Value::Int(i) => Cow::Owned(i.to_string()),
        Value::Float(f) => Cow::Owned(f.to_string()),
        Value::Seq(_) | Value::Map(_) => Cow::Borrowed("<complex key>"),
    }
}

/// Applies `<<` merge keys (YAML 1.1 merge type, supported by go-yaml v2): entries of the
/// merged mapping(s) are added unless the key is present already.
fn apply_merges(entries: Vec<Entry<'_>>) -> Vec<Entry<'_>> {
    if !entries.iter().any(|e| e.key == "<<") {
        return entries;
    }
    let mut own: Vec<Entry<'_>> = Vec::with_capacity(entries.len());
    let mut merged: Vec<Entry<'_>> = Vec::new();
    for e in entries {
        if e.key == "<<" {
            match e.value.value {
                Value::Map(m) => merged.extend(m),
                Value::Seq(items) => {
                    for item in items {
                        if let Value::Map(m) = item.value {
                            merged.extend(m);
                        }
                    }
                }
                other => own.push(Entry {
                    key: e.key,
                    key_pos: e.key_pos,
                    value: Node {
                        pos: e.value.pos,
                        value: other,
                    },
                }),
            }
        } else {
            own.push(e);
        }
    }
    for m in merged {
        if !own.iter().any(|o| o.key == m.key) {
            own.push(m);
        }
    }
    own
}

/// Resolves a scalar as go-yaml v2 does for untyped decoding (YAML 1.1 booleans, ints with
/// `0x`/`0o`/`0b` prefixes and `_` separators, `.inf`/`.nan` floats, `~` null).
fn resolve_scalar<'a>(text: Cow<'a, str>, style: ScalarStyle, tag: Option<&str>) -> Value<'a> {
    match tag {
        Some("str") => return Value::Str(text),
        Some("null") => return Value::Null,
        Some("bool") | Some("int") | Some("float") => {}
        Some(_) => return Value::Str(text),
        None if style != ScalarStyle::Plain => return Value::Str(text),
        None => {}
    }
    let s: &str = &text;
    match s {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            return Value::Bool(true)
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Value::Bool(false)
        }
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Value::Float(f64::INFINITY)
        }
        "-.inf" | "-.Inf" | "-.INF" => return Value::Float(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => return Value::Float(f64::NAN),
        _ => {}
    }
    let first = s.as_bytes().first().copied().unwrap_or(b' ');
    if first.is_ascii_digit() || first == b'-' || first == b'+' || first == b'.' {
        if let Some(i) = parse_int(s) {
            return Value::Int(i);
        }
        if looks_like_float(s) {
            if let Ok(f) = s.replace('_', "").parse::<f64>() {
                return Value::Float(f);
            }
        }
    }
    Value::Str(text)
}

fn parse_int(s: &str) -> Option<i64> {
    let (neg, body) = match s.as_bytes().first()? {
        b'-' => (true, s.get(1..)?),
        b'+' => (false, s.get(1..)?),
        _ => (false, s),
    };
    if body.is_empty() {
        return None;
    }
    let (radix, digits) = if let Some(d) = body.strip_prefix("0x") {
        (16, d)
    } else if let Some(d) = body.strip_prefix("0b") {
        (2, d)
    } else if let Some(d) = body.strip_prefix("0o") {
        (8, d)
    } else if body.len() > 1 && body.starts_with('0') {
        (8, body.get(1..)?)
    } else {
        (10, body)
    };
    if digits.is_empty()
        || !digits
            .bytes()
            .all(|b| b == b'_' || (b as char).is_digit(radix))
    {
        return None;
    }
    let cleaned: Cow<'_, str> = if digits.contains('_') {
        Cow::Owned(digits.replace('_', ""))
    } else {
        Cow::Borrowed(digits)
    };
    let magnitude = i128::from_str_radix(&cleaned, radix).ok()?;
    let v = if neg { -magnitude } else { magnitude };
    i64::try_from(v).ok()
}

fn looks_like_float(s: &str) -> bool {
    let mut digits = false;
    for b in s.bytes() {
        match b {
            b'0'..=b'9' => digits = true,
            b'.' | b'e' | b'E' | b'+' | b'-' | b'_' => {}
            _ => return false,
        }
    }
    digits
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> Node<'_> {
        let (mut docs, err) = parse_documents(text);
        assert!(err.is_none(), "{err:?}");
        assert_eq!(docs.len(), 1);
        docs.remove(0)
    }

    #[test]
    fn scalars_resolve_like_go_yaml() {
        let n = one(
            "a: 30\nb: \"30\"\nc: yes\nd: ~\ne: 1.5\nf: 0x1F\ng: abc\nh: 010\ni: -7\nj: !!str 5\n",
        );
        let v = |k: &str| n.get(k).map(|x| x.value.clone());
        assert_eq!(v("a"), Some(Value::Int(30)));
        assert_eq!(v("b"), Some(Value::Str("30".into())));
        assert_eq!(v("c"), Some(Value::Bool(true)));
        assert_eq!(v("d"), Some(Value::Null));
        assert_eq!(v("e"), Some(Value::Float(1.5)));
        assert_eq!(v("f"), Some(Value::Int(31)));
        assert_eq!(v("g"), Some(Value::Str("abc".into())));
        assert_eq!(v("h"), Some(Value::Int(8)));
        assert_eq!(v("i"), Some(Value::Int(-7)));
        assert_eq!(v("j"), Some(Value::Str("5".into())));
    }

    #[test]
    fn positions_are_one_based() {
        let n = one("a:\n  bb: 1\n");
        let e = n
            .get("a")
            .and_then(|a| a.entry("bb"))
            .map(|e| (e.key_pos, e.value.pos));
        assert_eq!(e, Some((Pos { line: 2, col: 3 }, Pos { line: 2, col: 7 })));
    }

    #[test]
    fn aliases_and_merges() {
        let n = one("base: &b {x: 1, z: 2}\nuse:\n  <<: *b\n  z: 3\n");
        let u = n.get("use");
        assert_eq!(
            u.and_then(|u| u.get("x")).map(|x| x.value.clone()),
            Some(Value::Int(1))
        );
        assert_eq!(
            u.and_then(|u| u.get("z")).map(|x| x.value.clone()),
            Some(Value::Int(3))
        );
    }

    #[test]
    fn empty_and_null_documents_are_skipped() {
        let (docs, err) = parse_documents("---\n---\nnull\n---\na: 1\n...\n");
        assert!(err.is_none());
        assert_eq!(docs.len(), 1);
    }
}
