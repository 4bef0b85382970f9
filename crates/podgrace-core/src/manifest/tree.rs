//! The spanned value tree: each YAML document parsed once, every node with its line and column.
//!
//! Built from the event stream of `granit-parser`, the parser serde-saphyr runs on (re-exported
//! as `serde_saphyr::granit_parser`). Scalars are resolved the way Kubernetes' YAML decoder
//! (`sigs.k8s.io/yaml`, go-yaml v2, YAML 1.1 core types) resolves them: plain `30` is an integer,
//! quoted `"30"` stays a string, `yes`/`on`/`true` are booleans, `~`/`null`/empty are null.
//! Aliases are expanded and `<<` merge keys applied. Alias expansion is capped relative to the
//! document's own size, as the hardened go-yaml that Kubernetes decodes with caps it (see
//! [`allowed_alias_ratio`]), and by an absolute node budget per file: an alias bomb ("billion
//! laughs") stops at the alias that would exceed the cap, with its position.

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
    /// The error is an object above [`MAX_OBJECT_BYTES`], not bad YAML.
    pub too_large: bool,
}

impl SyntaxError {
    fn at(pos: Pos, message: impl Into<String>) -> SyntaxError {
        SyntaxError {
            pos,
            message: message.into(),
            too_large: false,
        }
    }
}

/// The largest object the API server takes: kube-apiserver refuses a request body above 3 MiB
/// (`MaxRequestBodyBytes`, `staging/src/k8s.io/apiserver/pkg/server/config.go`; `limitedReadBody`
/// answers 413 "Request entity too large: limit is 3145728"). An object whose YAML text is
/// longer is refused where it passes this size, before more of it is read: the work one object
/// can cost is bounded. Each item of a `List` is an object of its own (kubectl sends them one
/// by one).
pub const MAX_OBJECT_BYTES: usize = 3 * 1024 * 1024;

/// At most this many nodes per file, counting alias expansions.
const NODE_BUDGET: usize = 5_000_000;

/// go-yaml's `alias_ratio_range_low` and `alias_ratio_range_high`: decoded nodes between which
/// the share allowed to come from aliases falls from 99% to 10%.
const ALIAS_RATIO_RANGE_LOW: usize = 400_000;
const ALIAS_RATIO_RANGE_HIGH: usize = 4_000_000;

/// The share of a document's decoded nodes that may come from alias expansion, given the nodes
/// decoded so far: 99% up to 400,000 nodes, 10% from 4,000,000, linear between. Mirrors
/// `allowedAliasRatio` of go-yaml (`gopkg.in/yaml.v2` 2.2.8+ and `yaml.v3` `decode.go`, the fix
/// of CVE-2019-11253, Kubernetes 1.16.2 and later, through `sigs.k8s.io/yaml`), which fails the
/// document with "document contains excessive aliasing" once more than 100 nodes came from
/// aliases, more than 1,000 were decoded, and the aliases' share is above this.
fn allowed_alias_ratio(decoded: usize) -> f64 {
    if decoded <= ALIAS_RATIO_RANGE_LOW {
        0.99
    } else if decoded >= ALIAS_RATIO_RANGE_HIGH {
        0.10
    } else {
        let range = (ALIAS_RATIO_RANGE_HIGH - ALIAS_RATIO_RANGE_LOW) as f64;
        0.99 - 0.89 * ((decoded - ALIAS_RATIO_RANGE_LOW) as f64 / range)
    }
}

/// Whether a document that decoded `decoded` nodes, `aliased` of them from aliases, has more
/// aliasing than go-yaml allows (see [`allowed_alias_ratio`]).
fn excessive_aliasing(decoded: usize, aliased: usize) -> bool {
    aliased > 100
        && decoded > 1000
        && aliased as f64 / decoded as f64 > allowed_alias_ratio(decoded)
}

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
    parse_limited(text, MAX_OBJECT_BYTES)
}

