//! clap's errors in our words: one line naming the problem, never clap's
//! rendering with its usage block (design §19). Help and version
//! requests, which clap also reports as errors, become text to print.

use std::ffi::OsString;

use clap::Command;
use clap::error::{ContextKind, ContextValue, Error, ErrorKind};

use super::{Parsed, UsageError};

/// What clap's `err` means for us. `cmd` is the command tree clap parsed
/// with, `args` the arguments after the program name.
pub fn from_clap(err: &Error, cmd: &Command, args: &[OsString]) -> Result<Parsed, UsageError> {
    let path = command_path(cmd, args);
    let here = path.join(" ");
    let current = path
        .iter()
        .try_fold(cmd, |c, name| c.find_subcommand(name))
        .unwrap_or(cmd);
    let message = match err.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            return Ok(Parsed::Print(err.render().to_string()));
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand | ErrorKind::MissingSubcommand => {
            if path.is_empty() {
                if args.is_empty() {
                    return Err(UsageError::NoCommand);
                }
                "no command given".to_owned()
            } else {
                let subs: Vec<String> = current
                    .get_subcommands()
                    .map(Command::get_name)
                    .filter(|name| *name != "help")
                    .map(|s| format!("agentrt {here} {s}"))
                    .collect();
                format!("{here} needs a subcommand: {}", subs.join(", "))
            }
        }
        ErrorKind::InvalidSubcommand => unknown_command(err, current, &here),
        ErrorKind::UnknownArgument => unknown_argument(err, cmd, current, &here, args),
        ErrorKind::MissingRequiredArgument => missing(err, current, &here),
        ErrorKind::InvalidValue => {
            let flag = arg_name(&string(err, ContextKind::InvalidArg));
            let value = string(err, ContextKind::InvalidValue);
            if value.is_empty() {
                format!("{flag} needs a value")
            } else {
                let what = match positional(&flag) {
                    Some(name) => format!("invalid {name} {value:?}"),
                    None => format!("invalid value {value:?} for {flag}"),
                };
                let mut m = format!(
                    "{what}; the choices are {}",
                    strings(err, ContextKind::ValidValue).join(", ")
                );
                if let Some(s) = context(err, ContextKind::SuggestedValue) {
                    m.push_str(&format!("; did you mean {s:?}?"));
                }
                m
            }
        }
        ErrorKind::ValueValidation => {
            let flag = arg_name(&string(err, ContextKind::InvalidArg));
            let value = string(err, ContextKind::InvalidValue);
            let why = std::error::Error::source(err)
                .map(|s| format!(": {s}"))
                .unwrap_or_default();
            format!("invalid value {value:?} for {flag}{why}")
        }
        ErrorKind::TooManyValues => {
            let flag = arg_name(&string(err, ContextKind::InvalidArg));
            let takes_values = current.get_arguments().chain(cmd.get_arguments()).any(|a| {
                a.get_long().is_some_and(|l| flag == format!("--{l}")) && {
                    a.get_action().takes_values()
                }
            });
            if takes_values {
                format!(
                    "unexpected value {:?} for {flag}",
                    string(err, ContextKind::InvalidValue)
                )
            } else {
                format!("{flag} takes no value")
            }
        }
        ErrorKind::InvalidUtf8 => "an argument is not valid UTF-8".to_owned(),
        _ => clap_line(err),
    };
    Err(UsageError::problem(here, message))
}

/// The names of the commands `args` enters, outermost first (`["head",
/// "sign"]`). Flags are skipped with their values; the walk stops where
/// clap stopped: at `--`, at a flag the command does not know and at the
/// first word that is not a command. `help WORD` is about the command
/// `help` belongs to.
fn command_path(cmd: &Command, args: &[OsString]) -> Vec<String> {
    let mut path = Vec::new();
    let mut current = cmd;
    let mut words = args.iter();
    while let Some(word) = words.next() {
        let Some(word) = word.to_str() else { break };
        if word == "--" {
            break;
        }
        if word.starts_with('-') && word.len() > 1 {
            let (name, inline) = match word.split_once('=') {
                Some((name, _)) => (name, true),
                None => (word, false),
            };
            let Some(arg) = current.get_arguments().find(|a| {
                a.get_long().is_some_and(|l| name == format!("--{l}"))
                    || a.get_short().is_some_and(|s| name == format!("-{s}"))
            }) else {
                break;
            };
            match (arg.get_action().takes_values(), inline) {
                (true, false) => {
                    words.next();
                }
                (false, true) => break,
                _ => {}
            }
            continue;
        }
        match current.find_subcommand(word) {
            Some(sub) => {
                path.push(sub.get_name().to_owned());
                current = sub;
            }
            None => break,
        }
    }
    if let Some(help) = path.iter().position(|p| p == "help") {
        path.truncate(help);
    }
    path
}

