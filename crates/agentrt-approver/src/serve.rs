//! `agentrt-approver serve`: the webhook and the approval page over a
//! database, on a loopback address unless another is asked for
//! explicitly, until a signal; `login-link` for the page (a link to one
//! run's page, for one person, usable once). The binary reads the
//! database from `--db` or else `$AGENTRT_DB` (a URL with a password
//! belongs there: a command line is visible to every process), and sets
//! the page's cookie `Secure` with `--cookie-secure` or
//! `--trust-forwarded-proto HEADER` ([`ServeOptions::secure_cookie`]).
//!
//! `--keys FILE` gives the webhook per-approver keys
//! ([`Keys`], read by [`read_keys`]): a request
//! naming one decides as its approver only. The shared secret
//! (`--secret-file`) stays required: the page's login links are signed
//! with it, and it still checks webhook requests that name no key.

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use agentrt::private_file::Others;

use crate::StoreApprover;
use crate::signature::{Keys, Secret, ShortSecret};
use crate::webhook::{WebhookConfig, router};

/// What `serve` needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeOptions {
    /// The database (it must exist): a SQLite file, or a `postgres://` URL
    /// (see [`StoreApprover::open`](crate::StoreApprover::open)).
    pub db: PathBuf,
    /// Where to listen (`127.0.0.1:0` picks a free port).
    pub listen: SocketAddr,
    /// A file only its owner can read, holding the shared secret.
    pub secret_file: PathBuf,
    /// A file only its owner can read, holding the webhook's per-approver
    /// keys (`--keys`; see [`read_keys`]).
    pub keys_file: Option<PathBuf>,
    /// Approvers sign in at an OpenID provider (`--oidc`; see
    /// [`OidcConfig`](crate::OidcConfig)).
    pub oidc_file: Option<PathBuf>,
    /// Listen on an address other than loopback.
    pub allow_remote: bool,
    /// When the page's session cookie is `Secure`.
    pub secure_cookie: crate::page::SecureCookie,
    /// Notify from the same process (`--notify-config`, `--notify-cursor`):
    /// the page links are signed with the server's secret.
    pub notify: Option<NotifyFiles>,
}

/// The files of a notifier run inside `serve`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifyFiles {
    /// The configuration (`notify.json`).
    pub config: PathBuf,
    /// Where the position is kept.
    pub cursor: PathBuf,
}

