//! What the tasks that run a command of the caller's share (`postgres`,
//! `relay`): the command in their arguments, and its exit status passed on.

use std::process::{ExitCode, ExitStatus};

/// The command in the task's arguments: all of them, less a leading `--`;
/// `None` when that leaves nothing.
pub(crate) fn command(args: &[String]) -> Option<&[String]> {
    let args = match args.split_first() {
        Some((first, rest)) if first == "--" => rest,
        _ => args,
    };
    (!args.is_empty()).then_some(args)
}

/// A command's exit status as this process's: its code when it has one
/// that fits, else failure (killed by a signal).
pub(crate) fn exit_code(status: ExitStatus) -> ExitCode {
    status
        .code()
        .and_then(|code| u8::try_from(code).ok())
        .map_or(ExitCode::FAILURE, ExitCode::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_follows_an_optional_double_dash() {
        let args = |list: &[&str]| list.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            command(&args(&["--", "false"])),
            Some(&args(&["false"])[..])
        );
        assert_eq!(
            command(&args(&["psql", "-c"])),
            Some(&args(&["psql", "-c"])[..])
        );
        assert_eq!(command(&args(&["--"])), None);
        assert_eq!(command(&args(&[])), None);
    }
}
