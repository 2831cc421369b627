//! Where the store connects and how: a connection string split into what
//! tokio-postgres parses and the TLS settings agentrt handles itself.
//!
//! `sslmode=require`, `verify-ca` and `verify-full` all mean one thing
//! here: TLS, with the server's certificate checked against trusted roots
//! and its name against the host connected to (libpq's `verify-full`).
//! agentrt never uses a TLS connection it has not verified, so `require`
//! is stricter than libpq's (which encrypts without checking), and
//! `prefer` (tokio-postgres's default) and `disable` connect without TLS.
//! The roots are the system's, or the PEM certificates of
//! `sslrootcert=PATH` (`sslrootcert=system`: the system's, as libpq 16).

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use agentrt::{DatabaseErrorKind, Error, Result};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use tokio_postgres::config::SslMode;
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::{Client, Config, Connection, NoTls, Socket};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::pg_error;

/// The connection options agentrt reads itself (tokio-postgres refuses
/// them), and those it does not support, named in the refusal.
const ROOT_CERT: &str = "sslrootcert";
const SSL_MODE: &str = "sslmode";
const UNSUPPORTED: [&str; 4] = ["sslcert", "sslkey", "sslpassword", "sslcrl"];

/// The sessions' `application_name` when the string names none.
pub(crate) const APPLICATION_NAME: &str = "agentrt";

/// A database to connect to: the server's settings and, when the
/// connection string asks for TLS, the verifying connector.
#[derive(Clone)]
pub(crate) struct Endpoint {
    pub(crate) config: Config,
    tls: Option<MakeRustlsConnect>,
    /// How long the server may stay silent at the network level (see
    /// [`Endpoint::give_up_on_silence_after`]).
    silence: Option<Duration>,
}

/// tokio-postgres's keepalive idle time when the string sets none.
const DEFAULT_KEEPALIVES_IDLE: Duration = Duration::from_secs(2 * 60 * 60);

/// The TLS a connection string asks for, before its roots are loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Tls {
    /// No TLS (`disable`, `prefer`, or no `sslmode`).
    Off,
    /// Verified TLS against the system's roots, or a PEM file's.
    Verified { roots: Option<PathBuf> },
}

/// A connection with its I/O not yet running, on either transport.
pub(crate) enum Opened {
    // Boxed, both: their states differ in size several times over.
    Plain(
        Client,
        Box<Connection<Socket, tokio_postgres::tls::NoTlsStream>>,
    ),
    Tls(
        Client,
        Box<Connection<Socket, <MakeRustlsConnect as MakeTlsConnect<Socket>>::Stream>>,
    ),
}

impl Opened {
    /// Runs the connection's I/O as a task of the current runtime (it ends
    /// when the client is dropped or the server goes); the client.
    pub(crate) fn spawn_io(self) -> Client {
        match self {
            Opened::Plain(client, connection) => {
                tokio::spawn(*connection);
                client
            }
            Opened::Tls(client, connection) => {
                tokio::spawn(*connection);
                client
            }
        }
    }
}

impl Endpoint {
    /// Parses `location` (a `postgres://` URL or libpq's `key=value`
    /// pairs) and loads the roots its TLS settings name. Errors never
    /// quote the string (it may hold a password).
    pub(crate) fn parse(location: &str) -> Result<Endpoint> {
        let (rest, tls) = split(location)?;
        let mut config = Config::from_str(&rest).map_err(|_| crate::not_a_url())?;
        // So an operator tells the store's sessions apart in
        // `pg_stat_activity`; a name the string gives wins.
        if config.get_application_name().is_none() {
            config.application_name(APPLICATION_NAME);
        }
        let tls = match tls {
            Tls::Off => None,
            Tls::Verified { roots } => {
                config.ssl_mode(SslMode::Require);
                Some(connector(roots.as_deref())?)
            }
        };
        Ok(Endpoint {
            config,
            tls,
            silence: None,
        })
    }