fn unknown_command(err: &Error, current: &Command, here: &str) -> String {
    let word = string(err, ContextKind::InvalidSubcommand);
    let (mut m, what) = if here.is_empty() {
        (format!("unknown command {word:?}"), "commands")
    } else {
        (
            format!("unknown subcommand {word:?} of {here}"),
            "subcommands",
        )
    };
    match strings(err, ContextKind::SuggestedSubcommand).first() {
        Some(s) => m.push_str(&format!("; did you mean {s:?}?")),
        None => {
            let names: Vec<&str> = current.get_subcommands().map(Command::get_name).collect();
            m.push_str(&format!("; the {what} are {}", names.join(", ")));
        }
    }
    m
}

fn unknown_argument(
    err: &Error,
    root: &Command,
    current: &Command,
    here: &str,
    args: &[OsString],
) -> String {
    let arg = string(err, ContextKind::InvalidArg);
    if !arg.starts_with('-') {
        let takes_a_run = current.get_positionals().next().is_some();
        let what = if takes_a_run {
            "takes exactly one run id"
        } else {
            "takes no arguments"
        };
        return if here.is_empty() {
            if root.find_subcommand(&arg).is_some() {
                format!("unexpected argument {arg:?}: to run the command, drop the -- before it")
            } else {
                format!("unexpected argument {arg:?}")
            }
        } else {
            format!("unexpected argument {arg:?}: {here} {what}")
        };
    }
    let mut name = arg_name(&arg);
    if !name.starts_with("--") {
        // clap reads `-limit` as the short flags l, i, m…: name the word.
        if let Some(word) = args
            .iter()
            .take_while(|a| *a != "--")
            .filter_map(|a| a.to_str())
            .find(|a| !a.starts_with("--") && a.starts_with(name.as_str()))
        {
            name = arg_name(word);
        }
    }
    let is_long = |cmd: &Command, flag: &str| {
        cmd.get_arguments()
            .any(|a| a.get_long().is_some_and(|l| flag == format!("--{l}")))
    };
    if !here.is_empty() && is_long(root, &name) && !is_long(current, &name) {
        return format!(
            "{name} is a global flag: put it before the command (agentrt {name} ... {here} ...)"
        );
    }
    let place = if here.is_empty() {
        String::new()
    } else {
        format!(" for {here}")
    };
    let two = format!("-{name}");
    let hint = if !name.starts_with("--") && (is_long(current, &two) || is_long(root, &two)) {
        format!(" (flags take two dashes: {two})")
    } else if let Some(s) = context(err, ContextKind::SuggestedArg) {
        format!("; did you mean {s}?")
    } else {
        String::new()
    };
    format!("unknown flag {name}{place}{hint}")
}

fn missing(err: &Error, current: &Command, here: &str) -> String {
    let Some(first) = strings(err, ContextKind::InvalidArg).into_iter().next() else {
        return clap_line(err);
    };
    if let Some(name) = positional(&first) {
        if name == "run" {
            return format!("{here} needs a run id: agentrt {here} <run>");
        }
        let choices: Vec<String> = current
            .get_positionals()
            .flat_map(|p| p.get_possible_values())
            .map(|v| v.get_name().to_owned())
            .collect();
        let mut m = format!("{here} needs a {name}: agentrt {here} {first}");
        if !choices.is_empty() {
            m.push_str(&format!(", one of {}", choices.join(", ")));
        }
        return m;
    }
    let flag = arg_name(&first);
    let value = first.split_once(' ').map_or("", |(_, v)| v);
    let value = value.trim_start_matches('<').trim_end_matches('>');
    format!("{flag} is required: agentrt {here} {flag} {value}")
}

/// `<SHELL>` → `shell`; a flag is no positional.
fn positional(arg: &str) -> Option<String> {
    let name = arg.strip_prefix('<')?.strip_suffix('>')?;
    Some(name.to_lowercase())
}

/// `--limit <N>` → `--limit`; `--db=x` → `--db`.
fn arg_name(arg: &str) -> String {
    let name = arg.split([' ', '=']).next().unwrap_or(arg);
    name.to_owned()
}

fn context(err: &Error, kind: ContextKind) -> Option<String> {
    match err.get(kind)? {
        ContextValue::String(s) => Some(s.clone()),
        ContextValue::Strings(v) => v.first().cloned(),
        ContextValue::StyledStr(s) => Some(s.to_string()),
        _ => None,
    }
}

fn string(err: &Error, kind: ContextKind) -> String {
    context(err, kind).unwrap_or_default()
}

fn strings(err: &Error, kind: ContextKind) -> Vec<String> {
    match err.get(kind) {
        Some(ContextValue::Strings(v)) => v.clone(),
        Some(ContextValue::String(s)) => vec![s.clone()],
        _ => Vec::new(),
    }
}

/// The first line of clap's own message, without its `error: ` prefix:
/// for the kinds nothing above words better.
fn clap_line(err: &Error) -> String {
    let rendered = err.render().to_string();
    let first = rendered.lines().next().unwrap_or_default();
    first.strip_prefix("error: ").unwrap_or(first).to_owned()
}
