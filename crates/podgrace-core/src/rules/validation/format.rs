//! The string formats the API server checks (names, labels, ports, environment variable names),
//! each returning upstream's messages: empty when the value is accepted, else one message per
//! broken rule, in upstream's order, worded as upstream words them (the body of a
//! `field.Invalid`, without the path and value).
//!
//! One implementation for `podgrace explain`/`lint`/`run` (the manifest loader) and for
//! `podgrace serve`'s API (`podgrace-api`'s metadata and label checks).
//!
//! Upstream: `staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go`
//! (`IsDNS1123Label`, `IsDNS1123Subdomain`, `IsDNS1035Label`, `IsValidPortNum`,
//! `IsValidPortName`, `IsEnvVarName`, `IsRelaxedEnvVarName`, `RegexError`, `MaxLenError`),
//! `staging/src/k8s.io/apimachinery/pkg/api/validate/content/kube.go` (`IsLabelKey`,
//! `IsLabelValue`) and `staging/src/k8s.io/apimachinery/pkg/api/validation/generic.go`
//! (`NameIsDNSSubdomain`, `NameIsDNSLabel`, `NameIsDNS1035Label`, `maskTrailingDash`), read at
//! the 1.36 tree; the messages are unchanged since Kubernetes 1.18 except where a function
//! says otherwise.

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";
const ENV_VAR_NAME_FMT: &str = "[-._a-zA-Z][-._a-zA-Z0-9]*";
const ENV_VAR_NAME_MSG: &str = "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit";
const RELAXED_ENV_VAR_NAME_MSG: &str =
    "a valid environment variable name must consist only of printable ASCII characters other than '='";
const LABEL_KEY_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_KEY_MSG: &str =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

/// `MaxLenError`: `must be no more than N characters`.
pub fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

/// `InclusiveRangeError`: `must be between LO and HI, inclusive`.
pub fn inclusive_range_error(lo: i64, hi: i64) -> String {
    format!("must be between {lo} and {hi}, inclusive")
}

/// `RegexError`: the message, then the examples and the regular expression, as upstream joins
/// them (`(e.g. 'my-name',  or '123-abc', regex used for validation is '…')`, with its double
/// space).
pub fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let mut out = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push_str(&format!("'{e}', "));
    }
    out.push_str(&format!("regex used for validation is '{fmt}')"));
    out
}

/// Whether `s` matches `[a-z0-9]([-a-z0-9]*[a-z0-9])?` (`first_alpha`: `[a-z]` first, the
/// DNS-1035 form). No length limit.
fn matches_label(s: &str, first_alpha: bool) -> bool {
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let b = s.as_bytes();
    let first_ok = b.first().is_some_and(|&c| {
        if first_alpha {
            c.is_ascii_lowercase()
        } else {
            alnum(c)
        }
    });
    first_ok && b.last().is_some_and(|&c| alnum(c)) && b.iter().all(|&c| alnum(c) || c == b'-')
}

fn matches_subdomain(s: &str) -> bool {
    s.split('.').all(|l| matches_label(l, false))
}

/// `IsDNS1123Label`: at most 63 characters of `[a-z0-9-]`, starting and ending alphanumeric; a
/// valid subdomain with dots gets `must not contain dots`.
pub fn is_dns1123_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !matches_label(s, false) {
        if matches_subdomain(s) {
            errs.push("must not contain dots".into());
        } else {
            errs.push(regex_error(
                DNS1123_LABEL_MSG,
                DNS1123_LABEL_FMT,
                &["my-name", "123-abc"],
            ));
        }
    }
    errs
}

/// `IsDNS1123Subdomain`: at most 253 characters, dot-separated DNS-1123 labels.
pub fn is_dns1123_subdomain(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 253 {
        errs.push(max_len_error(253));
    }
    if !matches_subdomain(s) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_MSG,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// `IsDNS1035Label`: at most 63 characters, starting with a letter.
pub fn is_dns1035_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !matches_label(s, true) {
        errs.push(regex_error(
            DNS1035_LABEL_MSG,
            DNS1035_LABEL_FMT,
            &["my-name", "abc-123"],
        ));
    }
    errs
}