    /// Gives up on a server that stays silent for `limit` at the network
    /// level (a partition, a frozen host), where TCP alone would wait
    /// minutes or hours: a connection attempt ends after it (its socket
    /// connect, TLS and the startup exchange together); over TCP, data the
    /// server has not acknowledged for `limit` closes the connection
    /// (`TCP_USER_TIMEOUT`), and an idle connection is probed after half
    /// of it (keepalives), so a path that died is noticed. The string's
    /// own positive `connect_timeout`, `tcp_user_timeout` and
    /// `keepalives_*` win; `keepalives=0` keeps probes off.
    pub(crate) fn give_up_on_silence_after(&mut self, limit: Duration) {
        let second = Duration::from_secs(1);
        let limit = limit.max(Duration::from_millis(1));
        self.silence = Some(limit);
        if self.config.get_connect_timeout().is_none() {
            self.config.connect_timeout(limit);
        }
        if self.config.get_tcp_user_timeout().is_none() {
            self.config.tcp_user_timeout(limit);
        }
        // Keepalive times are whole seconds to the kernel.
        if self.config.get_keepalives_idle() == DEFAULT_KEEPALIVES_IDLE {
            self.config.keepalives_idle((limit / 2).max(second));
        }
        if self.config.get_keepalives_interval().is_none() {
            self.config.keepalives_interval((limit / 6).max(second));
        }
        if self.config.get_keepalives_retries().is_none() {
            self.config.keepalives_retries(3);
        }
    }

    /// How long the server may stay silent before a connection is given
    /// up ([`Endpoint::give_up_on_silence_after`]); `None`: as long as TCP
    /// lets it.
    pub(crate) fn silence_limit(&self) -> Option<Duration> {
        self.silence
    }

    /// Has the server end a session whose transaction sits idle for
    /// `timeout` (a startup option, after any the string gives, so it
    /// wins; at least a millisecond: 0 would turn it off).
    pub(crate) fn end_idle_transactions_after(&mut self, timeout: std::time::Duration) {
        let millis = timeout.as_millis().clamp(1, i32::MAX as u128);
        let setting = format!("-c idle_in_transaction_session_timeout={millis}");
        let options = match self.config.get_options() {
            Some(given) if !given.trim().is_empty() => format!("{given} {setting}"),
            _ => setting,
        };
        self.config.options(&options);
    }

    /// Whether connections are made over verified TLS.
    #[cfg(test)]
    pub(crate) fn uses_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Connects, within the silence limit for each host the string names;
    /// the caller runs the connection's I/O.
    pub(crate) async fn open(&self) -> Result<Opened> {
        let connecting = async {
            Ok::<_, tokio_postgres::Error>(match &self.tls {
                None => {
                    let (client, connection) = self.config.connect(NoTls).await?;
                    Opened::Plain(client, Box::new(connection))
                }
                Some(tls) => {
                    let (client, connection) = self.config.connect(tls.clone()).await?;
                    Opened::Tls(client, Box::new(connection))
                }
            })
        };
        let Some(limit) = self.silence else {
            return connecting.await.map_err(|e| pg_error(&e));
        };
        let hosts = u32::try_from(self.config.get_hosts().len().max(1)).unwrap_or(u32::MAX);
        match tokio::time::timeout(limit.saturating_mul(hosts), connecting).await {
            Ok(opened) => opened.map_err(|e| pg_error(&e)),
            Err(_) => Err(silent(limit, "connecting")),
        }
    }
}

/// One `key=value` option of a connection string: its key, its value
/// (unquoted, unescaped) and its text as written.
struct ConnOption<'a> {
    key: &'a str,
    value: String,
    text: &'a str,
}

/// `location` without the options agentrt reads itself, and the TLS
/// they ask for.
pub(crate) fn split(location: &str) -> Result<(String, Tls)> {
    let url = crate::is_postgres_url(location);
    let (head, options) = if url {
        match location.split_once('?') {
            Some((head, query)) => (head, query_options(query)?),
            None => (location, Vec::new()),
        }
    } else {
        ("", pair_options(location)?)
    };
    let mut kept = Vec::with_capacity(options.len());
    let mut mode = None;
    let mut roots = None;
    for option in options {
        if UNSUPPORTED.contains(&option.key) {
            return Err(refused(format!(
                "the connection option {} is not supported (client certificates are not)",
                option.key
            )));
        }
        match option.key {
            SSL_MODE => mode = Some(option.value),
            ROOT_CERT => roots = Some(option.value),
            _ => kept.push(option.text),
        }
    }
    let tls = match mode.as_deref() {
        None | Some("disable" | "prefer") if roots.is_none() => Tls::Off,
        None | Some("disable" | "prefer") => {
            return Err(refused(format!(
                "{ROOT_CERT} needs {SSL_MODE}=verify-full (or require, verify-ca): \
                 without it the connection would not use TLS"
            )));
        }
        Some("require" | "verify-ca" | "verify-full") => Tls::Verified {
            roots: roots.filter(|r| r != "system").map(PathBuf::from),
        },
        Some(other) => {
            return Err(refused(format!(
                "{SSL_MODE}={other} is not one of disable, prefer, require, verify-ca, verify-full"
            )));
        }
    };
    let rest = match (url, kept.is_empty()) {
        (true, true) => head.to_owned(),
        (true, false) => format!("{head}?{}", kept.join("&")),
        (false, _) => kept.join(" "),
    };
    Ok((rest, tls))
}

