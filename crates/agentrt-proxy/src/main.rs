//! `agentrt-proxy`: see the library's documentation and `--help`.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = match std::env::args_os()
        .skip(1)
        .map(|a| a.into_string())
        .collect::<Result<_, _>>()
    {
        Ok(args) => args,
        Err(bad) => {
            eprintln!("agentrt-proxy: argument {bad:?} is not UTF-8");
            return ExitCode::from(2);
        }
    };
    // Before any thread allocates: SQLite's statement memory stays ours.
    agentrt::store::retain_freed_heap();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("agentrt-proxy: error: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    // Not locked for the whole run: `serve` writes the protocol to stdout
    // from the runtime's own threads.
    let code = runtime.block_on(agentrt_proxy::cli::run(
        &args,
        &mut std::io::stdout(),
        &mut std::io::stderr(),
    ));
    // The read of stdin blocks a thread of its own, which would hold a
    // plain drop of the runtime until the host wrote again: by now every
    // call has landed, so nothing is cut.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    ExitCode::from(code)
}
