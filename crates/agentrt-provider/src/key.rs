//! [`ApiKey`]: a credential that never prints.

use std::fmt;

/// An API key. `Debug`, `Display` and `Serialize` show `[redacted]` (or
/// `""` when the key is empty), so a configuration or a model that is
/// logged, printed or serialised never leaks it. The only way to the text is
/// [`ApiKey::expose`].
///
/// ```
/// use agentrt_provider::ApiKey;
///
/// let key = ApiKey::new("sk-secret");
/// assert_eq!(format!("{key:?}"), "[redacted]");
/// assert_eq!(key.to_string(), "[redacted]");
/// assert_eq!(serde_json::to_string(&key).unwrap(), r#""[redacted]""#);
/// assert_eq!(format!("{:?}", ApiKey::default()), r#""""#);
/// assert_eq!(key.expose(), "sk-secret");
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> ApiKey {
        ApiKey(key.into())
    }

    /// Whether the key is empty (no key).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The key's text, for the one header that carries it.
    #[must_use]
    pub fn expose(&self) -> &str {
        &self.0
    }

    fn shown(&self) -> &'static str {
        if self.0.is_empty() {
            "\"\""
        } else {
            "[redacted]"
        }
    }
}

impl From<&str> for ApiKey {
    fn from(key: &str) -> ApiKey {
        ApiKey::new(key)
    }
}

impl From<String> for ApiKey {
    fn from(key: String) -> ApiKey {
        ApiKey(key)
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.shown())
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.shown())
    }
}

impl serde::Serialize for ApiKey {
    /// Serialises as `"[redacted]"`, or `""` when empty: never the key.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(if self.0.is_empty() { "" } else { "[redacted]" })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_redacts() {
        let key = ApiKey::from("sk-ant-xyz".to_owned());
        for shown in [
            format!("{key:?}"),
            format!("{key:#?}"),
            format!("{key}"),
            serde_json::to_string(&key).unwrap_or_default(),
        ] {
            assert!(!shown.contains("sk-ant"), "{shown}");
            assert!(shown.contains("[redacted]"), "{shown}");
        }
        let empty = ApiKey::default();
        assert_eq!(format!("{empty}"), "\"\"");
        assert_eq!(serde_json::to_string(&empty).unwrap_or_default(), "\"\"");
        assert!(empty.is_empty());
    }
}