/// Why `serve` did not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A non-loopback address without the flag that allows it.
    #[error(
        "{0} is not a loopback address; the webhook is plain HTTP: put TLS in front and pass --allow-remote to listen there"
    )]
    Remote(SocketAddr),
    /// The secret file cannot be used.
    #[error("secret file {path}: {detail}")]
    SecretFile {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The keys file cannot be used.
    #[error("keys file {path}: {detail}")]
    KeysFile {
        /// The file.
        path: PathBuf,
        /// What is wrong (naming the key, never showing a secret).
        detail: String,
    },
    /// The sign-in configuration, its client secret, or the provider
    /// cannot be used.
    #[error("oidc {path}: {detail}")]
    Oidc {
        /// The configuration file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The database cannot be opened.
    #[error(transparent)]
    Approver(#[from] crate::ApproverError),
    /// The notifier run inside the server failed (the server stopped).
    #[error(transparent)]
    Notify(#[from] crate::notify::NotifyError),
    /// A console link asked to last longer than a console link may.
    #[error("a console link may last {minutes} minutes at most")]
    LinkTooLong {
        /// The most it may last, in minutes.
        minutes: u64,
    },
    /// Binding or serving failed.
    #[error("listening on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// The error.
        source: std::io::Error,
    },
}

/// The most bytes a secret file may hold.
const MAX_SECRET_FILE: u64 = 64 << 10;

/// The secret in `path`: a regular file of the current user that no one
/// else may read or write, holding at least 32 bytes (surrounding
/// whitespace left out: a line from `openssl rand -hex 32` is one).
pub fn read_secret(path: &Path) -> Result<Secret, ServeError> {
    let refused = |detail: String| ServeError::SecretFile {
        path: path.to_owned(),
        detail,
    };
    let bytes = agentrt::private_file::read(path, Others::NoAccess, MAX_SECRET_FILE)
        .map_err(|e| refused(e.detail()))?;
    let trimmed = bytes.trim_ascii();
    Secret::new(trimmed).map_err(|ShortSecret(n)| {
        refused(format!(
            "it holds {n} bytes; at least 32 are needed (openssl rand -hex 32 makes a good one)"
        ))
    })
}

/// The most bytes a keys file may hold.
const MAX_KEYS_FILE: u64 = 1 << 20;

/// The per-approver keys in `path`: a regular file of the current user
/// that no one else may read or write (as the secret file), at most
/// 1 MiB, JSON of the shape [`Keys::parse`] reads, every key valid (a
/// refusal names the key).
pub fn read_keys(path: &Path) -> Result<Keys, ServeError> {
    let refused = |detail: String| ServeError::KeysFile {
        path: path.to_owned(),
        detail,
    };
    let bytes = agentrt::private_file::read(path, Others::NoAccess, MAX_KEYS_FILE)
        .map_err(|e| refused(e.detail()))?;
    Keys::parse(&bytes).map_err(|e| refused(e.to_string()))
}

/// The sign-in configuration in `path` and its client's secret (the file
/// it names: owner-only, as the secret file; its first line).
pub fn read_oidc(path: &Path) -> Result<(crate::OidcConfig, String), ServeError> {
    let refused = |detail: String| ServeError::Oidc {
        path: path.to_owned(),
        detail,
    };
    let config = crate::OidcConfig::read(path).map_err(refused)?;
    let file = &config.client_secret_file;
    let bytes =
        agentrt::private_file::read(file, Others::NoAccess, MAX_SECRET_FILE).map_err(|e| {
            refused(format!(
                "client_secret_file {}: {}",
                file.display(),
                e.detail()
            ))
        })?;
    let secret = String::from_utf8(bytes.trim_ascii().to_vec())
        .ok()
        .filter(|s| !s.is_empty() && !s.contains(['\n', '\r']))
        .ok_or_else(|| {
            refused(format!(
                "client_secret_file {}: one line of UTF-8 text",
                file.display()
            ))
        })?;
    Ok((config, secret))
}

/// Serves the webhook until `shutdown` completes; `bound` is told the
/// address once it listens.
pub async fn serve(
    options: &ServeOptions,
    bound: impl FnOnce(SocketAddr),
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    if !options.listen.ip().is_loopback() && !options.allow_remote {
        return Err(ServeError::Remote(options.listen));
    }
    // The secret and keys files and the database are read on the
    // blocking pool.
    let (db, secret_file) = (options.db.clone(), options.secret_file.clone());
    let keys_file = options.keys_file.clone();
    let oidc_file = options.oidc_file.clone();
    let notify_config = options.notify.as_ref().map(|n| n.config.clone());
    let (secret, keys, oidc, approver, notify_config) = tokio::task::spawn_blocking(move || {
        let secret = read_secret(&secret_file)?;
        let keys = match keys_file {
            Some(path) => {
                let keys = read_keys(&path)?;
                keys.check_apart_from(&secret)
                    .map_err(|e| ServeError::KeysFile {
                        path,
                        detail: e.to_string(),
                    })?;
                keys
            }
            None => Keys::default(),
        };
        let oidc = oidc_file.map(|path| read_oidc(&path)).transpose()?;
        let notify_config = match notify_config {
            Some(path) => Some(
                crate::notify::NotifyConfig::load(&path)
                    .map_err(crate::notify::NotifyError::from)?,
            ),
            None => None,
        };
        let approver = StoreApprover::open(&db, None)?;
        Ok::<_, ServeError>((secret, keys, oidc, approver, notify_config))
    })
    .await
    .map_err(|e| ServeError::Listen {
        addr: options.listen,
        source: std::io::Error::other(e.to_string()),
    })??;
    // The provider's metadata and keys, fetched before anything is
    // served: a sign-in that cannot work is said at start.
    let oidc = match (oidc, &options.oidc_file) {
        (Some((config, client_secret)), Some(path)) => Some(Arc::new(
            crate::oidc::Provider::connect(config, client_secret)
                .await
                .map_err(|detail| ServeError::Oidc {
                    path: path.clone(),
                    detail,
                })?,
        )),
        _ => None,
    };
    let console = approver.store().clone();
    let approver: Arc<dyn crate::Approver> = Arc::new(approver);
    let page = crate::page::router(crate::page::PageConfig {
        secure_cookie: options.secure_cookie.clone(),
        console: Some(console),
        oidc,
        ..crate::page::PageConfig::new(Arc::clone(&approver), secret.clone())
    });
    let secret_for_links = secret.clone();
    let config = WebhookConfig {
        keys,
        ..WebhookConfig::new(approver, secret)
    };
    let listen_error = |source| ServeError::Listen {
        addr: options.listen,
        source,
    };
    let listener = tokio::net::TcpListener::bind(options.listen)
        .await
        .map_err(listen_error)?;
    bound(listener.local_addr().map_err(listen_error)?);
    let app = page.merge(router(config));
    // One signal stops both the server and the notifier; a notifier that
    // fails stops the server too (a silent dead notifier tells nobody).
    let (stopping, stop) = agentrt::cancel_pair();
    let notifier = match (notify_config, &options.notify) {
        (Some(config), Some(files)) => {
            let notifier = crate::notify::Notifier::new(config, Some(secret_for_links))?;
            let (db, cursor, stop, stopping) = (
                options.db.clone(),
                files.cursor.clone(),
                stopping.signal(),
                stopping.clone(),
            );
            Some(tokio::spawn(async move {
                let ran = notifier.run(db, cursor, false, &stop).await;
                stopping.cancel();
                ran
            }))
        }
        _ => None,
    };
    let stop_all = stopping.clone();
    let served = axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(async move {
        tokio::select! {
            () = shutdown => stopping.cancel(),
            () = stop.cancelled() => {}
        }
    })
    .await
    .map_err(listen_error);
    // The server may have ended on its own (an error): the notifier too.
    stop_all.cancel();
    if let Some(notifier) = notifier {
        notifier.await.map_err(|e| ServeError::Listen {
            addr: options.listen,
            source: std::io::Error::other(e.to_string()),
        })??;
    }
    served
}

/// A login link for the page at `base` (the server's address as the
/// browser reaches it) that signs `by` in to `run`'s page (and no other
/// run's), usable once within `ttl`.
pub fn login_link(
    secret_file: &Path,
    base: &str,
    by: &str,
    run: &str,
    ttl: std::time::Duration,
) -> Result<String, ServeError> {
    let secret = read_secret(secret_file)?;
    mint_login_link(&secret, base, by, run, ttl).map_err(|e| ServeError::SecretFile {
        path: secret_file.to_owned(),
        detail: format!("no randomness for the link: {e}"),
    })
}

/// A console login link for the page at `base`: it signs `by` in to the
/// console (every run read, every pending approval decided as on a run's
/// page), usable once within `ttl`, which may not pass
/// [`CONSOLE_LINK_SECONDS`](crate::page::CONSOLE_LINK_SECONDS).
pub fn console_login_link(
    secret_file: &Path,
    base: &str,
    by: &str,
    ttl: std::time::Duration,
) -> Result<String, ServeError> {
    let longest = crate::page::CONSOLE_LINK_SECONDS.unsigned_abs();
    if ttl.as_secs() > longest {
        return Err(ServeError::LinkTooLong {
            minutes: longest / 60,
        });
    }
    let secret = read_secret(secret_file)?;
    let nonce = fresh_nonce().map_err(|e| ServeError::SecretFile {
        path: secret_file.to_owned(),
        detail: format!("no randomness for the link: {e}"),
    })?;
    let token = crate::page::console_token(&secret, by, expiry(ttl), &nonce);
    Ok(format!(
        "{}/ui/login?token={token}",
        base.trim_end_matches('/')
    ))
}

/// Unix seconds `ttl` from now.
fn expiry(ttl: std::time::Duration) -> i64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    i64::try_from(now.saturating_add(ttl.as_secs())).unwrap_or(i64::MAX)
}

/// A link's nonce: 16 random bytes, in hex.
fn fresh_nonce() -> Result<String, getrandom::Error> {
    let mut nonce = [0u8; 16];
    getrandom::fill(&mut nonce)?;
    Ok(crate::signature::hex(&nonce))
}

/// [`login_link`] with the secret at hand: a fresh nonce each call.
pub fn mint_login_link(
    secret: &Secret,
    base: &str,
    by: &str,
    run: &str,
    ttl: std::time::Duration,
) -> Result<String, getrandom::Error> {
    let nonce = fresh_nonce()?;
    let token = crate::page::login_token(secret, by, run, expiry(ttl), &nonce);
    Ok(format!(
        "{}/ui/login?token={token}",
        base.trim_end_matches('/')
    ))
}
