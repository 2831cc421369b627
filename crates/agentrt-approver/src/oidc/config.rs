//! The sign-in configuration (`serve --oidc FILE`): which OpenID provider
//! approvers sign in at, as which client, and which group may decide.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The group whose members may decide unless `"approvers_group"` names
/// another.
pub const DEFAULT_APPROVERS_GROUP: &str = "approvers";
/// The claim groups are read from unless `"groups_claim"` names another.
pub const DEFAULT_GROUPS_CLAIM: &str = "groups";
/// The largest configuration file read.
const MAX_CONFIG_BYTES: u64 = 64 * 1024;

/// How approvers sign in with OpenID Connect.
///
/// ```
/// use std::path::Path;
/// let config = agentrt_approver::OidcConfig::parse(br#"{
///   "issuer": "https://id.example.com",
///   "client_id": "agentrt-approver",
///   "client_secret_file": "approver-client.secret",
///   "redirect_url": "https://approve.example.com/ui/oidc/callback"
/// }"#, Path::new("/etc/agentrt/oidc.json")).unwrap();
/// assert_eq!(config.approvers_group, "approvers");
/// assert_eq!(config.client_secret_file, Path::new("/etc/agentrt/approver-client.secret"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OidcConfig {
    /// The provider (`iss` of the ID tokens, exactly).
    pub issuer: String,
    /// This server's client id at the provider (the ID token's `aud`).
    pub client_id: String,
    /// An owner-only file holding the client's secret (resolved against
    /// the configuration's directory).
    pub client_secret_file: PathBuf,
    /// Where the provider sends the browser back: this server's
    /// `/ui/oidc/callback`, as the browser reaches it.
    pub redirect_url: String,
    /// Only members of this group may decide.
    pub approvers_group: String,
    /// The ID token claim holding the groups.
    pub groups_claim: String,
    /// Scopes asked for beside `openid`.
    pub scopes: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OidcFile {
    issuer: String,
    client_id: String,
    client_secret_file: String,
    redirect_url: String,
    approvers_group: Option<String>,
    groups_claim: Option<String>,
    #[serde(default)]
    scopes: Vec<String>,
}

impl OidcConfig {
    /// Parses the file's bytes; `path` names it in errors and is where
    /// the secret file's path resolves from.
    ///
    /// # Errors
    ///
    /// The first problem, in words: an unknown field, an issuer or
    /// redirect URL that is neither HTTPS nor loopback HTTP, a redirect
    /// not ending in `/ui/oidc/callback`, an empty client id or group.
    pub fn parse(bytes: &[u8], path: &Path) -> Result<OidcConfig, String> {
        let file: OidcFile =
            serde_json::from_slice(bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        let bad = |detail: String| format!("{}: {detail}", path.display());
        agentrt_oauth::web_url("issuer", &file.issuer).map_err(|e| bad(e.to_string()))?;
        let redirect = agentrt_oauth::web_url("redirect_url", &file.redirect_url)
            .map_err(|e| bad(e.to_string()))?;
        if redirect.path() != super::CALLBACK_PATH || redirect.query().is_some() {
            return Err(bad(format!(
                "redirect_url {:?}: this server's {} (no query)",
                file.redirect_url,
                super::CALLBACK_PATH
            )));
        }
        if file.client_id.is_empty() || file.client_id.chars().any(char::is_control) {
            return Err(bad("client_id: empty or with a control character".into()));
        }
        let approvers_group = file
            .approvers_group
            .unwrap_or_else(|| DEFAULT_APPROVERS_GROUP.to_owned());
        let groups_claim = file
            .groups_claim
            .unwrap_or_else(|| DEFAULT_GROUPS_CLAIM.to_owned());
        if approvers_group.is_empty() || groups_claim.is_empty() {
            return Err(bad("approvers_group and groups_claim: not empty".into()));
        }
        for scope in &file.scopes {
            if scope.is_empty() || scope.bytes().any(|b| !(0x21..=0x7e).contains(&b)) {
                return Err(bad(format!("scopes: {scope:?} is not a scope")));
            }
        }
        let secret = Path::new(&file.client_secret_file);
        let client_secret_file = if secret.is_absolute() {
            secret.to_owned()
        } else {
            path.parent().unwrap_or(Path::new("")).join(secret)
        };
        Ok(OidcConfig {
            issuer: file.issuer,
            client_id: file.client_id,
            client_secret_file,
            redirect_url: file.redirect_url,
            approvers_group,
            groups_claim,
            scopes: file.scopes,
        })
    }

    /// Reads and parses the file at `path` (owner-only, as the secret
    /// file: it names the client's secret).
    ///
    /// # Errors
    ///
    /// The file cannot be read (or others may write it), or
    /// [`OidcConfig::parse`]'s.
    pub fn read(path: &Path) -> Result<OidcConfig, String> {
        let bytes = agentrt::private_file::read(
            path,
            agentrt::private_file::Others::MayRead,
            MAX_CONFIG_BYTES,
        )
        .map_err(|e| format!("{}: {}", path.display(), e.detail()))?;
        OidcConfig::parse(&bytes, path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<OidcConfig, String> {
        OidcConfig::parse(text.as_bytes(), Path::new("/etc/o.json"))
    }

    #[test]
    fn bad_settings_are_refused_naming_them() {
        let base = |issuer: &str, redirect: &str| {
            format!(
                r#"{{"issuer": "{issuer}", "client_id": "c", "client_secret_file": "s",
                     "redirect_url": "{redirect}"}}"#
            )
        };
        let good = "http://127.0.0.1:8080/ui/oidc/callback";
        assert!(parse(&base("http://127.0.0.1:4000", good)).is_ok());
        for (text, says) in [
            (base("http://id.example.com", good), "issuer"),
            (base("https://id.example.com", "http://approve.example.com/ui/oidc/callback"), "redirect_url"),
            (base("https://id.example.com", "https://approve.example.com/elsewhere"), "/ui/oidc/callback"),
            (base("https://id.example.com", "https://approve.example.com/ui/oidc/callback?x=1"), "no query"),
            (r#"{"issuer": "https://id.example.com"}"#.to_owned(), "missing field"),
            (
                r#"{"issuer": "https://id.example.com", "client_id": "", "client_secret_file": "s", "redirect_url": "https://a.example/ui/oidc/callback"}"#.to_owned(),
                "client_id",
            ),
            (
                r#"{"issuer": "https://id.example.com", "client_id": "c", "client_secret_file": "s", "redirect_url": "https://a.example/ui/oidc/callback", "audience": "x"}"#.to_owned(),
                "unknown field",
            ),
        ] {
            let err = parse(&text).unwrap_err();
            assert!(err.contains(says), "{text}: {err}");
        }
    }
}