/// A URL's query options (`a=1&b=2`), their values %-decoded.
fn query_options(query: &str) -> Result<Vec<ConnOption<'_>>> {
    query
        .split('&')
        .map(|text| {
            let (key, value) = text.split_once('=').unwrap_or((text, ""));
            Ok(ConnOption {
                key,
                value: decoded(key, value)?,
                text,
            })
        })
        .collect()
}

/// libpq's `key=value` pairs, separated by spaces; a value may be quoted
/// (`'a b'`, with `\'` and `\\` escapes), and `=` may have spaces around
/// it.
fn pair_options(s: &str) -> Result<Vec<ConnOption<'_>>> {
    let bytes = s.as_bytes();
    let skip_spaces = |mut i: usize| {
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        i
    };
    let mut options = Vec::new();
    let mut i = skip_spaces(0);
    while i < bytes.len() {
        let start = i;
        while i < bytes.len() && bytes[i] != b'=' && !bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        let key = &s[start..i];
        i = skip_spaces(i);
        if bytes.get(i) != Some(&b'=') {
            return Err(crate::not_a_url());
        }
        i = skip_spaces(i + 1);
        let mut value = Vec::new();
        if bytes.get(i) == Some(&b'\'') {
            i += 1;
            loop {
                match bytes.get(i) {
                    None => return Err(crate::not_a_url()),
                    Some(b'\'') => break,
                    Some(b'\\') => {
                        value.extend(bytes.get(i + 1));
                        i += 2;
                    }
                    Some(&b) => {
                        value.push(b);
                        i += 1;
                    }
                }
            }
            i += 1;
        } else {
            while i < bytes.len() && !bytes[i].is_ascii_whitespace() {
                value.push(bytes[i]);
                i += 1;
            }
        }
        options.push(ConnOption {
            key,
            value: String::from_utf8(value).map_err(|_| crate::not_a_url())?,
            text: &s[start..i.min(s.len())],
        });
        i = skip_spaces(i);
    }
    Ok(options)
}

/// A URL query value with its `%XX` escapes decoded; errors name only
/// the option (`key`).
fn decoded(key: &str, value: &str) -> Result<String> {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| refused(format!("the option {key} has a broken %-escape")))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| refused(format!("the option {key} is not UTF-8")))
}

