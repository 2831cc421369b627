//! `agentrt-approver`: deciding agentrt approvals from elsewhere. See the
//! library's documentation and `--help`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use agentrt_approver::serve::{ServeOptions, serve};
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
        /// The database the runs are in (it must exist).
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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let Command::Serve {
        db,
        listen,
        secret_file,
        allow_remote,
    } = cli.command;
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