/// `maskTrailingDash`: a `generateName` may end in `-`; upstream replaces the last **two**
/// characters by `a` before checking (`name[:len(name)-2] + "a"`), so `ab-` is checked as `aa`.
fn mask_trailing_dash(name: &str) -> String {
    if name.len() > 1 && name.ends_with('-') {
        let mut cut = name.len() - 2;
        while !name.is_char_boundary(cut) {
            cut -= 1;
        }
        format!("{}a", &name[..cut])
    } else {
        name.to_string()
    }
}

/// How a kind's objects must be named (`ValidateNameFunc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// `NameIsDNSSubdomain`: Pods, Deployments, ReplicaSets, DaemonSets, Jobs, CronJobs,
    /// ConfigMaps, Secrets and most kinds.
    Subdomain,
    /// `NameIsDNSLabel`: Namespaces, StatefulSets.
    Label,
    /// `NameIsDNS1035Label`: Services.
    Dns1035,
}

impl NameRule {
    /// The messages for `name` under this rule; `prefix` for a `generateName` (a trailing `-`
    /// allowed, see `maskTrailingDash`).
    pub fn check(self, name: &str, prefix: bool) -> Vec<String> {
        let masked;
        let name = if prefix {
            masked = mask_trailing_dash(name);
            masked.as_str()
        } else {
            name
        };
        match self {
            NameRule::Subdomain => is_dns1123_subdomain(name),
            NameRule::Label => is_dns1123_label(name),
            NameRule::Dns1035 => is_dns1035_label(name),
        }
    }
}

/// `IsValidPortNum`: 1 to 65535.
pub fn is_valid_port_num(port: i64) -> Vec<String> {
    if (1..=65535).contains(&port) {
        Vec::new()
    } else {
        vec![inclusive_range_error(1, 65535)]
    }
}

/// `IsValidPortName` (an IANA service name): at most 15 characters of `[-a-z0-9]`, at least
/// one letter, no `--`, no leading or trailing `-`.
pub fn is_valid_port_name(port: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if port.len() > 15 {
        errs.push(max_len_error(15));
    }
    if port.is_empty()
        || !port
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        errs.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".into());
    }
    if !port.bytes().any(|b| b.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)".into());
    }
    if port.contains("--") {
        errs.push("must not contain consecutive hyphens".into());
    }
    if port.starts_with('-') || port.ends_with('-') {
        errs.push("must not begin or end with a hyphen".into());
    }
    errs
}

/// `IsEnvVarName`: `[-._a-zA-Z][-._a-zA-Z0-9]*`, and not `.`, `..` or starting with `..`.
pub fn is_env_var_name(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let word = |c: char| c.is_ascii_alphabetic() || matches!(c, '-' | '.' | '_');
    let ok = s.starts_with(word) && s.chars().all(|c| word(c) || c.is_ascii_digit());
    if !ok {
        errs.push(regex_error(
            ENV_VAR_NAME_MSG,
            ENV_VAR_NAME_FMT,
            &["my.env-name", "MY_ENV.NAME", "MyEnvName1"],
        ));
    }
    if s == "." {
        errs.push("must not be '.'".into());
    } else if s == ".." {
        errs.push("must not be '..'".into());
    } else if s.starts_with("..") {
        errs.push("must not start with '..'".into());
    }
    errs
}

/// `IsRelaxedEnvVarName` (`RelaxedEnvironmentVariableValidation`, on by default from 1.32):
/// non-empty printable ASCII without `=`.
pub fn is_relaxed_env_var_name(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.is_empty() {
        errs.push("environment variable name must be non-empty".into());
    }
    if s.chars().any(|c| !(' '..='~').contains(&c) || c == '=') {
        errs.push(RELAXED_ENV_VAR_NAME_MSG.into());
    }
    errs
}

/// Whether `s` matches `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
fn is_label_key_name(s: &str) -> bool {
    let alnum = |c: char| c.is_ascii_alphanumeric();
    !s.is_empty()
        && s.starts_with(alnum)
        && s.ends_with(alnum)
        && s.chars().all(|c| alnum(c) || matches!(c, '-' | '_' | '.'))
}

