//! `agentrt-proxy`: see the library's documentation and `--help`.

use std::process::ExitCode;

fn main() -> ExitCode {
    // Started as the supervisor of a stdio server (see
    // `agentrt_mcp::supervise`): that, and nothing else, before any
    // thread starts.
    if let Some(code) = agentrt_mcp::supervise_if_asked() {
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
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
    // Every stdio server runs under this binary as its supervisor, so it
    // and its descendants die with this process, however it ends.
    let options = agentrt_proxy::cli::RunOptions {
        supervisor: agentrt_mcp::own_supervisor(),
    };
    let code = runtime.block_on(agentrt_proxy::cli::run_with(
        &args,
        &options,
        &mut std::io::stdout(),
        &mut std::io::stderr(),
    ));
    // The read of stdin blocks a thread of its own, which would hold a
    // plain drop of the runtime until the host wrote again: by now every
    // call has landed, so nothing is cut.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    ExitCode::from(code)
}
