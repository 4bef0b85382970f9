//! The Kubernetes version whose behaviour a rule reproduces.
//!
//! Behaviour that changed between releases is a [`KubeVersion`] argument, never a fork of the code.

use std::fmt;
use std::str::FromStr;

/// A Kubernetes minor release, such as `1.28`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KubeVersion {
    /// Major version; always 1 for the releases podgrace models.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

impl KubeVersion {
    /// The newest release podgrace models (matches the `k8s-openapi` feature it is built with).
    pub const LATEST: KubeVersion = KubeVersion::new(1, 37);
    /// The oldest release podgrace accepts.
    pub const OLDEST: KubeVersion = KubeVersion::new(1, 18);

    /// Builds `major.minor`.
    pub const fn new(major: u32, minor: u32) -> Self {
        KubeVersion { major, minor }
    }

    /// `true` if `self` is `major.minor` or newer.
    pub const fn at_least(self, major: u32, minor: u32) -> bool {
        self.major > major || (self.major == major && self.minor >= minor)
    }
}

impl Default for KubeVersion {
    fn default() -> Self {
        KubeVersion::LATEST
    }
}

impl fmt::Display for KubeVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Why a version string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseVersionError {
    /// Not of the form `1.N` (an optional leading `v` and a patch part are accepted).
    #[error("invalid Kubernetes version {0:?}: expected MAJOR.MINOR, such as 1.28")]
    Syntax(String),
    /// Outside the releases podgrace models.
    #[error("Kubernetes version {0} is not modelled: podgrace covers {min} to {max}", min = KubeVersion::OLDEST, max = KubeVersion::LATEST)]
    OutOfRange(KubeVersion),
}

impl FromStr for KubeVersion {
    type Err = ParseVersionError;

    /// Parses `1.28`, `v1.28` or `1.28.3` (the patch level is ignored).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let syntax = || ParseVersionError::Syntax(s.to_string());
        // A number as Kubernetes writes it: digits, no sign, no leading zero.
        let number = |p: Option<&str>| -> Result<u32, ParseVersionError> {
            match p {
                Some(p)
                    if !p.is_empty()
                        && p.bytes().all(|b| b.is_ascii_digit())
                        && (p == "0" || !p.starts_with('0')) =>
                {
                    p.parse().map_err(|_| syntax())
                }
                _ => Err(syntax()),
            }
        };
        let mut parts = s.strip_prefix('v').unwrap_or(s).split('.');
        let major = number(parts.next())?;
        let minor = number(parts.next())?;
        if let Some(patch) = parts.next() {
            number(Some(patch))?;
        }
        if parts.next().is_some() {
            return Err(syntax());
        }
        let v = KubeVersion::new(major, minor);
        if v < KubeVersion::OLDEST || v > KubeVersion::LATEST {
            return Err(ParseVersionError::OutOfRange(v));
        }
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_common_spellings() {
        assert_eq!(
            "1.28".parse::<KubeVersion>().unwrap(),
            KubeVersion::new(1, 28)
        );
        assert_eq!(
            "v1.21".parse::<KubeVersion>().unwrap(),
            KubeVersion::new(1, 21)
        );
        assert_eq!(
            "1.30.4".parse::<KubeVersion>().unwrap(),
            KubeVersion::new(1, 30)
        );
        assert!(matches!(
            "1".parse::<KubeVersion>(),
            Err(ParseVersionError::Syntax(_))
        ));
        for bad in [
            "1.028", "01.28", " 1.28", "1.28 ", "+1.28", "1.28.x", "1..28", "vv1.28",
        ] {
            assert!(bad.parse::<KubeVersion>().is_err(), "{bad:?}");
        }
        assert!(matches!(
            "1.x".parse::<KubeVersion>(),
            Err(ParseVersionError::Syntax(_))
        ));
        assert!(matches!(
            "1.99".parse::<KubeVersion>(),
            Err(ParseVersionError::OutOfRange(_))
        ));
    }

    #[test]
    fn ordering_follows_minor() {
        assert!(KubeVersion::new(1, 28).at_least(1, 28));
        assert!(!KubeVersion::new(1, 27).at_least(1, 28));
        assert!(KubeVersion::new(1, 30) > KubeVersion::new(1, 9));
    }
}
