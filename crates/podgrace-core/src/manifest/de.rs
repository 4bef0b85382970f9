//! A serde `Deserializer` over the spanned tree.
//!
//! Deserializing straight from the tree (instead of going through `serde_json::Value`) gives
//! three things in one pass: no intermediate allocation, every type error placed at the node
//! that caused it (path and position), and unknown fields found exactly: k8s-openapi types call
//! `deserialize_struct` with the list of their field names, so any key outside that list is a
//! field the API server's strict decoding would reject (`unknown field "preStopp"`). Free-form
//! maps (labels, annotations, `data`) go through `deserialize_map` and are never checked.

use std::cell::RefCell;
use std::fmt;

use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor};

use super::tree::{Entry, Node, Pos, Value};

/// A field path from the object root, rendered kubectl style only when needed (keys longer than
/// [`super::excerpt::MAX_CHARS`] cut).
#[derive(Clone, Copy)]
pub(crate) enum Path<'p> {
    Root,
    Key(&'p Path<'p>, &'p str),
    Index(&'p Path<'p>, usize),
}

impl fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Path::Root => Ok(()),
            Path::Key(parent, key) => {
                // Keys are the user's text when unknown: a long one is cut.
                let key = super::excerpt::key(key);
                if matches!(parent, Path::Root) {
                    write!(f, "{key}")
                } else {
                    write!(f, "{parent}.{key}")
                }
            }
            Path::Index(parent, i) => write!(f, "{parent}[{i}]"),
        }
    }
}

/// A problem found while deserializing that does not stop it (unknown or duplicate field).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Issue {
    pub pos: Pos,
    pub path: String,
    pub kind: IssueKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum IssueKind {
    /// A key the type does not have, with the closest known field name.
    Unknown { field: String, hint: Option<String> },
    /// The same key twice in one mapping.
    Duplicate { field: String },
}

/// Collects the [`Issue`]s of one object.
#[derive(Default)]
pub(crate) struct Ctx {
    pub issues: RefCell<Vec<Issue>>,
}

/// A deserialization error, placed at the innermost node that produced it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DeError {
    pub message: String,
    pub at: Option<(Pos, String)>,
}

impl fmt::Display for DeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for DeError {}

impl de::Error for DeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        DeError {
            message: kubectl_words(super::excerpt::shorten_quoted(&msg.to_string()).into_owned()),
            at: None,
        }
    }
}

/// Rewords serde's messages for Rust primitive types in the words a kubectl user knows
/// (`expected i64` → `expected an integer`), and says when a whole number is too large (YAML
/// reads an integer beyond 64 bits as a float).
fn kubectl_words(message: String) -> String {
    const INTEGERS: [&str; 8] = ["i64", "i32", "i16", "i8", "u64", "u32", "u16", "u8"];
    let Some((head, expected)) = message.rsplit_once(", expected ") else {
        return message;
    };
    if matches!(expected, "f64" | "f32") {
        return format!("{head}, expected a number");
    }
    if !INTEGERS.contains(&expected) {
        return message;
    }
    let float = head
        .strip_prefix("invalid type: floating point `")
        .and_then(|n| n.strip_suffix('`'))
        .and_then(|n| n.parse::<f64>().ok());
    match float {
        Some(f) if f.fract() == 0.0 && f.abs() >= 9.2e18 => format!(
            "invalid value: integer {f:.0} is out of range, expected an integer between -9223372036854775808 and 9223372036854775807"
        ),
        _ => format!("{head}, expected an integer"),
    }
}

/// Deserializes `T` from `node`, the root of one object. `apiVersion` and `kind` at the root
/// are skipped: the caller has checked them already (and may accept older versions).
pub(crate) fn from_node<T: de::DeserializeOwned>(node: &Node<'_>, ctx: &Ctx) -> Result<T, DeError> {
    T::deserialize(NodeDe {
        node,
        path: Path::Root,
        ctx,
        root: true,
    })
}

struct NodeDe<'n, 'a, 'p> {
    node: &'n Node<'a>,
    path: Path<'p>,
    ctx: &'n Ctx,
    root: bool,
}

