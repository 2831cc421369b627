//! `notify.json`: where notices go, read from a file only its owner may
//! read (it holds a chat webhook's URL, itself a credential, and names the
//! secret files), checked whole before anything is sent.

use std::path::{Path, PathBuf};
use std::time::Duration;

use agentrt::private_file::Others;
use serde::Deserialize;

use crate::signature::{Secret, ShortSecret};

/// The most bytes a configuration file may hold.
const MAX_CONFIG_FILE: u64 = 1 << 20;
/// The most bytes a secret or password file may hold.
const MAX_SECRET_FILE: u64 = 64 << 10;
/// The longest a page link may stay usable: a week.
const MAX_LINK_MINUTES: u64 = 7 * 24 * 60;
/// The most destinations (channels, and each e-mail recipient) a file may
/// name: each notice waits for every one of them.
const MAX_DESTINATIONS: usize = 64;

/// Why a notify configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file cannot be read as a private file.
    #[error("{0}")]
    File(String),
    /// Its JSON is not a configuration.
    #[error("notify config {path}: {detail}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, and where.
        detail: String,
    },
}

/// What to tell, and where (`docs/notify.md` in the repository describes
/// the file).
///
/// ```
/// use agentrt_approver::notify::NotifyConfig;
///
/// let config = NotifyConfig::parse(
///     br#"{"channels": [{"kind": "chat", "url": "http://127.0.0.1:9/hook"}]}"#,
///     std::path::Path::new("."),
/// )?;
/// assert_eq!(config.destinations(), 1);
/// assert!(NotifyConfig::parse(
///     br#"{"channels": [{"kind": "chat", "url": "http://chat.example/hook"}]}"#,
///     std::path::Path::new("."),
/// ).is_err()); // plain HTTP leaves this machine only as https
/// # Ok::<(), agentrt_approver::notify::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct NotifyConfig {
    /// One-time links to the approval page, when set.
    pub page: Option<PageLinks>,
    /// Tell each run that ends FAILED too.
    pub run_failed: bool,
    /// Remind once when an approval still waits this long after it was
    /// requested.
    pub remind_after: Option<Duration>,
    /// Where notices go, in order.
    pub channels: Vec<Channel>,
}

/// How notices link to the approval page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageLinks {
    /// The server's address as a reader's browser reaches it.
    pub base: String,
    /// How long a link stays usable (once).
    pub ttl: Duration,
}

/// One place notices go.
#[derive(Debug, Clone)]
pub enum Channel {
    /// A JSON POST signed like the inbound webhook's requests.
    Webhook(WebhookChannel),
    /// A chat's incoming webhook (Slack, Teams): `{"text": …}`.
    Chat(ChatChannel),
    /// E-mail over SMTP, a message per recipient.
    Email(EmailChannel),
}

/// A signed webhook.
#[derive(Debug, Clone)]
pub struct WebhookChannel {
    /// Where to POST (https, or http to a loopback host).
    pub url: reqwest::Url,
    /// Its own secret: a receiver that can check notices cannot sign
    /// decisions with it.
    pub secret: Secret,
    /// Who the page link signs in (recorded as the decider).
    pub link_as: String,
}

/// A chat's incoming webhook.
#[derive(Clone)]
pub struct ChatChannel {
    /// The hook's URL, a credential: never printed.
    pub url: reqwest::Url,
    /// Who the page link signs in.
    pub link_as: String,
}

impl std::fmt::Debug for ChatChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatChannel")
            .field("host", &self.url.host_str())
            .field("link_as", &self.link_as)
            .finish_non_exhaustive()
    }
}

/// How an SMTP connection is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Security {
    /// TLS from the first byte (port 465 unless given).
    Tls,
    /// Plain, then STARTTLS, required (port 587 unless given).
    Starttls,
    /// No TLS: only to a loopback host (port 25 unless given).
    None,
}

/// E-mail over SMTP.
#[derive(Clone)]
pub struct EmailChannel {
    /// The server.
    pub host: String,
    /// Its port.
    pub port: u16,
    /// TLS, STARTTLS, or none (loopback only).
    pub security: Security,
    /// The sender.
    pub from: lettre::message::Mailbox,
    /// The recipients: each gets a message, and a link that signs in as
    /// the recipient's address.
    pub to: Vec<lettre::message::Mailbox>,
    /// Login, when the server asks for one: user and password.
    pub login: Option<(String, String)>,
    /// The PEM of the only CA trusted for this server (a private relay),
    /// instead of the platform's roots.
    pub ca_pem: Option<Vec<u8>>,
}

