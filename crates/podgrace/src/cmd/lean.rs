//! The flag splitter of the lean start-up paths (`init` and `prestop-wait` run as PID 1 or as a
//! preStop hook, where clap's start-up cost and memory count): their plain forms only, anything
//! else goes through clap for its messages.

use std::ffi::OsString;

/// Flags as given, in order: `(flag, None)` for a switch, `(flag, Some(value))` for a flag with
/// a value (`--flag value` or `--flag=value`); `rest` is what follows `--` or the first
/// positional argument when the verb takes a command, else empty.
pub struct LeanFlags<'a> {
    pub flags: Vec<(&'a str, Option<String>)>,
    pub rest: &'a [OsString],
}

/// Splits `args` (without the verb). `switches` are the flags that take no value.
/// `None` for anything clap should answer instead: a non-UTF-8 argument, a value given to a
/// switch, a missing value, or a value that starts with `-`.
pub fn split<'a>(
    args: &'a [OsString],
    switches: &[&str],
    takes_command: bool,
) -> Option<LeanFlags<'a>> {
    let mut flags = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let s = args[i].to_str()?;
        if takes_command && (s == "--" || !s.starts_with('-')) {
            let from = if s == "--" { i + 1 } else { i };
            return Some(LeanFlags {
                flags,
                rest: &args[from..],
            });
        }
        let (flag, inline) = match s.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (s, None),
        };
        if switches.contains(&flag) {
            if inline.is_some() {
                return None;
            }
            flags.push((flag, None));
            i += 1;
            continue;
        }
        let value = match inline {
            Some(v) => v,
            None => {
                i += 1;
                let v = args.get(i)?.to_str()?;
                if v.starts_with('-') {
                    return None;
                }
                v.to_string()
            }
        };
        flags.push((flag, Some(value)));
        i += 1;
    }
    Some(LeanFlags {
        flags,
        rest: &args[args.len()..],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn switches_values_and_the_command() {
        let a = os(&[
            "-g",
            "--map=TERM=QUIT",
            "--drain-delay",
            "5s",
            "--",
            "nginx",
            "-g",
        ]);
        let l = split(&a, &["-g"], true).unwrap();
        assert_eq!(
            l.flags,
            vec![
                ("-g", None),
                ("--map", Some("TERM=QUIT".into())),
                ("--drain-delay", Some("5s".into()))
            ]
        );
        assert_eq!(l.rest, &os(&["nginx", "-g"])[..]);
        let b = os(&["--quiet", "2s", "cmd"]);
        let l = split(&b, &[], true).unwrap();
        assert_eq!(l.rest, &os(&["cmd"])[..]);
    }

    #[test]
    fn anything_unplain_goes_to_clap() {
        assert!(split(&os(&["--endpoints=yes"]), &["--endpoints"], false).is_none());
        assert!(split(&os(&["--quiet"]), &[], false).is_none());
        assert!(split(&os(&["--quiet", "-1s"]), &[], false).is_none());
        let b = os(&["--max", "3s"]);
        let l = split(&b, &[], false).unwrap();
        assert!(l.rest.is_empty());
    }
}
