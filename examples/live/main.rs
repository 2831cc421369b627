//! The shortest complete consumer with a model: the scripted tools plus a
//! finishing tool, an agent made of `render` around a model, a trace on
//! stderr, and a policy that sends the first change to an operator.
//!
//! ```sh
//! # offline, from the recording committed in the repository:
//! cargo run --example live -- --replay examples/live/recording --db live.db
//! cargo run -p agentrt-cli -- --db live.db approve RUN --approval ID --by you
//! cargo run --example live -- --replay examples/live/recording --db live.db --resume RUN
//!
//! # against any OpenAI-compatible endpoint (a local server, say):
//! cargo run --example live -- --url http://127.0.0.1:8080/v1 --model qwen3 [--key KEY] [--record DIR]
//! ```

#[allow(dead_code)]
mod run;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use agentrt::trace::TextTrace;

const USAGE: &str = "usage: cargo run --example live -- (--replay DIR | --url URL --model ID [--key KEY] [--record DIR]) [--db PATH] [--resume RUN]";

fn parse() -> Result<run::Options, String> {
    let mut db = PathBuf::from("agentrt-live.db");
    let (mut replay, mut url, mut model, mut key, mut record, mut resume) =
        (None, None, None, None, None, None);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--db" => db = value()?.into(),
            "--replay" => replay = Some(PathBuf::from(value()?)),
            "--url" => url = Some(value()?),
            "--model" => model = Some(value()?),
            "--key" => key = Some(value()?),
            "--record" => record = Some(PathBuf::from(value()?)),
            "--resume" => resume = Some(value()?),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let source = match (replay, url, model) {
        (Some(dir), None, _) => run::Source::Replay(dir),
        (None, Some(base_url), Some(model)) => run::Source::Url {
            base_url,
            model,
            api_key: key,
            record,
        },
        _ => return Err("give --replay DIR, or --url URL with --model ID".into()),
    };
    Ok(run::Options {
        db,
        source,
        resume,
        run_id: None,
    })
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let options = match parse() {
        Ok(o) => o,
        Err(problem) => {
            eprintln!("{problem}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let trace = Arc::new(TextTrace::new(std::io::stderr()));
    match run::run(&options, trace, None, None, &mut std::io::stdout()).await {
        Ok(finished) => {
            if let Some(approval) = finished.approval {
                println!(
                    "approve it with: cargo run -p agentrt-cli -- --db {:?} approve {} --approval {approval} --by you",
                    options.db.display().to_string(),
                    finished.run.id
                );
                println!("then resume with --resume {}", finished.run.id);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
