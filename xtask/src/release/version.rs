//! Crate versions as cargo reads them: `MAJOR.MINOR.PATCH` with an
//! optional `-pre.release` part, ordered by SemVer's precedence rules.

use std::cmp::Ordering;
use std::fmt;

/// A version a crate can be released under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    numbers: [u64; 3],
    pre: Vec<String>,
}

impl Version {
    /// Parses `1.2.3` or `1.2.3-rc.1`; build metadata (`+…`) is refused,
    /// since crates.io ignores it when comparing versions.
    pub fn parse(text: &str) -> Result<Self, String> {
        let bad = |why: &str| format!("{text:?} is not a version (MAJOR.MINOR.PATCH[-PRE]): {why}");
        if text.contains('+') {
            return Err(bad("build metadata is not allowed"));
        }
        let (core, pre) = match text.split_once('-') {
            Some((core, pre)) => (core, Some(pre)),
            None => (text, None),
        };
        let parts: Vec<&str> = core.split('.').collect();
        let [major, minor, patch] = parts.as_slice() else {
            return Err(bad("three numbers are needed"));
        };
        let number = |part: &str| {
            let leading_zero = part.len() > 1 && part.starts_with('0');
            if part.is_empty() || leading_zero || !part.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad(&format!("{part:?} is not a number")));
            }
            part.parse::<u64>().map_err(|e| bad(&e.to_string()))
        };
        let numbers = [number(major)?, number(minor)?, number(patch)?];
        let pre = match pre {
            None => Vec::new(),
            Some(pre) => {
                let identifiers: Vec<String> = pre.split('.').map(str::to_owned).collect();
                let valid = |id: &String| {
                    !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                };
                if !identifiers.iter().all(valid) {
                    return Err(bad("the pre-release part is dot-separated [0-9A-Za-z-]+"));
                }
                identifiers
            }
        };
        Ok(Self { numbers, pre })
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [major, minor, patch] = self.numbers;
        write!(f, "{major}.{minor}.{patch}")?;
        if !self.pre.is_empty() {
            write!(f, "-{}", self.pre.join("."))?;
        }
        Ok(())
    }
}

/// One pre-release identifier against another: numbers below words,
/// numbers by value, words in ASCII order.
fn identifier_order(a: &str, b: &str) -> Ordering {
    match (a.parse::<u64>(), b.parse::<u64>()) {
        (Ok(a), Ok(b)) => a.cmp(&b),
        (Ok(_), Err(_)) => Ordering::Less,
        (Err(_), Ok(_)) => Ordering::Greater,
        (Err(_), Err(_)) => a.cmp(b),
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        self.numbers.cmp(&other.numbers).then_with(|| {
            match (self.pre.is_empty(), other.pre.is_empty()) {
                (true, true) => Ordering::Equal,
                // A pre-release comes before its release.
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => {
                    for (a, b) in self.pre.iter().zip(&other.pre) {
                        let order = identifier_order(a, b);
                        if order != Ordering::Equal {
                            return order;
                        }
                    }
                    self.pre.len().cmp(&other.pre.len())
                }
            }
        })
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[cfg(test)]
mod tests {
    use super::Version;

    fn v(text: &str) -> Version {
        Version::parse(text).expect(text)
    }

    #[test]
    fn versions_order_by_semver_precedence() {
        let ordered = [
            "0.1.0",
            "0.1.1",
            "0.2.0-alpha",
            "0.2.0-alpha.1",
            "0.2.0-alpha.beta",
            "0.2.0-beta.2",
            "0.2.0-beta.11",
            "0.2.0-rc.1",
            "0.2.0",
            "0.10.0",
            "1.0.0",
        ];
        for pair in ordered.windows(2) {
            assert!(v(pair[0]) < v(pair[1]), "{} < {}", pair[0], pair[1]);
        }
        assert_eq!(v("0.2.0-rc.1").to_string(), "0.2.0-rc.1");
    }

    #[test]
    fn what_is_not_a_version_is_refused_with_the_reason() {
        for bad in [
            "",
            "1",
            "1.2",
            "1.2.3.4",
            "01.2.3",
            "1.x.3",
            "1.2.3+build",
            "1.2.3-",
            "1.2.3-a..b",
            "1.2.3-ü",
        ] {
            assert!(Version::parse(bad).is_err(), "{bad:?} accepted");
        }
        let why = Version::parse("1.2.3+b").unwrap_err();
        assert!(why.contains("build metadata"), "{why}");
    }
}