/// The verifying connector: the PEM certificates in `roots`, or the
/// system's.
fn connector(roots: Option<&std::path::Path>) -> Result<MakeRustlsConnect> {
    let mut store = rustls::RootCertStore::empty();
    match roots {
        Some(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(|certs| certs.collect::<std::result::Result<Vec<_>, _>>())
                .map_err(|e| {
                    refused(format!(
                        "{ROOT_CERT} {}: cannot read its certificates: {e}",
                        path.display()
                    ))
                })?;
            let (added, _) = store.add_parsable_certificates(certs);
            if added == 0 {
                return Err(refused(format!(
                    "{ROOT_CERT} {}: no certificate in it",
                    path.display()
                )));
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            store.add_parsable_certificates(found.certs);
            if store.is_empty() {
                return Err(refused(format!(
                    "no trusted certificate in the system's store: name the server's CA with {ROOT_CERT}=PATH"
                )));
            }
        }
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| refused(format!("TLS: {e}")))?
        .with_root_certificates(store)
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

/// The error for a server that did not answer within `limit` while the
/// store was `doing` something.
pub(crate) fn silent(limit: Duration, doing: &str) -> Error {
    Error::Database {
        kind: DatabaseErrorKind::Io,
        message: format!("PostgreSQL: no answer from the server within {limit:?} while {doing}"),
    }
}

fn refused(message: String) -> Error {
    Error::Database {
        kind: DatabaseErrorKind::Other,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tls_of(location: &str) -> Tls {
        split(location).map(|(_, tls)| tls).expect("parses")
    }

    #[test]
    fn without_a_tls_mode_the_string_is_left_as_it_is() {
        for s in [
            "postgres://u:p@db/agentrt",
            "postgres://u@db/agentrt?connect_timeout=5",
            "host=/tmp port=5432 user=u dbname=d",
        ] {
            assert_eq!(split(s).expect("parses"), (s.to_owned(), Tls::Off));
        }
        assert_eq!(tls_of("postgres://db/a?sslmode=prefer"), Tls::Off);
        assert_eq!(tls_of("host=db sslmode=disable"), Tls::Off);
    }

    #[test]
    fn every_tls_mode_verifies_against_the_named_roots_or_the_systems() {
        let (rest, tls) =
            split("postgres://u:p@db:5433/a?sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem&application_name=x")
                .expect("parses");
        assert_eq!(rest, "postgres://u:p@db:5433/a?application_name=x");
        assert_eq!(
            tls,
            Tls::Verified {
                roots: Some(PathBuf::from("/etc/ca.pem"))
            }
        );
        let (rest, tls) =
            split("host=db user=u sslmode=require sslrootcert=/etc/ca.pem").expect("parses");
        assert_eq!(rest, "host=db user=u");
        assert_eq!(
            tls,
            Tls::Verified {
                roots: Some(PathBuf::from("/etc/ca.pem"))
            }
        );
        assert_eq!(
            tls_of("postgres://db/a?sslmode=verify-ca"),
            Tls::Verified { roots: None }
        );
        assert_eq!(
            tls_of("postgres://db/a?sslmode=require&sslrootcert=system"),
            Tls::Verified { roots: None }
        );
    }

    #[test]
    fn quoted_values_keep_their_text_and_spaces_around_the_equals_sign_are_allowed() {
        let (rest, tls) =
            split("host=db password='a  b\\'c' sslmode = verify-full sslrootcert='/x y/ca.pem'")
                .expect("parses");
        assert_eq!(rest, "host=db password='a  b\\'c'");
        assert_eq!(
            tls,
            Tls::Verified {
                roots: Some(PathBuf::from("/x y/ca.pem"))
            }
        );
    }

    #[test]
    fn roots_without_a_tls_mode_and_unknown_modes_are_refused_without_the_password() {
        for s in [
            "postgres://u:s3cret@db/a?sslrootcert=/ca.pem",
            "postgres://u:s3cret@db/a?sslmode=prefer&sslrootcert=/ca.pem",
            "postgres://u:s3cret@db/a?sslmode=allow",
            "postgres://u:s3cret@db/a?sslmode=verify-full&sslcert=/me.pem",
            "postgres://u:s3cret@db/a?sslmode=verify-full&sslrootcert=%zz",
            "host=db password=s3cret sslkey=/me.key",
        ] {
            let e = split(s).expect_err(s).to_string();
            assert!(!e.contains("s3cret"), "{e}");
            assert!(e.contains("ssl"), "{s}: {e}");
        }
        for s in [
            "host=db password='s3cret sslmode=require",
            "host=db password",
        ] {
            let e = split(s).expect_err(s).to_string();
            assert!(!e.contains("s3cret"), "{e}");
            assert!(e.contains("not a PostgreSQL connection string"), "{s}: {e}");
        }
    }

    #[test]
    fn a_roots_file_without_certificates_is_refused_naming_it() {
        let dir = tempfile::tempdir().expect("dir");
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").expect("write");
        let missing = dir.path().join("missing.pem");
        for path in [&empty, &missing] {
            let location = format!(
                "postgres://u:s3cret@db/a?sslmode=verify-full&sslrootcert={}",
                path.display()
            );
            let e = Endpoint::parse(&location)
                .err()
                .expect("refused")
                .to_string();
            assert!(e.contains(&path.display().to_string()), "{e}");
            assert!(!e.contains("s3cret"), "{e}");
        }
    }

    #[test]
    fn the_idle_transaction_timeout_comes_after_the_options_given() {
        let mut plain = Endpoint::parse("postgres://u@db/a").expect("parses");
        plain.end_idle_transactions_after(std::time::Duration::from_millis(1500));
        assert_eq!(
            plain.config.get_options(),
            Some("-c idle_in_transaction_session_timeout=1500")
        );
        let mut given = Endpoint::parse("host=db options='-c search_path=x'").expect("parses");
        given.end_idle_transactions_after(std::time::Duration::ZERO);
        assert_eq!(
            given.config.get_options(),
            Some("-c search_path=x -c idle_in_transaction_session_timeout=1")
        );
    }

    #[test]
    fn the_silence_limit_bounds_connecting_unacknowledged_data_and_idle_probes() {
        let secs = Duration::from_secs;
        let mut plain = Endpoint::parse("postgres://u@db/a").expect("parses");
        assert_eq!(plain.silence_limit(), None);
        plain.give_up_on_silence_after(secs(30));
        assert_eq!(plain.silence_limit(), Some(secs(30)));
        assert_eq!(plain.config.get_connect_timeout(), Some(&secs(30)));
        assert_eq!(plain.config.get_tcp_user_timeout(), Some(&secs(30)));
        assert!(plain.config.get_keepalives());
        assert_eq!(plain.config.get_keepalives_idle(), secs(15));
        assert_eq!(plain.config.get_keepalives_interval(), Some(secs(5)));
        assert_eq!(plain.config.get_keepalives_retries(), Some(3));
        // Keepalive times are whole seconds, at least one.
        let mut short = Endpoint::parse("postgres://u@db/a").expect("parses");
        short.give_up_on_silence_after(Duration::from_millis(500));
        assert_eq!(short.config.get_keepalives_idle(), secs(1));
        assert_eq!(short.config.get_keepalives_interval(), Some(secs(1)));
        assert_eq!(
            short.config.get_tcp_user_timeout(),
            Some(&Duration::from_millis(500))
        );
    }

    #[test]
    fn the_strings_own_network_settings_win_over_the_silence_limit() {
        let mut given = Endpoint::parse(
            "host=db connect_timeout=3 tcp_user_timeout=4 keepalives_idle=60 \
             keepalives_interval=7 keepalives_retries=9",
        )
        .expect("parses");
        given.give_up_on_silence_after(Duration::from_secs(30));
        assert_eq!(
            given.config.get_connect_timeout(),
            Some(&Duration::from_secs(3))
        );
        assert_eq!(
            given.config.get_tcp_user_timeout(),
            Some(&Duration::from_secs(4))
        );
        assert_eq!(given.config.get_keepalives_idle(), Duration::from_secs(60));
        assert_eq!(
            given.config.get_keepalives_interval(),
            Some(Duration::from_secs(7))
        );
        assert_eq!(given.config.get_keepalives_retries(), Some(9));
        let mut off = Endpoint::parse("host=db keepalives=0").expect("parses");
        off.give_up_on_silence_after(Duration::from_secs(30));
        assert!(!off.config.get_keepalives());
    }

    #[test]
    fn a_server_that_never_answers_fails_the_open_after_the_silence_limit() {
        // Connections complete in the kernel's queue and are never
        // accepted: the startup exchange gets no answer, as from a frozen
        // server (TCP alone would wait for ever).
        let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = silent.local_addr().expect("addr").port();
        let (done, outcome) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let opened = crate::open_with(
                &format!("postgres://u:s3cret@127.0.0.1:{port}/a"),
                crate::PgOptions {
                    network_timeout: Some(Duration::from_millis(300)),
                    ..crate::PgOptions::default()
                },
            );
            let _ = done.send(opened.err().map(|e| e.to_string()));
        });
        let refused = outcome
            .recv_timeout(Duration::from_secs(20))
            .expect("still connecting after 20 s")
            .expect("refused");
        assert!(
            refused.contains("no answer from the server within 300ms while connecting"),
            "{refused}"
        );
        assert!(!refused.contains("s3cret"), "{refused}");
        drop(silent);
    }

    #[test]
    fn a_tls_mode_makes_verified_tls_connections_and_no_mode_plain_ones() {
        let plain = Endpoint::parse("postgres://u@db/a").expect("parses");
        assert!(!plain.uses_tls());
        let ca = concat!(env!("CARGO_MANIFEST_DIR"), "/src/testdata/ca.pem");
        let tls = Endpoint::parse(&format!(
            "postgres://u@db/a?sslmode=require&sslrootcert={ca}"
        ))
        .expect("parses");
        assert!(tls.uses_tls());
        assert_eq!(tls.config.get_ssl_mode(), SslMode::Require);
    }
}
