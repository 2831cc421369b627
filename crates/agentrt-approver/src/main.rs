//! `agentrt-approver`: deciding agentrt approvals from elsewhere. See the
//! library's documentation and `--help`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use agentrt_approver::notify::{Notifier, NotifyConfig};
use agentrt_approver::page::SecureCookie;
use agentrt_approver::serve::{
    NotifyFiles, ServeOptions, console_login_link, login_link, read_secret, serve,
};
use axum::http::HeaderName;
use clap::{Parser, Subcommand};

/// Where `serve` finds the database when `--db` is not given.
const DB_VARIABLE: &str = "AGENTRT_DB";

#[derive(Parser)]
#[command(
    name = "agentrt-approver",
    version,
    about = "Decide agentrt approvals from elsewhere: a signed webhook over a run database"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the signed webhook and the approval page over a database
    /// until SIGINT or SIGTERM.
    Serve {
        /// The database the runs are in (it must exist): a SQLite file, or
        /// a `postgres://` URL. Default: $AGENTRT_DB. A URL with a password
        /// belongs in $AGENTRT_DB, not here: a command line is visible to
        /// every process on the machine.
        #[arg(long, value_name = "PATH|URL")]
        db: Option<PathBuf>,
        /// Where to listen.
        #[arg(long, default_value = "127.0.0.1:8787")]
        listen: SocketAddr,
        /// A file only you can read, holding the shared secret (32 bytes or more).
        #[arg(long)]
        secret_file: PathBuf,
        /// A file only you can read, holding per-approver keys (JSON:
        /// {"keys": {"KEY-ID": {"approver": "NAME", "secret": "32 bytes or
        /// more"}}}): a webhook request naming one in X-Approval-Key-Id is
        /// checked with its secret and decides as its approver only.
        /// --secret-file stays required (the page's links are signed with
        /// it; it still checks requests that name no key).
        #[arg(long, value_name = "FILE")]
        keys: Option<PathBuf>,
        /// Approvers sign in at an OpenID provider (JSON: {"issuer",
        /// "client_id", "client_secret_file", "redirect_url" (this
        /// server's /ui/oidc/callback), "approvers_group" (approvers)}):
        /// /ui/sign-in opens the console to members of the group, and a
        /// decision records the subject and the provider.
        #[arg(long, value_name = "FILE")]
        oidc: Option<PathBuf>,
        /// Listen on an address other than loopback (the webhook is plain
        /// HTTP: put TLS in front).
        #[arg(long)]
        allow_remote: bool,
        /// Mark the page's session cookie Secure (a browser then sends it
        /// over HTTPS only): for a server every browser reaches through
        /// TLS in front of it. Without this flag or the next, the cookie
        /// is not Secure (plain HTTP on loopback).
        #[arg(long, conflicts_with = "trust_forwarded_proto")]
        cookie_secure: bool,
        /// Mark the cookie Secure when the request's header HEADER, set by
        /// the proxy that terminates TLS (e.g. X-Forwarded-Proto), says
        /// https; requests without it get a cookie that is not Secure.
        #[arg(long, value_name = "HEADER", value_parser = header_name)]
        trust_forwarded_proto: Option<HeaderName>,
        /// Also notify, from this process: the notify.json to follow (see
        /// `notify`); its page links are signed with --secret-file.
        #[arg(long, value_name = "FILE", requires = "notify_cursor")]
        notify_config: Option<PathBuf>,
        /// Where the notifier keeps its position.
        #[arg(long, value_name = "FILE", requires = "notify_config")]
        notify_cursor: Option<PathBuf>,
    },
    /// Tell operators what waits for them: follow the database's events
    /// and deliver a notice (signed webhook, chat webhook, e-mail) for
    /// each approval requested, until SIGINT or SIGTERM.
    Notify {
        /// The database the runs are in (it must exist; read only): a
        /// SQLite file, or a `postgres://` URL. Default: $AGENTRT_DB.
        #[arg(long, value_name = "PATH|URL")]
        db: Option<PathBuf>,
        /// Where the position is kept: it moves past an event only once
        /// every destination took its notice.
        #[arg(long)]
        cursor: PathBuf,
        /// The configuration: a file only you can read (it holds chat
        /// webhook URLs and names secret files).
        #[arg(long)]
        config: PathBuf,
        /// The approval page's secret file (the one `serve` uses): needed
        /// when the config sets `page`, to sign the one-time links.
        #[arg(long)]
        secret_file: Option<PathBuf>,
        /// Deliver what is there, then exit.
        #[arg(long)]
        once: bool,
    },
    /// Print a one-time login link for the approval page of a run, or for
    /// the console (every run, every pending approval).
    #[command(group = clap::ArgGroup::new("opens").required(true).args(["run", "console"]))]
    LoginLink {
        /// The same secret file `serve` uses.
        #[arg(long)]
        secret_file: PathBuf,
        /// The server's address as the browser reaches it.
        #[arg(long, default_value = "http://127.0.0.1:8787")]
        base: String,
        /// The run whose page the link opens.
        #[arg(long)]
        run: Option<String>,
        /// A link to the console instead: every run read, every pending
        /// approval decided (at most 60 minutes).
        #[arg(long)]
        console: bool,
        /// Who signs in (recorded as the decider); defaults to $USER.
        #[arg(long)]
        by: Option<String>,
        /// Minutes the link stays usable (once).
        #[arg(long, default_value_t = 10)]
        minutes: u64,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let options = match cli.command {
        Command::Serve {
            db,
            listen,
            secret_file,
            keys,
            oidc,
            allow_remote,
            cookie_secure,
            trust_forwarded_proto,
            notify_config,
            notify_cursor,
        } => {
            let Some(db) = database(db) else {
                return ExitCode::from(2);
            };
            let secure_cookie = match (cookie_secure, trust_forwarded_proto) {
                (true, _) => SecureCookie::Always,
                (false, Some(header)) => SecureCookie::WhenForwardedProto(header),
                (false, None) => SecureCookie::Never,
            };
            ServeOptions {
                db,
                listen,
                secret_file,
                keys_file: keys,
                oidc_file: oidc,
                allow_remote,
                secure_cookie,
                notify: notify_config
                    .zip(notify_cursor)
                    .map(|(config, cursor)| NotifyFiles { config, cursor }),
            }
        }
        Command::Notify {
            db,
            cursor,
            config,
            secret_file,
            once,
        } => {
            let Some(db) = database(db) else {
                return ExitCode::from(2);
            };
            return notify(db, cursor, config, secret_file, once);
        }
        Command::LoginLink {
            secret_file,
            base,
            run,
            console,
            by,
            minutes,
        } => {
            let by = by
                .or_else(|| std::env::var("USER").ok())
                .filter(|b| !b.is_empty())
                .unwrap_or_else(|| "operator".to_owned());
            let ttl = std::time::Duration::from_secs(minutes.saturating_mul(60));
            let link = match (console, run) {
                (true, _) => console_login_link(&secret_file, &base, &by, ttl),
                (false, Some(run)) => login_link(&secret_file, &base, &by, &run, ttl),
                (false, None) => {
                    eprintln!("agentrt-approver: error: login-link needs --run RUN or --console");
                    return ExitCode::from(2);
                }
            };
            return match link {
                Ok(link) => {
                    println!("{link}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("agentrt-approver: error: {e}");
                    ExitCode::from(1)
                }
            };
        }
    };
    let Some(runtime) = runtime() else {
        return ExitCode::from(1);
    };
    let served = runtime.block_on(serve(
        &options,
        |addr| eprintln!("agentrt-approver: listening on http://{addr}"),
        stopped(),
    ));
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("agentrt-approver: error: {e}");
            ExitCode::from(1)
        }
    }
}

