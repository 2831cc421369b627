//! The `agentrt-proxy` binary's logic, callable in process: parse, run
//! the command, report an error as one sanitized line, give the exit
//! status.

mod args;
mod usage;

use std::io::Write;

use agentrt::Timestamp;
use agentrt::text::sanitize;

pub use args::{Command, Parsed, RecheckOptions, ServeOptions, UsageError, parse};
pub use usage::USAGE;

use crate::check::check;
use crate::config::read_config;
use crate::pin::pin_all;

/// How the binary runs a command, beyond its command line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunOptions {
    /// The argument prefix that starts this binary as the supervisor of
    /// each stdio server (`agentrt_mcp::own_supervisor()`; see
    /// `agentrt_mcp::supervise`), set on every stdio server of the
    /// configuration; `None`: servers are started as they are.
    pub supervisor: Option<Vec<String>>,
}

/// Runs the command line `args` (without the program name), writing to
/// `out` and `err`; returns the exit status: 0 done, 1 failed, 2 usage.
/// Stdio servers are started without a supervisor (see [`run_with`]).
pub async fn run(args: &[String], out: &mut dyn Write, err: &mut dyn Write) -> u8 {
    run_with(args, &RunOptions::default(), out, err).await
}

/// [`run`] with `options`: the `agentrt-proxy` binary runs every command
/// with its own supervisor.
pub async fn run_with(
    args: &[String],
    options: &RunOptions,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> u8 {
    let (command, config) = match parse(args) {
        Ok(Parsed::Help) => {
            let _ = err.write_all(USAGE.as_bytes());
            return 0;
        }
        Ok(Parsed::Run { command, config }) => (command, config),
        Err(UsageError(message)) => {
            let _ = writeln!(err, "agentrt-proxy: {}", sanitize(&message));
            let _ = err.write_all(USAGE.as_bytes());
            return 2;
        }
    };
    let result = async {
        let mut config = read_config(&config)?;
        if options.supervisor.is_some() {
            for entry in &mut config.servers {
                if matches!(entry.server.endpoint, agentrt_mcp::Endpoint::Command(_)) {
                    entry.server.supervisor = options.supervisor.clone();
                }
            }
        }
        match command {
            Command::Pin => pin_all(&config, Timestamp::now(), out).await.map(|()| true),
            Command::Check => check(&config, out).await,
            Command::Tools => crate::cedar::print_offer(&config, out).map(|()| true),
            Command::Serve(ServeOptions { http: None, .. }) => {
                crate::serve::serve_stdio(config, err).await.map(|()| true)
            }
            Command::Serve(ServeOptions {
                http: Some(addr),
                token_file,
                allowed_hosts,
                allowed_origins,
                max_sessions,
                max_requests_per_session,
            }) => {
                let defaults = crate::http_serve::HttpOptions::new(addr);
                let options = crate::http_serve::HttpOptions {
                    token_file,
                    allowed_hosts,
                    allowed_origins,
                    max_sessions: max_sessions.unwrap_or(defaults.max_sessions),
                    max_requests_per_session: max_requests_per_session
                        .unwrap_or(defaults.max_requests_per_session),
                    ..defaults
                };
                crate::http_serve::serve_http(config, options, err)
                    .await
                    .map(|()| true)
            }
            Command::Recheck(options) => crate::recheck::recheck(&config, &options, out, err).await,
        }
    }
    .await;
    let _ = out.flush();
    match result {
        Ok(true) => 0,
        Ok(false) => 1,
        Err(e) => {
            let _ = writeln!(err, "agentrt-proxy: error: {}", sanitize(&e.to_string()));
            1
        }
    }
}
