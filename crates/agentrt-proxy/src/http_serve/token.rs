//! The HTTP door's bearer token: read from the operator's file, or made at
//! start in an owner-only file beside the configuration, and required on
//! every request whatever the address (`admit`).
//!
//! The token is never printed: the proxy names the file, and a host reads
//! it from there. A file group or others may read is refused, as the
//! approver's secret is (a token is a password for every allowed tool).

use std::path::{Path, PathBuf};

use crate::error::ProxyError;

/// Random bytes in a made token (hex: twice as many characters).
const TOKEN_BYTES: usize = 32;

/// Where the token comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TokenSource {
    /// The operator's file, read as it is.
    Given(PathBuf),
    /// A new token, written to this file at each start.
    Made(PathBuf),
}

impl TokenSource {
    /// The operator's file when there is one, else the file beside
    /// `config` (`proxy.json` → `proxy.json.token`).
    pub(crate) fn new(given: Option<PathBuf>, config: &Path) -> TokenSource {
        match given {
            Some(path) => TokenSource::Given(path),
            None => {
                let mut name = config.as_os_str().to_owned();
                name.push(".token");
                TokenSource::Made(PathBuf::from(name))
            }
        }
    }

    /// The file holding the token.
    pub(crate) fn path(&self) -> &Path {
        match self {
            TokenSource::Given(path) | TokenSource::Made(path) => path,
        }
    }

    /// The token: read (owner-only, not empty) or made and written.
    /// Blocking: call it off the async workers.
    pub(crate) fn token(&self) -> Result<String, ProxyError> {
        match self {
            TokenSource::Given(path) => read_token(path),
            TokenSource::Made(path) => make_token(path),
        }
    }
}

/// The token in `path`: its text, trimmed, not empty, from a file only its
/// owner may read.
fn read_token(path: &Path) -> Result<String, ProxyError> {
    let bytes = agentrt_mcp::read_secret(path)?;
    let token = String::from_utf8(bytes)
        .map(|t| t.trim().to_owned())
        .map_err(|_| ProxyError::Token {
            path: path.to_owned(),
            detail: "the token is not UTF-8 text".into(),
        })?;
    if token.is_empty() {
        return Err(ProxyError::Token {
            path: path.to_owned(),
            detail: "the file holds no token (one line of text)".into(),
        });
    }
    if token.bytes().any(|b| !b.is_ascii_graphic()) {
        return Err(ProxyError::Token {
            path: path.to_owned(),
            detail: "the token has a space or a control character, which a header cannot carry"
                .into(),
        });
    }
    Ok(token)
}

/// A new random token, written owner-only to `path` (replacing whatever
/// was there, so the last start's token no longer opens anything).
fn make_token(path: &Path) -> Result<String, ProxyError> {
    let mut bytes = [0u8; TOKEN_BYTES];
    getrandom::fill(&mut bytes).map_err(|e| ProxyError::Token {
        path: path.to_owned(),
        detail: format!("no randomness for a token: {e}"),
    })?;
    let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    agentrt_mcp::write_private(path, format!("{token}\n").as_bytes())?;
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_made_token_lies_beside_the_configuration_and_changes_at_each_start() {
        let dir = tempfile::tempdir().unwrap();
        let source = TokenSource::new(None, &dir.path().join("proxy.json"));
        assert_eq!(source.path(), dir.path().join("proxy.json.token"));
        let first = source.token().unwrap();
        assert_eq!(first.len(), 2 * TOKEN_BYTES);
        assert_eq!(read_token(source.path()).unwrap(), first, "written as made");
        let second = source.token().unwrap();
        assert_ne!(first, second, "a new token at each start");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(source.path())
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn a_given_token_must_be_one_printable_word() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t");
        for (text, ok) in [
            ("tok\n", true),
            ("", false),
            ("  \n", false),
            ("a b", false),
        ] {
            agentrt_mcp::write_private(&path, text.as_bytes()).unwrap();
            let read = TokenSource::new(Some(path.clone()), Path::new("c.json")).token();
            assert_eq!(read.is_ok(), ok, "{text:?}: {read:?}");
        }
    }
}