/// `--db`, else `$AGENTRT_DB`; `None` (told on stderr) when neither is set.
fn database(given: Option<PathBuf>) -> Option<PathBuf> {
    let db = given.filter(|d| !d.as_os_str().is_empty()).or_else(|| {
        std::env::var_os(DB_VARIABLE)
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
    });
    if db.is_none() {
        eprintln!("agentrt-approver: error: no database: pass --db PATH or set {DB_VARIABLE}");
    }
    db
}

/// A multi-threaded runtime, or the error told on stderr.
fn runtime() -> Option<tokio::runtime::Runtime> {
    // Before any thread allocates: SQLite's statement memory stays ours.
    agentrt::store::retain_freed_heap();
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => Some(runtime),
        Err(e) => {
            eprintln!("agentrt-approver: error: cannot start the runtime: {e}");
            None
        }
    }
}

/// `notify`: the config and the secret read before the runtime starts.
fn notify(
    db: PathBuf,
    cursor: PathBuf,
    config: PathBuf,
    secret_file: Option<PathBuf>,
    once: bool,
) -> ExitCode {
    let failed = |e: &dyn std::fmt::Display| {
        eprintln!("agentrt-approver: error: {e}");
        ExitCode::from(1)
    };
    let config = match NotifyConfig::load(&config) {
        Ok(config) => config,
        Err(e) => return failed(&e),
    };
    let secret = match secret_file.as_deref().map(read_secret).transpose() {
        Ok(secret) => secret,
        Err(e) => return failed(&e),
    };
    let notifier = match Notifier::new(config, secret) {
        Ok(notifier) => notifier,
        Err(e) => return failed(&e),
    };
    let Some(runtime) = runtime() else {
        return ExitCode::from(1);
    };
    let ran = runtime.block_on(async {
        let (handle, stop) = agentrt::cancel_pair();
        tokio::spawn(async move {
            stopped().await;
            handle.cancel();
        });
        notifier.run(db, cursor, once, &stop).await
    });
    match ran {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => failed(&e),
    }
}

/// A header name as given (any case).
fn header_name(text: &str) -> Result<HeaderName, String> {
    HeaderName::from_bytes(text.as_bytes()).map_err(|_| format!("{text:?} is not a header name"))
}

/// Completes at SIGINT or SIGTERM.
async fn stopped() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            // Without handlers the default action still ends the process.
            return std::future::pending().await;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
