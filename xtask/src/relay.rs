//! `cargo xtask relay -- CMD ARGS...`: CMD started with piped standard
//! input and output, and the bytes copied both ways as they arrive, with
//! nothing else done. `bench-proxy` measures it in the proxy's place: what
//! any stdio proxy costs a host before it does any work of its own (two
//! more pipes, two more processes woken per message).

use std::io::{Read, Write};
use std::process::{Command, ExitCode, Stdio};

use crate::child::{command, exit_code};

/// Copies `from` to `to` until `from` ends, writing each read at once.
fn pump(mut from: impl Read, mut to: impl Write) -> std::io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        to.write_all(&buf[..n])?;
        to.flush()?;
    }
}

/// Runs the relay; its exit status is the child's (failure if it has
/// none).
pub(crate) fn relay(args: &[String]) -> Result<ExitCode, String> {
    let Some((program, rest)) = command(args).and_then(<[String]>::split_first) else {
        return Err("relay: a command to run (relay -- CMD ARGS...)".into());
    };
    let mut child = Command::new(program)
        .args(rest)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("relay: {program}: {e}"))?;
    let (Some(child_in), Some(child_out)) = (child.stdin.take(), child.stdout.take()) else {
        return Err("relay: the child's pipes were not made".into());
    };
    // Standard input's end closes the child's input (its cue to exit);
    // the child's output ending ends the relay.
    let inbound = std::thread::spawn(move || pump(std::io::stdin().lock(), child_in));
    let outbound = pump(child_out, std::io::stdout().lock());
    let status = child.wait().map_err(|e| format!("relay: {program}: {e}"))?;
    // The host may still hold its end open: the inbound thread is left to
    // end with the process.
    drop(inbound);
    outbound.map_err(|e| format!("relay: copying the child's output: {e}"))?;
    Ok(exit_code(status))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pump_copies_every_byte_in_order() {
        let input: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let mut out = Vec::new();
        pump(&input[..], &mut out).expect("pump");
        assert_eq!(out, input);
    }

    #[test]
    fn a_relay_without_a_command_is_refused() {
        assert!(relay(&[]).is_err());
        assert!(relay(&["--".to_owned()]).is_err());
    }
}