/// `IsQualifiedName` (`content.IsLabelKey`): a label or annotation key, an optional DNS
/// subdomain prefix and `/`, then a name part of at most 63 characters. The messages are the
/// 1.36 tree's (releases before the `content` package say "a qualified name" where this says
/// "a valid label key", for a key with more than one `/`).
pub fn is_qualified_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(
                    is_dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            errs.push(format!("a valid label key {LABEL_KEY_MSG} (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '{LABEL_KEY_FMT}') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 characters".to_string());
    }
    if !is_label_key_name(name) {
        errs.push(format!("name part {LABEL_KEY_MSG} (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '{LABEL_KEY_FMT}')"));
    }
    errs
}

/// `IsValidLabelValue` (`content.IsLabelValue`): empty, or at most 63 characters of the label
/// key's name form.
pub fn is_valid_label_value(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !value.is_empty() && !is_label_key_name(value) {
        errs.push(format!("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '({LABEL_KEY_FMT})?')"));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    // Cases from upstream's validation_test.go (TestIsDNS1123Label, TestIsDNS1123Subdomain,
    // TestIsDNS1035Label, TestIsValidPortName, TestIsEnvVarName, TestIsRelaxedEnvVarName) and
    // generic_test.go (TestMaskTrailingDash).
    #[test]
    fn names_are_checked_as_apimachinery_checks_them() {
        for ok in [
            "a",
            "ab",
            "abc",
            "a1",
            "a-1",
            "a--1--2--b",
            "0",
            "01",
            "1-2",
        ] {
            assert!(is_dns1123_label(ok).is_empty(), "{ok}");
        }
        assert!(is_dns1123_label(&"a".repeat(63)).is_empty());
        assert_eq!(
            is_dns1123_label(&"a".repeat(64)),
            vec!["must be no more than 63 characters"]
        );
        assert_eq!(is_dns1123_label("a.b"), vec!["must not contain dots"]);
        assert_eq!(
            is_dns1123_label("Web_1"),
            vec!["a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"]
        );
        for ok in ["a.b.c", "1.2.3", "a-1.b-2", "example.com"] {
            assert!(is_dns1123_subdomain(ok).is_empty(), "{ok}");
        }
        assert_eq!(
            is_dns1123_subdomain("My_Pod"),
            vec!["a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"]
        );
        assert_eq!(is_dns1123_subdomain(&"a".repeat(254)).len(), 1);
        assert!(!is_dns1035_label("1abc").is_empty());
        assert!(is_dns1035_label("abc-1").is_empty());
        assert_eq!(mask_trailing_dash("ab-"), "aa");
        assert_eq!(mask_trailing_dash("-"), "-");
        assert!(NameRule::Subdomain.check("web-", true).is_empty());
        assert!(!NameRule::Subdomain.check("web-", false).is_empty());
    }

    #[test]
    fn ports_and_env_names_are_checked_as_apimachinery_checks_them() {
        assert!(is_valid_port_name("http").is_empty());
        assert!(is_valid_port_name("a-b-c").is_empty());
        assert_eq!(
            is_valid_port_name("1234"),
            vec!["must contain at least one letter (a-z)"]
        );
        assert_eq!(
            is_valid_port_name("-a--b-"),
            vec![
                "must not contain consecutive hyphens",
                "must not begin or end with a hyphen"
            ]
        );
        assert_eq!(is_valid_port_name("abcdefghijklmnop").len(), 1);
        assert_eq!(is_valid_port_name("").len(), 2);
        assert_eq!(
            is_valid_port_num(70000),
            vec!["must be between 1 and 65535, inclusive"]
        );
        assert!(is_valid_port_num(65535).is_empty());
        for ok in ["A", "ABC", "AbC_123", "_123", ".", "-"] {
            assert!(is_env_var_name(ok).len() <= 1, "{ok}");
        }
        assert!(is_env_var_name("MY_ENV.NAME").is_empty());
        assert_eq!(is_env_var_name(".."), vec!["must not be '..'"]);
        assert_eq!(
            is_env_var_name("A=B"),
            vec!["a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or 'MyEnvName1', regex used for validation is '[-._a-zA-Z][-._a-zA-Z0-9]*')"]
        );
        assert!(is_relaxed_env_var_name("1 a:b").is_empty());
        assert_eq!(
            is_relaxed_env_var_name("A=B"),
            vec!["a valid environment variable name must consist only of printable ASCII characters other than '='"]
        );
        assert_eq!(is_relaxed_env_var_name("é").len(), 1);
    }
}
