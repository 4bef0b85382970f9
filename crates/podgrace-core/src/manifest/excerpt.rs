//! Short excerpts of the user's text for error messages. A value is quoted up to its first line
//! break and at most [`MAX_CHARS`] characters, with `…` where it was cut, so that a file read as
//! one long string (`podgrace explain /etc/passwd`) or a huge value is not echoed back whole:
//! the message's `file:line:column` says where the rest is.

use std::borrow::Cow;

/// The most characters of a value quoted in a message.
pub(crate) const MAX_CHARS: usize = 40;

/// `s` quoted and escaped as `{:?}` quotes it (Go's `%q` for printable text), cut at its first
/// line break and after [`MAX_CHARS`] characters; a cut is marked with `…` before the closing
/// quote (`"root:x:0:0:root:/root:/bin/bash daemon:x:1…"`).
pub(crate) fn quote(s: &str) -> String {
    let (head, cut) = head(s);
    let quoted = format!("{head:?}");
    if cut {
        // `{:?}` of a str always ends with the closing quote.
        let body = quoted.strip_suffix('"').unwrap_or(&quoted);
        format!("{body}…\"")
    } else {
        quoted
    }
}

/// A key of a field path, cut as [`quote`] cuts (unquoted, `…` marking a cut).
pub(crate) fn key(s: &str) -> Cow<'_, str> {
    match head(s) {
        (head, true) => Cow::Owned(format!("{head}…")),
        (_, false) => Cow::Borrowed(s),
    }
}

/// The first line of `s`, at most [`MAX_CHARS`] characters, and whether anything was left out.
fn head(s: &str) -> (&str, bool) {
    let line = s.split('\n').next().unwrap_or(s);
    let end = line
        .char_indices()
        .nth(MAX_CHARS)
        .map_or(line.len(), |(i, _)| i);
    let head = &line[..end];
    (head, head.len() < s.len())
}

/// `message` with every quoted run longer than [`MAX_CHARS`] characters cut, `…` marking the
/// cut: runs in double quotes (backslash escapes kept whole) and in backticks. For messages that
/// serde and k8s-openapi build from the values they were given (`invalid type: string "..."`,
/// `unknown variant `...``).
pub(crate) fn shorten_quoted(message: &str) -> Cow<'_, str> {
    if message.len() <= MAX_CHARS {
        return Cow::Borrowed(message);
    }
    let mut out = String::with_capacity(message.len().min(512));
    let mut rest = message;
    let mut changed = false;
    while let Some(open) = rest.find(['"', '`']) {
        let quote_char = if rest.as_bytes()[open] == b'"' {
            '"'
        } else {
            '`'
        };
        out.push_str(&rest[..=open]);
        let inner = &rest[open + 1..];
        // Tokens of the quoted run: one per character, an escape sequence as one.
        let mut tokens = 0;
        let mut keep = None;
        let mut close = None;
        let mut it = inner.char_indices();
        while let Some((i, ch)) = it.next() {
            if ch == quote_char {
                close = Some(i);
                break;
            }
            if tokens == MAX_CHARS {
                keep.get_or_insert(i);
            }
            tokens += 1;
            // `\u{...}` is one escape; any other escape is a backslash and one character.
            if ch == '\\' && quote_char == '"' && it.next().is_some_and(|(_, c)| c == 'u') {
                for (_, c) in it.by_ref() {
                    if c == '}' {
                        break;
                    }
                }
            }
        }
        let Some(close) = close else {
            // No closing quote: not a quoted run; keep the rest as it is.
            out.push_str(inner);
            rest = "";
            break;
        };
        match keep {
            Some(k) => {
                out.push_str(&inner[..k]);
                out.push('…');
                changed = true;
            }
            None => out.push_str(&inner[..close]),
        }
        out.push(quote_char);
        rest = &inner[close + quote_char.len_utf8()..];
    }
    out.push_str(rest);
    if changed {
        Cow::Owned(out)
    } else {
        Cow::Borrowed(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_values_are_quoted_whole() {
        assert_eq!(quote("preStop"), "\"preStop\"");
        assert_eq!(quote(""), "\"\"");
        assert_eq!(key("preStopp"), "preStopp");
    }

    #[test]
    fn long_values_keep_their_first_line_and_forty_characters() {
        let passwd =
            "root:x:0:0:root:/root:/bin/bash daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin";
        assert_eq!(
            quote(passwd),
            "\"root:x:0:0:root:/root:/bin/bash daemon:x…\""
        );
        assert_eq!(quote("one\ntwo"), "\"one…\"");
        assert_eq!(quote(&"é".repeat(100)), format!("\"{}…\"", "é".repeat(40)));
        assert_eq!(key(&"k".repeat(50)), format!("{}…", "k".repeat(40)));
    }

    #[test]
    fn quoted_runs_in_messages_are_cut_without_splitting_escapes() {
        let long = "x".repeat(100);
        assert_eq!(
            shorten_quoted(&format!(
                "invalid type: string \"{long}\", expected an integer"
            )),
            format!(
                "invalid type: string \"{}…\", expected an integer",
                "x".repeat(40)
            )
        );
        assert_eq!(
            shorten_quoted(&format!("unknown variant `{long}`, expected `A` or `B`")),
            format!("unknown variant `{}…`, expected `A` or `B`", "x".repeat(40))
        );
        let escaped = format!("{:?}", format!("{}\"\u{7}{long}", "y".repeat(39)));
        let message = format!("bad {escaped} here");
        assert_eq!(
            shorten_quoted(&message),
            format!("bad \"{}\\\"…\" here", "y".repeat(39))
        );
        let short = "invalid type: string \"30\", expected an integer";
        assert!(matches!(shorten_quoted(short), Cow::Borrowed(_)));
        let unclosed = format!("a \"{long}");
        assert_eq!(shorten_quoted(&unclosed), unclosed);
    }
}
