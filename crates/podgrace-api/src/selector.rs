//! Label and field selectors (`labelSelector`, `fieldSelector` query parameters), parsed and
//! matched as apimachinery does.
//!
//! Upstream: `staging/src/k8s.io/apimachinery/pkg/labels/selector.go` (`Parse`: `=`, `==`,
//! `!=`, `in`, `notin`, existence `key` and `!key`, `gt`/`lt` as `>`/`<`) and
//! `staging/src/k8s.io/apimachinery/pkg/fields/selector.go` (`ParseSelector`: `=`, `==`, `!=`
//! terms joined by `,`, with `\` escapes). Kubernetes 1.18 to 1.37.

use std::collections::BTreeMap;

/// A selector that does not parse, worded as apimachinery words it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SelectorError(pub String);

#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelOp {
    Equals(String),
    NotEquals(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    DoesNotExist,
    Gt(i64),
    Lt(i64),
}

/// A parsed label selector: every requirement must hold.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector {
    reqs: Vec<(String, LabelOp)>,
}

impl LabelSelector {
    /// Parses `labels.Parse` syntax (`app=web,tier!=db,env in (a,b),!canary`). Empty selects
    /// everything.
    ///
    /// # Errors
    /// [`SelectorError`] naming the requirement that does not parse.
    pub fn parse(s: &str) -> Result<LabelSelector, SelectorError> {
        let mut reqs = Vec::new();
        for part in split_top(s) {
            let part = part.trim();
            if part.is_empty() {
                if s.trim().is_empty() {
                    continue;
                }
                return Err(SelectorError(
                    "found '', expected: !, identifier, or 'end of string'".to_string(),
                ));
            }
            reqs.push(parse_requirement(part)?);
        }
        Ok(LabelSelector { reqs })
    }

    /// Whether no requirement is set (matches everything).
    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches_with(|k| labels.get(k).map(String::as_str))
    }

    /// Whether the labels read by `label` (a key to its value) satisfy every requirement.
    pub fn matches_with<'a>(&self, label: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.reqs.iter().all(|(k, op)| {
            let v = label(k);
            match op {
                LabelOp::Equals(want) => v == Some(want.as_str()),
                LabelOp::NotEquals(want) => v != Some(want.as_str()),
                LabelOp::In(set) => v.is_some_and(|v| set.iter().any(|s| s == v)),
                LabelOp::NotIn(set) => !v.is_some_and(|v| set.iter().any(|s| s == v)),
                LabelOp::Exists => v.is_some(),
                LabelOp::DoesNotExist => v.is_none(),
                LabelOp::Gt(n) => v
                    .and_then(|v| v.parse::<i64>().ok())
                    .is_some_and(|x| x > *n),
                LabelOp::Lt(n) => v
                    .and_then(|v| v.parse::<i64>().ok())
                    .is_some_and(|x| x < *n),
            }
        })
    }
}

/// Splits at commas outside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn valid_key(k: &str) -> Result<(), SelectorError> {
    let (prefix, name) = match k.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|l| {
                !l.is_empty()
                    && l.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                    && l.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                    && l.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            })
    });
    if name_ok && prefix_ok {
        Ok(())
    } else {
        Err(SelectorError(format!("unable to parse requirement: key: Invalid value: {k:?}: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")))
    }
}

fn valid_value(v: &str) -> Result<(), SelectorError> {
    let ok = v.is_empty()
        || (v.len() <= 63
            && v.starts_with(|c: char| c.is_ascii_alphanumeric())
            && v.ends_with(|c: char| c.is_ascii_alphanumeric())
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')));
    if ok {
        Ok(())
    } else {
        Err(SelectorError(format!("unable to parse requirement: values[0][key]: Invalid value: {v:?}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")))
    }
}

fn parse_set(rest: &str, whole: &str) -> Result<Vec<String>, SelectorError> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| SelectorError(format!("found '{whole}', expected: '(' or ')'")))?;
    let mut vals = Vec::new();
    for v in inner.split(',') {
        let v = v.trim();
        valid_value(v)?;
        vals.push(v.to_string());
    }
    Ok(vals)
}