/// [`parse_documents`] with objects limited to `max_object_bytes` (tests use small limits).
fn parse_limited(text: &str, max_object_bytes: usize) -> (Vec<Node<'_>>, Option<SyntaxError>) {
    let mut options = ParserOptions::default();
    options.emit_comments = false;
    let parser = Parser::new_from_str_with_options(text, options);
    let mut builder = Builder {
        max_object_bytes,
        ..Builder::default()
    };
    for item in parser {
        match item {
            Ok((event, span)) => {
                let pos = Pos {
                    line: to_u32(span.start.line()),
                    col: to_u32(span.start.col().saturating_add(1)),
                };
                let offset = span.start.byte_offset().unwrap_or(span.start.index());
                let end = span.end.byte_offset().unwrap_or(span.end.index());
                if let Err(e) = builder
                    .event(event, pos, offset)
                    .and_then(|()| builder.check_size(end))
                {
                    return (builder.docs, Some(e));
                }
            }
            Err(e) => {
                let mark = e.marker();
                let pos = Pos {
                    line: to_u32(mark.line()),
                    col: to_u32(mark.col().saturating_add(1)),
                };
                return (builder.docs, Some(SyntaxError::at(pos, e.info())));
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
        /// Byte offset of the mapping's start in the text.
        start: usize,
        anchor: usize,
        entries: Vec<Entry<'a>>,
        key: Option<(Cow<'a, str>, Pos)>,
    },
}

#[derive(Default)]
struct Builder<'a> {
    stack: Vec<Open<'a>>,
    /// Anchored nodes of the current document, by anchor id, with how many nodes each holds.
    anchors: Vec<Option<(Node<'a>, usize)>>,
    docs: Vec<Node<'a>>,
    /// The current document's root, once complete.
    root: Option<Node<'a>>,
    /// Nodes of the file so far, alias expansions included.
    nodes: usize,
    /// Nodes of the current document, alias expansions included.
    decoded: usize,
    /// Nodes of the current document that came from alias expansions.
    aliased: usize,
    /// Nodes completed since each open collection started (for the size of an anchored one).
    sizes: Vec<usize>,
    /// The document's root mapping has a sequence of `items`: it is a `List`, whose items, not
    /// itself, are the objects (see [`MAX_OBJECT_BYTES`]).
    root_is_list: bool,
    /// [`MAX_OBJECT_BYTES`] (smaller in tests).
    max_object_bytes: usize,
}

impl<'a> Builder<'a> {
    fn event(&mut self, event: Event<'a>, pos: Pos, offset: usize) -> Result<(), SyntaxError> {
        match event {
            Event::DocumentStart(..) => {
                self.anchors.clear();
                self.root = None;
                self.decoded = 0;
                self.aliased = 0;
                self.root_is_list = false;
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
                self.complete(Node { pos, value }, anchor, 1, 1, pos)?;
            }
            Event::SequenceStart(_, anchor, _) => {
                self.sizes.push(0);
                self.stack.push(Open::Seq {
                    node_pos: pos,
                    anchor,
                    items: Vec::new(),
                });
            }
            Event::MappingStart(_, anchor, _) => {
                self.sizes.push(0);
                self.stack.push(Open::Map {
                    node_pos: pos,
                    start: offset,
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
                    None => return Err(SyntaxError::at(pos, "unbalanced collection end")),
                };
                // The collection's own node and everything completed inside it.
                let size = self.sizes.pop().unwrap_or(0) + 1;
                self.complete(node, anchor, size, 1, pos)?;
            }
            Event::Alias(id) => {
                let Some((anchored, size)) = self.anchors.get(id).and_then(|n| n.as_ref()) else {
                    return Err(SyntaxError::at(pos, "alias to an unknown anchor"));
                };
                let size = *size;
                // Checked before cloning, so an alias bomb stops before it allocates.
                let decoded = self.decoded.saturating_add(size);
                let aliased = self.aliased.saturating_add(size);
                if excessive_aliasing(decoded, aliased) {
                    return Err(SyntaxError::at(
                        pos,
                        format!(
                            "document contains excessive aliasing: this alias would expand to {size} nodes, making {aliased} of the document's {decoded} nodes copies of anchors (go-yaml, as the API server decodes YAML, allows {:.0}%)",
                            allowed_alias_ratio(decoded) * 100.0
                        ),
                    ));
                }
                if self.nodes.saturating_add(size) > NODE_BUDGET {
                    return Err(SyntaxError::at(
                        pos,
                        format!("more than {NODE_BUDGET} nodes in the file"),
                    ));
                }
                let node = anchored.clone();
                self.aliased = aliased;
                self.complete(node, 0, size, size, pos)?;
            }
            _ => {}
        }
        Ok(())
    }

    /// The object being read: a `List` item (a mapping in the root's `items`) or else the
    /// document's root mapping, as its index on the stack.
    fn current_object(&self) -> Option<usize> {
        match self.stack.as_slice() {
            [Open::Map {
                key: Some((k, _)), ..
            }, Open::Seq { .. }, rest @ ..]
                if k == "items" =>
            {
                matches!(rest.first(), Some(Open::Map { .. })).then_some(2)
            }
            [Open::Map { .. }] if self.root_is_list => None,
            [Open::Map { .. }, ..] => Some(0),
            _ => None,
        }
    }

    /// `kind` and `metadata.name` of the open object at stack index `i`, as far as read.
    fn object_name(&self, i: usize) -> String {
        let Some(Open::Map { entries, key, .. }) = self.stack.get(i) else {
            return "the object that starts here".to_string();
        };
        let kind = entries
            .iter()
            .find(|e| e.key == "kind")
            .and_then(|e| e.value.as_str());
        let done = entries
            .iter()
            .find(|e| e.key == "metadata")
            .and_then(|e| e.value.get("name").and_then(Node::as_str));
        // `metadata` still being read (a huge annotation, say): its name so far.
        let open = match (key, self.stack.get(i + 1)) {
            (Some((k, _)), Some(Open::Map { entries, .. })) if k == "metadata" => entries
                .iter()
                .find(|e| e.key == "name")
                .and_then(|e| e.value.as_str()),
            _ => None,
        };
        match (kind, done.or(open)) {
            (Some(k), Some(n)) => format!("{k} {n}"),
            (Some(k), None) => k.to_string(),
            (None, Some(n)) => format!("object {n}"),
            (None, None) => "the object that starts here".to_string(),
        }
    }

    /// Refuses the object being read once its text passes [`MAX_OBJECT_BYTES`] (`offset`: where
    /// the last event read ends).
    fn check_size(&self, offset: usize) -> Result<(), SyntaxError> {
        let Some(i) = self.current_object() else {
            return Ok(());
        };
        let Some(Open::Map {
            start, node_pos, ..
        }) = self.stack.get(i)
        else {
            return Ok(());
        };
        if offset.saturating_sub(*start) <= self.max_object_bytes {
            return Ok(());
        }
        let (pos, what) = (*node_pos, self.object_name(i));
        Err(SyntaxError {
            pos,
            message: format!(
                "{what} is larger than the API server accepts: more than {} bytes (3 MiB) of YAML, and the API server refuses a request body above that (413 Request entity too large: limit is {}); split it into smaller objects",
                self.max_object_bytes, self.max_object_bytes
            ),
            too_large: true,
        })
    }

    /// Attaches a finished node to its parent (or makes it the document root). `size`: the
    /// nodes it holds (itself included); `fresh`: how many of them are decoded only now (a
    /// scalar's or a collection's own node: 1, its children were counted as they completed; an
    /// alias: its whole expansion).
    fn complete(
        &mut self,
        node: Node<'a>,
        anchor: usize,
        size: usize,
        fresh: usize,
        pos: Pos,
    ) -> Result<(), SyntaxError> {
        self.nodes = self.nodes.saturating_add(fresh);
        self.decoded = self.decoded.saturating_add(fresh);
        if self.nodes > NODE_BUDGET {
            return Err(SyntaxError::at(
                pos,
                format!("more than {NODE_BUDGET} nodes in the file"),
            ));
        }
        if let Some(open) = self.sizes.last_mut() {
            *open = open.saturating_add(size);
        }
        if anchor != 0 {
            if self.anchors.len() <= anchor {
                self.anchors.resize(anchor + 1, None);
            }
            if let Some(slot) = self.anchors.get_mut(anchor) {
                *slot = Some((node.clone(), size));
            }
        }
        let at_root = self.stack.len() == 1;
        match self.stack.last_mut() {
            None => {
                // `null` documents are skipped.
                if node.value != Value::Null {
                    self.root = Some(node);
                }
            }
            Some(Open::Seq { items, .. }) => items.push(node),
            Some(Open::Map { entries, key, .. }) => match key.take() {
                Some((k, key_pos))
                    if at_root && k == "items" && matches!(node.value, Value::Seq(_)) =>
                {
                    self.root_is_list = true;
                    entries.push(Entry {
                        key: k,
                        key_pos,
                        value: node,
                    });
                }
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
    let mut keys: std::collections::HashSet<Cow<'_, str>> =
        own.iter().map(|o| o.key.clone()).collect();
    for m in merged {
        if keys.insert(m.key.clone()) {
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

#[cfg(test)]
mod alias_tests {
    use super::*;

    /// Kubernetes' own alias-bomb case ("arrays of string aliases", apimachinery's
    /// `serializer/yaml/yaml_test.go`): nine levels of nine aliases each.
    fn billion_laughs() -> String {
        let mut y =
            String::from("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: yaml-bomb}\ndata:\n");
        y.push_str(
            "  a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
        );
        let levels = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i'];
        for w in levels.windows(2) {
            let refs = vec![format!("*{}", w[0]); 9].join(",");
            y.push_str(&format!("  {}: &{} [{refs}]\n", w[1], w[1]));
        }
        y
    }

    #[test]
    fn an_alias_bomb_stops_at_the_alias_that_exceeds_the_ratio() {
        let y = billion_laughs();
        assert!(y.len() < 1024, "{} bytes", y.len());
        let (docs, err) = parse_documents(&y);
        assert!(docs.is_empty());
        let err = err.expect("refused");
        assert!(
            err.message
                .starts_with("document contains excessive aliasing"),
            "{err:?}"
        );
        // Level c holds 820 nodes; at level d (line 8) the third `*c` would make 3,369 of the
        // document's 3,397 nodes copies, above 99%.
        assert_eq!(err.pos.line, 8, "{err:?}");
        assert!(err.message.contains("expand to 820 nodes"), "{err:?}");
    }

    #[test]
    fn ordinary_aliases_pass() {
        // One anchor of 9 nodes used 50 times in a document of about 2,000 nodes of its own.
        let mut y = String::from("base: &b {a: 1, b: 2, c: 3, d: 4}\nitems:\n");
        for i in 0..500 {
            y.push_str(&format!("- {{n: {i}, v: x}}\n"));
        }
        y.push_str("uses:\n");
        for _ in 0..50 {
            y.push_str("- *b\n");
        }
        let (docs, err) = parse_documents(&y);
        assert!(err.is_none(), "{err:?}");
        assert_eq!(docs.len(), 1);
    }

    #[test]
    fn the_allowed_share_falls_from_99_to_10_percent() {
        assert_eq!(allowed_alias_ratio(1_000), 0.99);
        assert_eq!(allowed_alias_ratio(400_000), 0.99);
        assert!((allowed_alias_ratio(2_200_000) - 0.545).abs() < 1e-9);
        assert_eq!(allowed_alias_ratio(4_000_000), 0.10);
        assert_eq!(allowed_alias_ratio(40_000_000), 0.10);
        // go-yaml's small-document grace: up to 100 aliased or 1,000 decoded nodes, anything.
        assert!(!excessive_aliasing(1000, 999));
        assert!(!excessive_aliasing(5000, 100));
        assert!(excessive_aliasing(1001, 992));
        assert!(!excessive_aliasing(1001, 990));
    }

    /// A `List` above the limit of small items is not one object: it parses; an item above it
    /// is refused at the item; an object is refused where it passes the limit, not before.
    #[test]
    fn the_object_limit_is_per_list_item() {
        const LIMIT: usize = 1000;
        let mut list = String::from("apiVersion: v1\nkind: List\nitems:\n");
        while list.len() <= 3 * LIMIT {
            list.push_str("- {apiVersion: v1, kind: ConfigMap, metadata: {name: cm}}\n");
        }
        let (docs, err) = parse_limited(&list, LIMIT);
        assert!(err.is_none(), "{err:?}");
        assert_eq!(docs.len(), 1);
        list.push_str("- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: huge}\n  data:\n");
        let item_line = list.lines().count() - 3;
        while list.len() <= 5 * LIMIT {
            list.push_str("    k: v\n");
        }
        let (_, err) = parse_limited(&list, LIMIT);
        let err = err.expect("the big item is refused");
        assert!(err.too_large, "{err:?}");
        assert_eq!(
            err.pos,
            Pos {
                line: item_line as u32,
                col: 3
            },
            "{err:?}"
        );
        assert!(
            err.message.starts_with("ConfigMap huge is larger"),
            "{err:?}"
        );

        let mut under =
            String::from("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata:\n");
        while under.len() < LIMIT - 8 {
            under.push_str("  k: v\n");
        }
        let (_, err) = parse_limited(&under, LIMIT);
        assert!(err.is_none(), "{err:?}");
        under.push_str("  k: vvvvvvvvvv\n");
        let (_, err) = parse_limited(&under, LIMIT);
        assert!(err.is_some_and(|e| e.too_large && e.pos == Pos { line: 1, col: 1 }));
    }

    #[test]
    fn each_document_has_its_own_share() {
        // A large document without aliases does not lend its size to the next one.
        let mut y = String::from("a: [");
        y.push_str(&vec!["1"; 5000].join(","));
        y.push_str("]\n---\nx: &x [");
        y.push_str(&vec!["1"; 20].join(","));
        y.push_str("]\ny: [");
        y.push_str(&vec!["*x"; 200].join(","));
        y.push_str("]\n");
        let (_, err) = parse_documents(&y);
        let err = err.expect("the second document alone is more than 99% aliases");
        assert_eq!(err.pos.line, 4, "{err:?}");
    }
}
