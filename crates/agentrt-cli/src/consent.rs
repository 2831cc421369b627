//! Consent to decide an approval at the prompt: whether stdin is an
//! interactive terminal, and reading the one typed answer.

use std::io::{Read, Write};

/// What the prompt got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// `y` or `yes` (any case, surrounding spaces ignored).
    Yes,
    /// Any other typed line, an empty one included.
    No,
    /// End of input before anything was typed: treated as no terminal.
    Nothing,
}

/// The longest answer line read; the rest of a longer line is ignored.
const MAX_ANSWER_BYTES: usize = 256;

/// Writes `prompt` to `out`, then reads one line from `input`. Only
/// writing the prompt can fail; a failing input ends the answer as
/// end-of-input does.
pub fn ask(out: &mut dyn Write, input: &mut dyn Read, prompt: &str) -> std::io::Result<Answer> {
    out.write_all(prompt.as_bytes())?;
    out.flush()?;
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    let mut read_any = false;
    loop {
        match input.read(&mut byte) {
            Ok(0) => break,
            Ok(_) => {
                read_any = true;
                if byte[0] == b'\n' {
                    break;
                }
                if line.len() < MAX_ANSWER_BYTES {
                    line.push(byte[0]);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            // An input that fails ends the answer like end-of-input does.
            Err(_) => break,
        }
    }
    if !read_any {
        return Ok(Answer::Nothing);
    }
    let text = String::from_utf8_lossy(&line);
    let answer = text.trim().to_lowercase();
    Ok(if answer == "y" || answer == "yes" {
        Answer::Yes
    } else {
        Answer::No
    })
}

/// Whether stdin is an interactive terminal: a character device that is
/// not `/dev/null` (compared by identity).
#[cfg(unix)]
pub fn stdin_is_terminal() -> bool {
    use std::os::fd::AsFd;

    let Ok(fd) = std::io::stdin().as_fd().try_clone_to_owned() else {
        return false;
    };
    let Ok(meta) = std::fs::File::from(fd).metadata() else {
        return false;
    };
    is_terminal_file(&meta, std::fs::metadata("/dev/null").ok().as_ref())
}

/// A character device that is not the same file (or device) as
/// `null`.
#[cfg(unix)]
fn is_terminal_file(meta: &std::fs::Metadata, null: Option<&std::fs::Metadata>) -> bool {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};

    if !meta.file_type().is_char_device() {
        return false;
    }
    match null {
        Some(null) => {
            let same_file = null.dev() == meta.dev() && null.ino() == meta.ino();
            !(same_file || null.rdev() == meta.rdev())
        }
        None => true,
    }
}

/// Whether stdin is an interactive terminal.
#[cfg(not(unix))]
pub fn stdin_is_terminal() -> bool {
    use std::io::IsTerminal;
    std::io::stdin().is_terminal()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(typed: &[u8]) -> (Answer, String) {
        let mut out = Vec::new();
        let mut input = typed;
        let a = ask(
            &mut out,
            &mut input,
            "approve approval a1 of run r1? [y/N] ",
        )
        .unwrap();
        (a, String::from_utf8(out).unwrap())
    }

    #[test]
    fn yes_in_any_case_with_spaces_consents() {
        for typed in [&b"y\n"[..], b"Y\n", b"yes\n", b"  YES \r\n", b"y"] {
            assert_eq!(answer(typed).0, Answer::Yes, "{typed:?}");
        }
    }

    #[test]
    fn anything_else_declines() {
        for typed in [&b"n\n"[..], b"\n", b"no\n", b"yess\n", b"y es\n", b"x\ny\n"] {
            assert_eq!(answer(typed).0, Answer::No, "{typed:?}");
        }
        let long = vec![b'y'; 10_000];
        assert_eq!(answer(&long).0, Answer::No);
    }

    #[test]
    fn end_of_input_before_typing_is_no_terminal() {
        assert_eq!(answer(b"").0, Answer::Nothing);
    }

    #[test]
    fn a_failing_input_is_no_answer() {
        struct Broken;
        impl Read for Broken {
            fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
                Err(std::io::Error::other("gone"))
            }
        }
        let mut out = Vec::new();
        let answer = ask(&mut out, &mut Broken, "? ").unwrap();
        assert_eq!(answer, Answer::Nothing);
    }

    #[test]
    fn the_prompt_is_written_first() {
        let (_, out) = answer(b"y\n");
        assert_eq!(out, "approve approval a1 of run r1? [y/N] ");
    }

    #[cfg(unix)]
    #[test]
    fn only_a_character_device_other_than_dev_null_is_a_terminal() {
        let null = std::fs::metadata("/dev/null").unwrap();
        assert!(!is_terminal_file(&null, Some(&null)));
        let regular = std::fs::metadata(std::env::current_exe().unwrap()).unwrap();
        assert!(!is_terminal_file(&regular, Some(&null)));
        let dir = std::fs::metadata(".").unwrap();
        assert!(!is_terminal_file(&dir, Some(&null)));
        if let Ok(zero) = std::fs::metadata("/dev/zero") {
            assert!(is_terminal_file(&zero, Some(&null)));
        }
    }
}
