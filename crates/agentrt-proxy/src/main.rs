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
    ExitCode::from(code)
}