impl std::fmt::Debug for EmailChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmailChannel")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("security", &self.security)
            .field("to", &self.to.len())
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileShape {
    #[serde(default)]
    page: Option<PageShape>,
    #[serde(default)]
    run_failed: bool,
    #[serde(default)]
    remind_after_seconds: Option<u64>,
    channels: Vec<ChannelShape>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PageShape {
    base: String,
    #[serde(default = "default_link_minutes")]
    link_minutes: u64,
}

fn default_link_minutes() -> u64 {
    60
}

#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum ChannelShape {
    Webhook(WebhookShape),
    Chat(ChatShape),
    Email(EmailShape),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WebhookShape {
    url: String,
    secret_file: PathBuf,
    #[serde(default)]
    link_as: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ChatShape {
    url: String,
    #[serde(default)]
    link_as: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EmailShape {
    host: String,
    #[serde(default)]
    port: Option<u16>,
    security: Security,
    from: String,
    to: Vec<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password_file: Option<PathBuf>,
    #[serde(default)]
    ca_file: Option<PathBuf>,
}

/// `true` for a host name or address that stays on this machine.
fn is_loopback(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.eq_ignore_ascii_case("localhost")
        || bare
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

impl NotifyConfig {
    /// Reads the configuration at `path`: a regular file of the current
    /// user that no one else may read or write, at most 1 MiB; relative
    /// secret and password files are resolved beside it, and are held to
    /// the same rule.
    pub fn load(path: &Path) -> Result<NotifyConfig, ConfigError> {
        let bytes = agentrt::private_file::read(path, Others::NoAccess, MAX_CONFIG_FILE)
            .map_err(|e| ConfigError::File(format!("notify config {}", e.detail())))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        NotifyConfig::parse(&bytes, dir).map_err(|e| match e {
            ConfigError::Invalid { detail, .. } => ConfigError::Invalid {
                path: path.to_owned(),
                detail,
            },
            other => other,
        })
    }

    /// The configuration `bytes` hold; relative files are resolved in
    /// `dir`.
    pub fn parse(bytes: &[u8], dir: &Path) -> Result<NotifyConfig, ConfigError> {
        let invalid = |detail: String| ConfigError::Invalid {
            path: PathBuf::from("(text)"),
            detail,
        };
        let shape: FileShape = serde_json::from_slice(bytes).map_err(|e| invalid(e.to_string()))?;
        let page = match shape.page {
            None => None,
            Some(page) => {
                let base = page.base.trim_end_matches('/').to_owned();
                let url = reqwest::Url::parse(&base)
                    .map_err(|e| invalid(format!("page.base {:?}: {e}", page.base)))?;
                if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
                    return Err(invalid(format!(
                        "page.base {:?}: an http or https address of the server is expected",
                        page.base
                    )));
                }
                if page.link_minutes == 0 || page.link_minutes > MAX_LINK_MINUTES {
                    return Err(invalid(format!(
                        "page.link_minutes: {} is not between 1 and {MAX_LINK_MINUTES} (a week)",
                        page.link_minutes
                    )));
                }
                Some(PageLinks {
                    base,
                    ttl: Duration::from_secs(page.link_minutes * 60),
                })
            }
        };
        let remind_after = match shape.remind_after_seconds {
            None => None,
            Some(0) => return Err(invalid("remind_after_seconds: 0 is not a wait".into())),
            Some(s) => Some(Duration::from_secs(s)),
        };
        if shape.channels.is_empty() {
            return Err(invalid(
                "channels: none is given; name a webhook, chat or email".into(),
            ));
        }
        let mut channels = Vec::with_capacity(shape.channels.len());
        for (n, channel) in shape.channels.into_iter().enumerate() {
            let at = |detail: String| invalid(format!("channels[{n}]: {detail}"));
            channels.push(match channel {
                ChannelShape::Webhook(w) => Channel::Webhook(WebhookChannel {
                    url: web_url(&w.url).map_err(at)?,
                    secret: read_secret(&dir.join(&w.secret_file)).map_err(at)?,
                    link_as: link_as(w.link_as, "webhook").map_err(at)?,
                }),
                ChannelShape::Chat(c) => Channel::Chat(ChatChannel {
                    url: web_url(&c.url).map_err(at)?,
                    link_as: link_as(c.link_as, "chat").map_err(at)?,
                }),
                ChannelShape::Email(e) => Channel::Email(email(e, dir).map_err(at)?),
            });
        }
        let config = NotifyConfig {
            page,
            run_failed: shape.run_failed,
            remind_after,
            channels,
        };
        if config.destinations() > MAX_DESTINATIONS {
            return Err(invalid(format!(
                "{} destinations (channels and e-mail recipients); at most {MAX_DESTINATIONS}",
                config.destinations()
            )));
        }
        Ok(config)
    }

    /// How many places each notice goes: one per webhook and chat, one
    /// per e-mail recipient.
    pub fn destinations(&self) -> usize {
        self.channels
            .iter()
            .map(|c| match c {
                Channel::Email(e) => e.to.len(),
                _ => 1,
            })
            .sum()
    }
}

/// A webhook address: https, or http to a loopback host (a notice holds
/// requests and links that must not cross a network in the clear).
fn web_url(text: &str) -> Result<reqwest::Url, String> {
    let url = reqwest::Url::parse(text).map_err(|e| format!("url: {e}"))?;
    let host = url.host_str().unwrap_or_default();
    match url.scheme() {
        "https" if !host.is_empty() => Ok(url),
        "http" if is_loopback(host) => Ok(url),
        "http" => Err(format!(
            "url: plain http to {host:?} would cross a network in the clear; use https"
        )),
        other => Err(format!("url: the scheme {other:?} is not http or https")),
    }
}

fn link_as(given: Option<String>, default: &str) -> Result<String, String> {
    let name = given.unwrap_or_else(|| default.to_owned());
    if name.trim().is_empty() || name.len() > 256 || name.chars().any(char::is_control) {
        return Err(format!(
            "link_as {name:?}: a name of 1 to 256 bytes without control characters"
        ));
    }
    Ok(name)
}

fn read_private(path: &Path, what: &str) -> Result<Vec<u8>, String> {
    agentrt::private_file::read(path, Others::NoAccess, MAX_SECRET_FILE)
        .map_err(|e| format!("{what} {}", e.detail()))
        .map(|bytes| bytes.trim_ascii().to_vec())
}

fn read_secret(path: &Path) -> Result<Secret, String> {
    let bytes = read_private(path, "secret_file")?;
    Secret::new(&bytes).map_err(|ShortSecret(n)| {
        format!(
            "secret_file {}: it holds {n} bytes; at least 32 are needed",
            path.display()
        )
    })
}

fn email(shape: EmailShape, dir: &Path) -> Result<EmailChannel, String> {
    let host = shape.host.trim().to_owned();
    if host.is_empty() {
        return Err("host: empty".into());
    }
    if shape.security == Security::None && !is_loopback(&host) {
        return Err(format!(
            "security \"none\" to {host:?} would send requests and links in the clear; use \"starttls\" or \"tls\" (\"none\" is for a relay on this machine)"
        ));
    }
    let port = shape.port.unwrap_or(match shape.security {
        Security::Tls => 465,
        Security::Starttls => 587,
        Security::None => 25,
    });
    let mailbox = |field: &str, text: &str| {
        text.parse::<lettre::message::Mailbox>()
            .map_err(|e| format!("{field} {text:?}: {e}"))
    };
    let from = mailbox("from", &shape.from)?;
    if shape.to.is_empty() {
        return Err("to: no recipient".into());
    }
    let to = shape
        .to
        .iter()
        .map(|t| mailbox("to", t))
        .collect::<Result<Vec<_>, _>>()?;
    let login = match (shape.username, shape.password_file) {
        (None, None) => None,
        (Some(user), Some(file)) => {
            let password = read_private(&dir.join(&file), "password_file")?;
            let password = String::from_utf8(password)
                .map_err(|_| format!("password_file {}: not UTF-8", file.display()))?;
            Some((user, password))
        }
        _ => return Err("username and password_file go together".into()),
    };
    let ca_pem = match shape.ca_file {
        None => None,
        Some(_) if shape.security == Security::None => {
            return Err("ca_file needs security \"tls\" or \"starttls\"".into());
        }
        Some(file) => Some(
            // A CA certificate is public, but whoever may change it
            // decides whom the mail goes to.
            agentrt::private_file::read(&dir.join(&file), Others::MayRead, MAX_CONFIG_FILE)
                .map_err(|e| format!("ca_file {}", e.detail()))?,
        ),
    };
    Ok(EmailChannel {
        host,
        port,
        security: shape.security,
        from,
        to,
        login,
        ca_pem,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(json: &str) -> String {
        NotifyConfig::parse(json.as_bytes(), Path::new("."))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn plain_http_and_plain_smtp_are_for_this_machine_only() {
        assert!(
            refused(r#"{"channels":[{"kind":"chat","url":"http://10.0.0.1/x"}]}"#)
                .contains("in the clear")
        );
        let email = r#"{"channels":[{"kind":"email","host":"smtp.example","security":"none","from":"a@b.c","to":["d@e.f"]}]}"#;
        assert!(refused(email).contains("in the clear"));
        let local = email.replace("smtp.example", "127.0.0.1");
        let config = NotifyConfig::parse(local.as_bytes(), Path::new(".")).unwrap();
        let Channel::Email(e) = &config.channels[0] else {
            panic!("an email channel")
        };
        assert_eq!((e.port, e.security), (25, Security::None));
        assert!(refused(r#"{"channels":[{"kind":"chat","url":"ftp://x/y"}]}"#).contains("scheme"));
    }

    #[test]
    fn unknown_fields_missing_channels_and_bad_values_are_refused_with_where() {
        assert!(refused(r#"{"channels":[],"x":1}"#).contains("unknown field"));
        assert!(refused(r#"{"channels":[]}"#).contains("none is given"));
        assert!(
            refused(r#"{"channels":[{"kind":"chat","url":"https://h/x","extra":1}]}"#)
                .contains("unknown field")
        );
        assert!(refused(r#"{"channels":[{"kind":"pager"}]}"#).contains("unknown variant"));
        assert!(refused(
            r#"{"channels":[{"kind":"email","host":"h","security":"tls","from":"not an address","to":["d@e.f"]}]}"#
        )
        .contains("channels[0]: from"));
        assert!(refused(
            r#"{"channels":[{"kind":"email","host":"h","security":"tls","from":"a@b.c","to":[]}]}"#
        )
        .contains("no recipient"));
        assert!(refused(
            r#"{"channels":[{"kind":"email","host":"h","security":"tls","from":"a@b.c","to":["d@e.f"],"username":"u"}]}"#
        )
        .contains("go together"));
        assert!(refused(
            r#"{"page":{"base":"http://127.0.0.1:1","link_minutes":0},"channels":[{"kind":"chat","url":"https://h/x"}]}"#
        )
        .contains("link_minutes"));
        assert!(
            refused(
                r#"{"remind_after_seconds":0,"channels":[{"kind":"chat","url":"https://h/x"}]}"#
            )
            .contains("remind_after_seconds")
        );
    }

    #[test]
    fn a_webhook_needs_a_private_secret_of_32_bytes() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("out.secret");
        std::fs::write(&secret, "short\n").unwrap();
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
        let json =
            r#"{"channels":[{"kind":"webhook","url":"https://h/x","secret_file":"out.secret"}]}"#;
        let e = NotifyConfig::parse(json.as_bytes(), dir.path()).unwrap_err();
        assert!(e.to_string().contains("at least 32"), "{e}");
        std::fs::write(&secret, "k".repeat(40)).unwrap();
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = NotifyConfig::parse(json.as_bytes(), dir.path()).unwrap_err();
        assert!(e.to_string().contains("secret_file"), "{e}");
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
        let config = NotifyConfig::parse(json.as_bytes(), dir.path()).unwrap();
        assert_eq!(config.destinations(), 1);
    }

    #[test]
    fn a_config_file_others_may_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.json");
        std::fs::write(
            &path,
            r#"{"channels":[{"kind":"chat","url":"https://hooks.example/T/B/secret"}]}"#,
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = NotifyConfig::load(&path).unwrap_err().to_string();
        assert!(e.contains("notify config"), "{e}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let config = NotifyConfig::load(&path).unwrap();
        // The chat hook's URL is a credential: Debug shows its host only.
        assert!(!format!("{config:?}").contains("secret"));
    }
}
