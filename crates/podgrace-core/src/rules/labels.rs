//! Label selectors as controllers use them: `metav1.LabelSelector` (matchLabels and
//! matchExpressions) turned into requirements, matched against labels, and printed as the
//! selector string clients see (`app=web,tier in (a,b)`).
//!
//! Upstream: `staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/helpers.go`
//! (`LabelSelectorAsSelector`, `FormatLabelSelector`) and `pkg/labels/selector.go`
//! (`Requirement.Matches`, `Requirement.String`, `internalSelector.String`: requirements sorted
//! by key, values sorted). The same from Kubernetes 1.18 to 1.37.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// A selector operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    /// `key=value` (from `matchLabels`).
    Equals,
    /// `key in (a,b)`: the label is set to one of the values.
    In,
    /// `key notin (a,b)`: the label is unset or set to none of the values.
    NotIn,
    /// `key` (`Exists`): the label is set, to any value.
    Exists,
    /// `!key` (`DoesNotExist`): the label is not set.
    DoesNotExist,
}

/// One requirement of a selector: a key, an operator and (for `In`/`NotIn`/`Equals`) sorted
/// values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// The label key (`app`, `app.kubernetes.io/name`).
    pub key: String,
    /// How the label's value is compared.
    pub op: Operator,
    /// The values, sorted; empty for `Exists` and `DoesNotExist`.
    pub values: Vec<String>,
}

impl Requirement {
    /// `Requirement.Matches`: whether `labels` satisfy it.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self.op {
            Operator::Equals | Operator::In => labels
                .get(&self.key)
                .is_some_and(|v| self.values.iter().any(|x| x == v)),
            Operator::NotIn => labels
                .get(&self.key)
                .is_none_or(|v| !self.values.iter().any(|x| x == v)),
            Operator::Exists => labels.contains_key(&self.key),
            Operator::DoesNotExist => !labels.contains_key(&self.key),
        }
    }

    fn render(&self) -> String {
        match self.op {
            Operator::Equals => format!("{}={}", self.key, self.values.join(",")),
            Operator::In => format!("{} in ({})", self.key, self.values.join(",")),
            Operator::NotIn => format!("{} notin ({})", self.key, self.values.join(",")),
            Operator::Exists => self.key.clone(),
            Operator::DoesNotExist => format!("!{}", self.key),
        }
    }
}

/// A parsed selector. `None` requirements: matches nothing (a nil `LabelSelector`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    requirements: Option<Vec<Requirement>>,
}

impl Selector {
    /// The selector that matches nothing (`labels.Nothing()`).
    pub fn nothing() -> Selector {
        Selector { requirements: None }
    }

    /// A selector of `key=value` requirements (`labels.SelectorFromSet`).
    pub fn from_map(m: &BTreeMap<String, String>) -> Selector {
        Selector {
            requirements: Some(
                m.iter()
                    .map(|(k, v)| Requirement {
                        key: k.clone(),
                        op: Operator::Equals,
                        values: vec![v.clone()],
                    })
                    .collect(),
            ),
        }
    }

    /// `Selector.Matches`.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match &self.requirements {
            None => false,
            Some(rs) => rs.iter().all(|r| r.matches(labels)),
        }
    }

    /// `Selector.Empty`: no requirement (matches everything).
    pub fn is_empty(&self) -> bool {
        self.requirements.as_ref().is_some_and(Vec::is_empty)
    }

    /// The requirements (none for [`Selector::nothing`]).
    pub fn requirements(&self) -> &[Requirement] {
        self.requirements.as_deref().unwrap_or(&[])
    }
}

impl std::fmt::Display for Selector {
    /// `internalSelector.String`: requirements joined with `,` (empty for nothing/everything).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self
            .requirements()
            .iter()
            .map(Requirement::render)
            .collect();
        f.write_str(&parts.join(","))
    }
}

/// `LabelSelectorAsSelector`: `None` (nil) matches nothing, an empty selector everything.
///
/// # Errors
/// Upstream's messages: `"X" is not a valid label selector operator`, `for 'in', 'notin'
/// operators, values set can't be empty`, `values set must be empty for exists and does not
/// exist`.
pub fn as_selector(sel: Option<&LabelSelector>) -> Result<Selector, String> {
    let Some(sel) = sel else {
        return Ok(Selector::nothing());
    };
    let mut reqs = Vec::new();
    for (k, v) in sel.match_labels.iter().flatten() {
        reqs.push(Requirement {
            key: k.clone(),
            op: Operator::Equals,
            values: vec![v.clone()],
        });
    }
    for e in sel.match_expressions.iter().flatten() {
        let op = match e.operator.as_str() {
            "In" => Operator::In,
            "NotIn" => Operator::NotIn,
            "Exists" => Operator::Exists,
            "DoesNotExist" => Operator::DoesNotExist,
            other => return Err(format!("{other:?} is not a valid label selector operator")),
        };
        let mut values = e.values.clone().unwrap_or_default();
        match op {
            Operator::In | Operator::NotIn if values.is_empty() => {
                return Err("for 'in', 'notin' operators, values set can't be empty".into())
            }
            Operator::Exists | Operator::DoesNotExist if !values.is_empty() => {
                return Err("values set must be empty for exists and does not exist".into())
            }
            _ => {}
        }
        values.sort();
        values.dedup();
        reqs.push(Requirement {
            key: e.key.clone(),
            op,
            values,
        });
    }
    reqs.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(Selector {
        requirements: Some(reqs),
    })
}

/// `FormatLabelSelector`: the selector string, `<none>` when empty, `<error>` when invalid.
pub fn format(sel: Option<&LabelSelector>) -> String {
    match as_selector(sel) {
        Err(_) => "<error>".into(),
        Ok(s) => {
            let t = s.to_string();
            if t.is_empty() {
                "<none>".into()
            } else {
                t
            }
        }
    }
}

/// Whether `sel` (a `LabelSelector`) selects `labels`; an invalid selector selects nothing.
pub fn selects(sel: Option<&LabelSelector>, labels: &BTreeMap<String, String>) -> bool {
    as_selector(sel).is_ok_and(|s| s.matches(labels))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn l(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn selectors_match_and_print_as_apimachinery_does() {
        let sel = LabelSelector {
            match_labels: Some(l(&[("app", "web")])),
            match_expressions: Some(vec![
                LabelSelectorRequirement {
                    key: "tier".into(),
                    operator: "In".into(),
                    values: Some(vec!["b".into(), "a".into()]),
                },
                LabelSelectorRequirement {
                    key: "canary".into(),
                    operator: "DoesNotExist".into(),
                    values: None,
                },
            ]),
        };
        let s = as_selector(Some(&sel)).unwrap();
        assert_eq!(s.to_string(), "app=web,!canary,tier in (a,b)");
        assert!(s.matches(&l(&[("app", "web"), ("tier", "a")])));
        assert!(!s.matches(&l(&[("app", "web"), ("tier", "c")])));
        assert!(!s.matches(&l(&[("app", "web"), ("tier", "a"), ("canary", "1")])));
        assert!(!as_selector(None).unwrap().matches(&l(&[])));
        assert!(as_selector(Some(&LabelSelector::default()))
            .unwrap()
            .matches(&l(&[("x", "y")])));
        assert_eq!(format(Some(&LabelSelector::default())), "<none>");
        let bad = LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "a".into(),
                operator: "In".into(),
                values: None,
            }]),
            ..Default::default()
        };
        assert_eq!(
            as_selector(Some(&bad)).unwrap_err(),
            "for 'in', 'notin' operators, values set can't be empty"
        );
        assert_eq!(format(Some(&bad)), "<error>");
    }
}
