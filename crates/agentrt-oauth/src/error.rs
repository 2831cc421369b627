//! What can go wrong reaching an issuer.

/// Why an issuer's metadata or keys cannot be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OAuthError {
    /// A URL that may not be used: not HTTPS nor loopback HTTP, with a
    /// user or password, too long, or not a URL.
    #[error("{field} {url:?}: {detail}")]
    Url {
        /// The setting or document field it came from.
        field: String,
        /// The URL as given.
        url: String,
        /// What is wrong.
        detail: String,
    },
    /// A fetch failed: no answer, a status other than 200, too large, not
    /// JSON.
    #[error("{url}: {detail}")]
    Fetch {
        /// What was fetched.
        url: String,
        /// What failed.
        detail: String,
    },
    /// The issuer's metadata does not hold: another issuer named, no key
    /// set, no usable key.
    #[error("{0}")]
    Metadata(String),
}
