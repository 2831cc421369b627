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

/// Runs the command line `args` (without the program name), writing to
/// `out` and `err`; returns the exit status: 0 done, 1 failed, 2 usage.
pub async fn run(args: &[String], out: &mut dyn Write, err: &mut dyn Write) -> u8 {
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
        let config = read_config(&config)?;
        match command {
            Command::Pin => pin_all(&config, Timestamp::now(), out).await.map(|()| true),
            Command::Check => check(&config, out).await,
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
