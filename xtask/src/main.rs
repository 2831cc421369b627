//! Maintenance tasks: `cargo xtask <task>`.

fn main() {
    let task = std::env::args().nth(1).unwrap_or_default();
    match task.as_str() {
        _ => {
            eprintln!("usage: cargo xtask <task>\n\ntasks: none yet");
            std::process::exit(2);
        }
    }
}
