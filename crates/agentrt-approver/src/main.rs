//! `agentrt-approver`: deciding agentrt approvals from elsewhere. See the
//! library's documentation and `--help`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use agentrt_approver::serve::{ServeOptions, login_link, serve};
use clap::{Parser, Subcommand};

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
    /// Serve the signed webhook over a database until SIGINT or SIGTERM.
    Serve {
        /// The database the runs are in (it must exist): a SQLite file, or
        /// a `postgres://` URL.
        #[arg(long)]
        db: PathBuf,
        /// Where to listen.
        #[arg(long, default_value = "127.0.0.1:8787")]
        listen: SocketAddr,
        /// A file only you can read, holding the shared secret (32 bytes or more).
        #[arg(long)]
        secret_file: PathBuf,
        /// Listen on an address other than loopback (the webhook is plain
        /// HTTP: put TLS in front).
        #[arg(long)]
        allow_remote: bool,
    },
    /// Print a one-time login link for the approval page of a run.
    LoginLink {
        /// The same secret file `serve` uses.
        #[arg(long)]
        secret_file: PathBuf,
        /// The server's address as the browser reaches it.
        #[arg(long, default_value = "http://127.0.0.1:8787")]
        base: String,
        /// The run whose page the link opens.
        #[arg(long)]
        run: String,
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
    let (db, listen, secret_file, allow_remote) = match cli.command {
        Command::Serve {
            db,
            listen,
            secret_file,
            allow_remote,
        } => (db, listen, secret_file, allow_remote),
        Command::LoginLink {
            secret_file,
            base,
            run,
            by,
            minutes,
        } => {
            let by = by
                .or_else(|| std::env::var("USER").ok())
                .filter(|b| !b.is_empty())
                .unwrap_or_else(|| "operator".to_owned());
            let ttl = std::time::Duration::from_secs(minutes.saturating_mul(60));
            return match login_link(&secret_file, &base, &by, &run, ttl) {
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
    let options = ServeOptions {
        db,
        listen,
        secret_file,
        allow_remote,
    };
    // Before any thread allocates: SQLite's statement memory stays ours.
    agentrt::store::retain_freed_heap();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("agentrt-approver: error: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
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