impl NodeDe<'_, '_, '_> {
    fn locate(&self, mut e: DeError) -> DeError {
        if e.at.is_none() {
            e.at = Some((self.node.pos, self.path.to_string()));
        }
        e
    }

    fn unexpected(&self) -> de::Unexpected<'_> {
        match &self.node.value {
            Value::Null => de::Unexpected::Unit,
            Value::Bool(b) => de::Unexpected::Bool(*b),
            Value::Int(i) => de::Unexpected::Signed(*i),
            Value::Float(f) => de::Unexpected::Float(*f),
            Value::Str(s) => de::Unexpected::Str(s),
            Value::Seq(_) => de::Unexpected::Seq,
            Value::Map(_) => de::Unexpected::Map,
        }
    }

    fn type_error(&self, expected: &str) -> DeError {
        self.locate(de::Error::invalid_type(self.unexpected(), &expected))
    }

    /// Records keys outside `fields` and repeated keys.
    fn check_fields(&self, entries: &[Entry<'_>], fields: &[&str]) {
        let mut issues = self.ctx.issues.borrow_mut();
        let mut seen: std::collections::HashSet<&str> =
            std::collections::HashSet::with_capacity(entries.len());
        for e in entries {
            let key: &str = &e.key;
            if self.root && (key == "apiVersion" || key == "kind") {
                continue;
            }
            if !fields.contains(&key) {
                issues.push(Issue {
                    pos: e.key_pos,
                    path: Path::Key(&self.path, key).to_string(),
                    kind: IssueKind::Unknown {
                        field: key.to_string(),
                        hint: closest(key, fields),
                    },
                });
            }
            if !seen.insert(key) {
                issues.push(Issue {
                    pos: e.key_pos,
                    path: Path::Key(&self.path, key).to_string(),
                    kind: IssueKind::Duplicate {
                        field: key.to_string(),
                    },
                });
            }
        }
    }
}

/// The known field within edit distance 2 of `key`, if any (the closest, first on ties).
pub(crate) fn closest(key: &str, fields: &[&str]) -> Option<String> {
    let mut best: Option<(usize, &str)> = None;
    for f in fields {
        let d = edit_distance(key, f);
        if d <= 2 && best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, f));
        }
    }
    best.map(|(_, f)| f.to_string())
}

/// Levenshtein distance over chars (`strsim`), 3 for strings whose lengths already differ by more
/// than 2 (no suggestion then, and no work on long keys).
fn edit_distance(a: &str, b: &str) -> usize {
    if a.chars().count().abs_diff(b.chars().count()) > 2 {
        return 3;
    }
    strsim::levenshtein(a, b)
}

macro_rules! int_method {
    ($name:ident) => {
        fn $name<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
            let r = match &self.node.value {
                Value::Int(i) => visitor.visit_i64(*i),
                // Go decodes JSON null into the zero value.
                Value::Null => visitor.visit_i64(0),
                Value::Float(f) => visitor.visit_f64(*f),
                _ => return Err(self.type_error("an integer")),
            };
            r.map_err(|e| self.locate(e))
        }
    };
}