fn parse_requirement(part: &str) -> Result<(String, LabelOp), SelectorError> {
    if let Some(k) = part.strip_prefix('!') {
        let k = k.trim();
        valid_key(k)?;
        return Ok((k.to_string(), LabelOp::DoesNotExist));
    }
    for (tok, make) in [("!=", 0u8), ("==", 1), ("=", 1), (">", 2), ("<", 3)] {
        if let Some((k, v)) = part.split_once(tok) {
            let (k, v) = (k.trim(), v.trim());
            valid_key(k)?;
            let op = match make {
                0 | 1 => {
                    valid_value(v)?;
                    if make == 0 {
                        LabelOp::NotEquals(v.to_string())
                    } else {
                        LabelOp::Equals(v.to_string())
                    }
                }
                _ => {
                    let n: i64 = v.parse().map_err(|_| {
                        SelectorError("unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer".to_string())
                    })?;
                    if make == 2 {
                        LabelOp::Gt(n)
                    } else {
                        LabelOp::Lt(n)
                    }
                }
            };
            return Ok((k.to_string(), op));
        }
    }
    let mut words = part.splitn(2, char::is_whitespace);
    let key = words.next().unwrap_or("").trim();
    let rest = words.next().unwrap_or("").trim();
    if rest.is_empty() {
        // `key(` with no space before the set is also how `in`/`notin` may be written.
        valid_key(key)?;
        return Ok((key.to_string(), LabelOp::Exists));
    }
    valid_key(key)?;
    if let Some(set) = rest.strip_prefix("notin") {
        return Ok((key.to_string(), LabelOp::NotIn(parse_set(set, part)?)));
    }
    if let Some(set) = rest.strip_prefix("in") {
        return Ok((key.to_string(), LabelOp::In(parse_set(set, part)?)));
    }
    Err(SelectorError(format!(
        "found '{rest}', expected: in, notin, =, ==, !=, gt, lt"
    )))
}

/// A parsed field selector: `(field, value, equal?)` terms, all of which must hold.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FieldSelector {
    /// `(field path, value, true for = or ==, false for !=)`.
    pub terms: Vec<(String, String, bool)>,
}

impl FieldSelector {
    /// Parses `fields.ParseSelector` syntax (`metadata.name=web,status.phase!=Running`).
    ///
    /// # Errors
    /// [`SelectorError`]: `invalid selector: 'X'; can't understand 'TERM'`.
    pub fn parse(s: &str) -> Result<FieldSelector, SelectorError> {
        let mut terms = Vec::new();
        if s.is_empty() {
            return Ok(FieldSelector { terms });
        }
        let mut parts = Vec::new();
        let mut cur = String::new();
        let mut chars = s.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => {
                    cur.push(c);
                    if let Some(n) = chars.next() {
                        cur.push(n);
                    }
                }
                ',' => parts.push(std::mem::take(&mut cur)),
                _ => cur.push(c),
            }
        }
        parts.push(cur);
        for part in parts {
            let found = ["!=", "==", "="]
                .iter()
                .find_map(|op| part.find(op).map(|i| (i, *op)));
            let Some((i, op)) = found else {
                return Err(SelectorError(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                )));
            };
            let field = part[..i].to_string();
            let value = unescape(&part[i + op.len()..]);
            terms.push((field, value, op != "!="));
        }
        Ok(FieldSelector { terms })
    }

    /// Whether no term is set.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// Whether every term holds, reading each field with `value` (`None`: absent, read as "").
    pub fn matches(&self, mut value: impl FnMut(&str) -> Option<String>) -> bool {
        self.terms.iter().all(|(f, want, eq)| {
            let got = value(f).unwrap_or_default();
            (got == *want) == *eq
        })
    }

    /// The value required for `field` by an `=` term, if any (for `metadata.name` lookups).
    pub fn required(&self, field: &str) -> Option<&str> {
        self.terms
            .iter()
            .find(|(f, _, eq)| f == field && *eq)
            .map(|(_, v, _)| v.as_str())
    }
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(n) = chars.next() {
                out.push(n);
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn label_selectors_match_as_apimachinery() {
        let l = labels(&[("app", "web"), ("tier", "front"), ("n", "5")]);
        for (sel, want) in [
            ("", true),
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app=db", false),
            ("app in (web,db)", true),
            ("app notin (web)", false),
            ("app,tier", true),
            ("!canary", true),
            ("!app", false),
            ("missing!=x", true),
            ("missing notin (x)", true),
            ("n>4", true),
            ("n<4", false),
            ("app=web,tier in (front, back)", true),
            ("example.com/role", false),
        ] {
            let s = LabelSelector::parse(sel).unwrap_or_else(|e| panic!("{sel}: {e}"));
            assert_eq!(s.matches(&l), want, "{sel}");
        }
        assert!(LabelSelector::parse("app=we b").is_err());
        assert!(LabelSelector::parse("app in web").is_err());
        assert!(LabelSelector::parse("-bad=x").is_err());
        assert!(LabelSelector::parse("a=b,,c").is_err());
    }

    #[test]
    fn field_selectors_parse_terms_and_escapes() {
        let f = FieldSelector::parse("metadata.name=web,status.phase!=Running").unwrap();
        assert_eq!(f.required("metadata.name"), Some("web"));
        assert!(f.matches(|k| Some(
            if k == "metadata.name" {
                "web"
            } else {
                "Pending"
            }
            .into()
        )));
        assert!(!f.matches(|k| Some(
            if k == "metadata.name" {
                "web"
            } else {
                "Running"
            }
            .into()
        )));
        let e = FieldSelector::parse(r"metadata.name=a\,b").unwrap();
        assert_eq!(e.terms[0].1, "a,b");
        assert_eq!(
            FieldSelector::parse("nonsense").unwrap_err().0,
            "invalid selector: 'nonsense'; can't understand 'nonsense'"
        );
    }
}
