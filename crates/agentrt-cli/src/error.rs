//! The CLI's errors and how each is reported: a usage problem exits 2 with
//! its one line and a pointer to `--help`, everything else exits 1 with
//! `error: <message>`.

use std::io::Write;

use agentrt::text::sanitize;

/// Why a command did not succeed.
#[derive(Debug)]
pub enum CliError {
    /// A usage problem (exit 2): the one-line problem; a pointer to the
    /// command's `--help` follows it.
    Usage(String),
    /// A refusal or failure (exit 1): the message, possibly several lines.
    Failed(String),
    /// Writing to stdout failed (exit 1).
    Output(std::io::Error),
}

impl CliError {
    /// The process exit status.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(_) => 2,
            CliError::Failed(_) | CliError::Output(_) => 1,
        }
    }

    /// Writes the report to `err` (stderr). `command` names the command
    /// (`approve`, `head sign`; empty for agentrt itself) for output errors
    /// and for the pointer to its help.
    pub fn report(&self, command: &str, err: &mut dyn Write) {
        let text = match self {
            CliError::Usage(problem) => {
                let help = if command.is_empty() {
                    "agentrt --help".to_owned()
                } else {
                    format!("agentrt {command} --help")
                };
                format!(
                    "error: {}\n\nFor more information, try '{help}'.\n",
                    sanitize(problem)
                )
            }
            CliError::Failed(message) => {
                let mut lines = message.lines().map(sanitize);
                let first = lines.next().unwrap_or_default();
                let mut text = format!("error: {first}\n");
                for line in lines {
                    text.push_str(&line);
                    text.push('\n');
                }
                text
            }
            CliError::Output(e) => {
                format!(
                    "error: {command}: writing output: {}\n",
                    sanitize(&e.to_string())
                )
            }
        };
        // Nothing sensible is left to do when stderr itself fails.
        let _ = err.write_all(text.as_bytes());
        let _ = err.flush();
    }
}

impl From<agentrt::Error> for CliError {
    fn from(e: agentrt::Error) -> CliError {
        CliError::Failed(e.to_string())
    }
}