impl<'de> de::Deserializer<'de> for NodeDe<'_, '_, '_> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let r = match &self.node.value {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Int(i) => visitor.visit_i64(*i),
            Value::Float(f) => visitor.visit_f64(*f),
            Value::Str(s) => visitor.visit_str(s),
            Value::Seq(items) => visitor.visit_seq(Seq {
                items,
                next: 0,
                path: self.path,
                ctx: self.ctx,
            }),
            Value::Map(entries) => visitor.visit_map(Map {
                entries,
                next: 0,
                path: self.path,
                ctx: self.ctx,
                skip_type_meta: false,
            }),
        };
        r.map_err(|e| self.locate(e))
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        if self.node.value == Value::Null {
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let r = match &self.node.value {
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Null => visitor.visit_bool(false),
            _ => return Err(self.type_error("a boolean")),
        };
        r.map_err(|e| self.locate(e))
    }

    int_method!(deserialize_i8);
    int_method!(deserialize_i16);
    int_method!(deserialize_i32);
    int_method!(deserialize_i64);
    int_method!(deserialize_u8);
    int_method!(deserialize_u16);
    int_method!(deserialize_u32);
    int_method!(deserialize_u64);

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_f64(visitor)
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let r = match &self.node.value {
            Value::Int(i) => visitor.visit_i64(*i),
            Value::Float(f) => visitor.visit_f64(*f),
            Value::Null => visitor.visit_f64(0.0),
            _ => return Err(self.type_error("a number")),
        };
        r.map_err(|e| self.locate(e))
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let r = match &self.node.value {
            Value::Str(s) => visitor.visit_str(s),
            Value::Null => visitor.visit_str(""),
            _ => return Err(self.type_error("a string")),
        };
        r.map_err(|e| self.locate(e))
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_unit().map_err(|e| self.locate(e))
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        // `null` reads as an empty list, as the API server's decoder does.
        let items: &[Node<'_>] = match &self.node.value {
            Value::Seq(items) => items,
            Value::Null => &[],
            _ => return Err(self.type_error("a sequence")),
        };
        visitor
            .visit_seq(Seq {
                items,
                next: 0,
                path: self.path,
                ctx: self.ctx,
            })
            .map_err(|e| self.locate(e))
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let entries: &[Entry<'_>] = match &self.node.value {
            Value::Map(entries) => entries,
            Value::Null => &[],
            _ => return Err(self.type_error("a mapping")),
        };
        let r = visitor.visit_map(Map {
            entries,
            next: 0,
            path: self.path,
            ctx: self.ctx,
            skip_type_meta: false,
        });
        r.map_err(|e| self.locate(e))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        let entries: &[Entry<'_>] = match &self.node.value {
            Value::Map(entries) => entries,
            Value::Null => &[],
            _ => return Err(self.type_error("a mapping")),
        };
        self.check_fields(entries, fields);
        let r = visitor.visit_map(Map {
            entries,
            next: 0,
            path: self.path,
            ctx: self.ctx,
            skip_type_meta: self.root,
        });
        r.map_err(|e| self.locate(e))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        let r = match &self.node.value {
            Value::Str(s) => visitor.visit_enum(s.as_ref().into_deserializer()),
            _ => return Err(self.type_error("a string")),
        };
        r.map_err(|e: DeError| self.locate(e))
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_unit()
    }
}

struct Seq<'n, 'a, 'p> {
    items: &'n [Node<'a>],
    next: usize,
    path: Path<'p>,
    ctx: &'n Ctx,
}

impl<'de> SeqAccess<'de> for Seq<'_, '_, '_> {
    type Error = DeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DeError> {
        let Some(node) = self.items.get(self.next) else {
            return Ok(None);
        };
        let index = self.next;
        self.next += 1;
        let path = Path::Index(&self.path, index);
        seed.deserialize(NodeDe {
            node,
            path,
            ctx: self.ctx,
            root: false,
        })
        .map(Some)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len().saturating_sub(self.next))
    }
}

struct Map<'n, 'a, 'p> {
    entries: &'n [Entry<'a>],
    next: usize,
    path: Path<'p>,
    ctx: &'n Ctx,
    skip_type_meta: bool,
}

impl<'de> MapAccess<'de> for Map<'_, '_, '_> {
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DeError> {
        loop {
            let Some(entry) = self.entries.get(self.next) else {
                return Ok(None);
            };
            if self.skip_type_meta && (entry.key == "apiVersion" || entry.key == "kind") {
                self.next += 1;
                continue;
            }
            let key: &str = &entry.key;
            return seed.deserialize(key.into_deserializer()).map(Some);
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, DeError> {
        let Some(entry) = self.entries.get(self.next) else {
            return Err(de::Error::custom("value requested after the last key"));
        };
        self.next += 1;
        let path = Path::Key(&self.path, &entry.key);
        seed.deserialize(NodeDe {
            node: &entry.value,
            path,
            ctx: self.ctx,
            root: false,
        })
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len().saturating_sub(self.next))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(edit_distance("preStopp", "preStop"), 1);
        assert_eq!(edit_distance("abc", "abc"), 0);
        assert_eq!(
            closest("preStopp", &["postStart", "preStop"]),
            Some("preStop".to_string())
        );
        assert_eq!(closest("zzzzzz", &["preStop"]), None);
    }
}
