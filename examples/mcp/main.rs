//! An MCP server's tools behind the policy: the real npm filesystem server
//! (`@modelcontextprotocol/server-filesystem`, pinned in
//! `crates/agentrt-mcp/tests/npm`), pinned, classified by
//! `examples/mcp/rules.json`, and a model agent that reads two notes and
//! writes a file, the write waiting for an operator.
//!
//! ```sh
//! export AGENTRT_MCP_FILESYSTEM_SERVER=$PWD/target/real-servers/npm/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js
//! cargo run --example mcp -- pin --dir /tmp/mcp-demo
//! cargo run --example mcp -- run --dir /tmp/mcp-demo --replay examples/mcp/recording
//! cargo run -p agentrt-cli -- --db /tmp/mcp-demo/mcp.db approve RUN --approval ID --by you
//! cargo run --example mcp -- run --dir /tmp/mcp-demo --replay examples/mcp/recording --resume RUN
//! cargo run -p agentrt-cli -- --db /tmp/mcp-demo/mcp.db events RUN
//!
//! # against any OpenAI-compatible endpoint:
//! cargo run --example mcp -- run --url http://127.0.0.1:8080/v1 --model qwen3 [--key KEY] [--record DIR]
//! ```

#[allow(dead_code)]
mod demo;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use agentrt::trace::TextTrace;
use agentrt::{RunStatus, Timestamp};

const USAGE: &str = "usage: cargo run --example mcp -- pin [--dir DIR] [--server ENTRY]
       cargo run --example mcp -- run (--replay DIR | --url URL --model ID [--key KEY] [--record DIR])
                                      [--dir DIR] [--server ENTRY] [--resume RUN]
ENTRY is the filesystem server's dist/index.js (default: $AGENTRT_MCP_FILESYSTEM_SERVER);
DIR holds the sandbox, manifest.json, rules.json and mcp.db (default: <cache dir>/agentrt/mcp).";

/// The parsed command line.
enum Command {
    Pin(demo::Layout, PathBuf),
    Run(demo::Options),
    Help,
}

/// `$XDG_CACHE_HOME/agentrt/mcp`, else `$HOME/.cache/agentrt/mcp`.
fn default_dir() -> Result<PathBuf, String> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .ok_or("no cache directory (neither XDG_CACHE_HOME nor HOME is set): give --dir")?;
    Ok(cache.join("agentrt").join("mcp"))
}

fn parse() -> Result<Command, String> {
    let mut args = std::env::args().skip(1);
    let step = args.next().ok_or("name a step: pin or run")?;
    if step == "-h" || step == "--help" {
        return Ok(Command::Help);
    }
    let (mut dir, mut entry, mut replay, mut url, mut model, mut key, mut record, mut resume) =
        (None, None, None, None, None, None, None, None);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--dir" => dir = Some(PathBuf::from(value()?)),
            "--server" => entry = Some(PathBuf::from(value()?)),
            "--replay" => replay = Some(PathBuf::from(value()?)),
            "--url" => url = Some(value()?),
            "--model" => model = Some(value()?),
            "--key" => key = Some(value()?),
            "--record" => record = Some(PathBuf::from(value()?)),
            "--resume" => resume = Some(value()?),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let layout = demo::Layout {
        dir: match dir {
            Some(dir) => dir,
            None => default_dir()?,
        },
    };
    let entry = entry
        .or_else(|| std::env::var_os("AGENTRT_MCP_FILESYSTEM_SERVER").map(PathBuf::from))
        .ok_or("give --server ENTRY or set AGENTRT_MCP_FILESYSTEM_SERVER")?;
    match step.as_str() {
        "pin" => {
            if replay.is_some() || url.is_some() || resume.is_some() {
                return Err("pin takes only --dir and --server".into());
            }
            Ok(Command::Pin(layout, entry))
        }
        "run" => {
            let source = match (replay, url, model) {
                (Some(dir), None, None) => demo::Source::Replay(dir),
                (None, Some(base_url), Some(model)) => demo::Source::Url {
                    base_url,
                    model,
                    api_key: key,
                    record,
                },
                _ => return Err("give --replay DIR, or --url URL with --model ID".into()),
            };
            Ok(Command::Run(demo::Options {
                layout,
                entry,
                source,
                resume,
                run_id: None,
            }))
        }
        other => Err(format!("unknown step {other:?}: pin or run")),
    }
}

/// Prints what the operator does next, once a run waits or ends.
fn next_steps(options: &demo::Options, finished: &demo::Finished) {
    let db = format!("{:?}", options.layout.db().display().to_string());
    let run = &finished.run.id;
    if let Some(approval) = &finished.approval {
        println!(
            "approve it with: cargo run -p agentrt-cli -- --db {db} approve {run} --approval {approval} --by you"
        );
        // The exact command, less an API key: a secret is not printed.
        let source = match &options.source {
            demo::Source::Replay(dir) => format!("--replay {:?}", dir.display().to_string()),
            demo::Source::Url {
                base_url,
                model,
                api_key,
                ..
            } => format!(
                "--url {base_url:?} --model {model:?}{}",
                if api_key.is_some() { " --key KEY" } else { "" }
            ),
        };
        println!(
            "then resume with: cargo run --example mcp -- run --dir {:?} --server {:?} {source} --resume {run}",
            options.layout.dir.display().to_string(),
            options.entry.display().to_string(),
        );
    } else {
        let written = options.layout.sandbox().join("todo.md");
        if written.is_file() {
            println!("{} now exists", written.display());
        }
        println!("the audit trail: cargo run -p agentrt-cli -- --db {db} events {run}");
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let command = match parse() {
        Ok(c) => c,
        Err(problem) => {
            eprintln!("{problem}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let mut out = std::io::stdout();
    let done = match &command {
        Command::Help => {
            println!("{USAGE}");
            Ok(())
        }
        Command::Pin(layout, entry) => demo::pin(layout, entry, Timestamp::now(), &mut out)
            .await
            .map(|_| ()),
        Command::Run(options) => {
            let trace = Arc::new(TextTrace::new(std::io::stderr()));
            match demo::run(options, trace, None, None, &mut out).await {
                Ok(finished) => {
                    next_steps(options, &finished);
                    match finished.run.status {
                        RunStatus::Completed | RunStatus::WaitingForApproval => Ok(()),
                        other => Err(format!("run {} ended {other}", finished.run.id)),
                    }
                }
                Err(e) => Err(e),
            }
        }
    };
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
