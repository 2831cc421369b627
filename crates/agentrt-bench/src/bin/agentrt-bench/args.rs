//! The command line: its grammar (clap), its usage and help text, and the
//! one-line problem printed for a usage error.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::error::ErrorKind;
use clap::{ColorChoice, Parser, Subcommand};

/// The usage text, printed after the problem on a usage error.
pub const USAGE: &str = "\
usage: agentrt-bench summarize FILE
       agentrt-bench compare [--order MODE,MODE,...] [--link-prefix PREFIX] [--allow-mixed-commits] FILE...
";

/// The help text (`-h`, `--help`), printed to stdout.
pub const HELP: &str = "\
agentrt-bench: report on agent-runtime/bench/v1 result files.

usage: agentrt-bench summarize FILE
       agentrt-bench compare [--order MODE,MODE,...] [--link-prefix PREFIX] [--allow-mixed-commits] FILE...

commands:
  summarize FILE     print the file's Markdown report
  compare FILE...    print the Markdown comparison of the newest result per mode
                     and model across the files; each file's name (without
                     directories) is its source

options of compare:
  --order MODE,MODE,...    put these modes first, in this order
  --link-prefix PREFIX     link each file's name as [name](PREFIXname)
  --allow-mixed-commits    compare results from different commits (the output
                           says they are not comparable as like for like)

  -h, --help               print this help

exit status: 0 done; 1 refused (a malformed or unreadable file, results from
different commits or taxonomies, nothing to compare); 2 usage error
";

/// The parsed command line.
#[derive(Debug, Parser)]
#[command(
    name = "agentrt-bench",
    color = ColorChoice::Never,
    disable_help_subcommand = true,
    subcommand_required = true
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print one file's Markdown report.
    Summarize {
        /// The result file.
        #[arg(value_name = "FILE")]
        file: PathBuf,
    },
    /// Print the Markdown comparison of the files.
    Compare {
        /// Modes to put first, in this order.
        #[arg(long, value_name = "MODE,MODE,...", value_delimiter = ',')]
        order: Vec<String>,
        /// Prefix of each file's link.
        #[arg(long, value_name = "PREFIX", default_value = "")]
        link_prefix: String,
        /// Compare results from different commits.
        #[arg(long)]
        allow_mixed_commits: bool,
        /// The result files.
        #[arg(value_name = "FILE", required = true)]
        files: Vec<PathBuf>,
    },
}

/// What parsing the command line came to.
#[derive(Debug)]
pub enum Parsed {
    /// Run this command.
    Run(Cli),
    /// Print the help and exit 0.
    Help,
    /// Print this problem and the usage, and exit 2.
    Usage(String),
}

/// Parses the arguments (the first is the program name).
pub fn parse<I, T>(args: I) -> Parsed
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    match Cli::try_parse_from(&args) {
        Ok(cli) => Parsed::Run(cli),
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            Parsed::Help
        }
        Err(e) => Parsed::Usage(single_dash(&args).unwrap_or_else(|| problem(&e))),
    }
}

/// A Go-style option with one dash (`-order`), which clap would read as
/// short options: named as such, with its two-dash spelling.
fn single_dash(args: &[OsString]) -> Option<String> {
    args.iter()
        .skip(1)
        .take_while(|a| *a != "--")
        .filter_map(|a| a.to_str())
        .find(|a| a.len() > 2 && a.starts_with('-') && !a.starts_with("--"))
        .map(|a| {
            let name = a.split('=').next().unwrap_or(a);
            format!("unknown option '{name}'; long options take two dashes (-{name})")
        })
}

/// clap's message as one line: its first paragraph (before the tips and
/// its own usage), lines joined, without the `error: ` prefix.
fn problem(e: &clap::Error) -> String {
    if matches!(
        e.kind(),
        ErrorKind::MissingSubcommand | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        return "no command given (summarize or compare)".to_string();
    }
    let text = e.render().to_string();
    let first = text.split("\n\n").next().unwrap_or_default();
    let line = first
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let line = line.strip_prefix("error: ").unwrap_or(&line).to_string();
    if line.is_empty() {
        e.kind().to_string()
    } else {
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(args: &[&str]) -> String {
        let mut all = vec!["agentrt-bench"];
        all.extend_from_slice(args);
        match parse(all) {
            Parsed::Usage(p) => p,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    #[test]
    fn grammar_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn compare_options_parse() {
        let Parsed::Run(cli) = parse([
            "agentrt-bench",
            "compare",
            "--order",
            "baseline,scripted,replay",
            "--link-prefix=results/",
            "--allow-mixed-commits",
            "a.json",
            "dir/b.json",
        ]) else {
            panic!("not parsed");
        };
        let Command::Compare {
            order,
            link_prefix,
            allow_mixed_commits,
            files,
        } = cli.command
        else {
            panic!("not compare");
        };
        assert_eq!(order, ["baseline", "scripted", "replay"]);
        assert_eq!(link_prefix, "results/");
        assert!(allow_mixed_commits);
        assert_eq!(
            files,
            [PathBuf::from("a.json"), PathBuf::from("dir/b.json")]
        );
    }

    #[test]
    fn problems_are_one_line() {
        for (args, want) in [
            (vec![], "no command given (summarize or compare)"),
            (
                vec!["compare"],
                "the following required arguments were not provided: <FILE>...",
            ),
            (
                vec!["summarize"],
                "the following required arguments were not provided: <FILE>",
            ),
            (vec!["summarize", "a", "b"], "unexpected argument 'b' found"),
            (
                vec!["compare", "--bogus", "a"],
                "unexpected argument '--bogus' found",
            ),
            (
                vec!["compare", "-order", "a", "b"],
                "unknown option '-order'; long options take two dashes (--order)",
            ),
            (
                vec!["compare", "-link-prefix=x", "a"],
                "unknown option '-link-prefix'; long options take two dashes (--link-prefix)",
            ),
            (vec!["frobnicate"], "unrecognized subcommand 'frobnicate'"),
            (
                vec!["compare", "--order"],
                "a value is required for '--order <MODE,MODE,...>' but none was supplied",
            ),
        ] {
            let p = usage(&args);
            assert_eq!(p, want, "{args:?}");
            assert!(!p.contains('\n'));
        }
    }

    #[test]
    fn help_is_recognized_everywhere() {
        for args in [
            vec!["agentrt-bench", "-h"],
            vec!["agentrt-bench", "--help"],
            vec!["agentrt-bench", "compare", "--help"],
            vec!["agentrt-bench", "summarize", "-h"],
        ] {
            assert!(matches!(parse(args), Parsed::Help));
        }
    }
}
