//! The grammar of the command line, as clap derives it: which commands
//! and flags exist, which take values, and each one's help text.
//!
//! What the values mean (defaults from the environment, negative numbers,
//! flags that go in pairs, ranges) is checked afterwards, in `validate`.
//! The top-level help is the hand-written manual in `usage`; each
//! command's `--help` is rendered by clap from the doc comments here.

use std::ffi::OsString;

use agentrt::Label;
use clap::{Args, ColorChoice, CommandFactory, Parser, Subcommand};
use clap_complete::Shell;

use crate::usage::USAGE;

/// `agentrt [--db PATH|URL] [--json] <command> [arguments]`.
#[derive(Debug, Parser)]
#[command(
    name = "agentrt",
    version,
    about = "The operator's view of an agentrt database",
    override_help = USAGE,
    color = ColorChoice::Never,
)]
pub struct Cli {
    /// The database (default: $AGENTRT_DB): a SQLite file or a
    /// `postgres://` URL; it must exist.
    #[arg(long, value_name = "PATH|URL", value_parser = clap::value_parser!(OsString))]
    pub db: Option<OsString>,
    /// JSON output, pretty-printed (events: JSON Lines).
    #[arg(long)]
    pub json: bool,
    /// The command.
    #[command(subcommand)]
    pub command: CliCommand,
}

const AFTER_DECIDE: &str = "\
approve and reject print the approval first, then need consent: --approval,
--yes, or a typed y/yes when stdin is an interactive terminal (and --json
is not given). The decision applies only to the approval exactly as it was
printed: if it changed in between, nothing is decided.

There is no resume command: an approved run stays waiting until the
consumer's program resumes it with Driver::resume.";

/// The commands.
#[derive(Debug, Subcommand)]
pub enum CliCommand {
    /// List runs, newest first.
    #[command(override_usage = "agentrt [--db PATH|URL] [--json] runs [OPTIONS]")]
    Runs(RunsArgs),
    /// Show a run, its pending approvals and its steps.
    #[command(override_usage = "agentrt [--db PATH|URL] [--json] show [OPTIONS] <RUN>")]
    Show(ShowArgs),
    /// Print a run's events in order; with --follow, every run's (or one
    /// run's) events as JSON Lines as they commit, until SIGINT or SIGTERM.
    #[command(
        override_usage = "agentrt [--db PATH|URL] [--json] events [OPTIONS] <RUN>\n       agentrt [--db PATH|URL] events --follow [--from SEQ | --cursor FILE] [RUN]"
    )]
    Events(EventsArgs),
    /// Approve the run's pending approval.
    #[command(
        override_usage = "agentrt [--db PATH|URL] [--json] approve [OPTIONS] <RUN>",
        after_help = AFTER_DECIDE
    )]
    Approve(ApproveArgs),
    /// Reject the run's pending approval: the step fails and the run is
    /// cancelled (approval_rejected).
    #[command(
        override_usage = "agentrt [--db PATH|URL] [--json] reject [OPTIONS] <RUN>",
        after_help = AFTER_DECIDE
    )]
    Reject(DecideArgs),
    /// Cancel a run that has not finished (operator_cancelled); no
    /// confirmation.
    #[command(override_usage = "agentrt [--db PATH|URL] [--json] cancel [OPTIONS] <RUN>")]
    Cancel(CancelArgs),
    /// Check the hash chain over every run's events, and the runs, steps
    /// and approvals each event digests.
    ///
    /// Prints "intact" with the last seq and link, or the first seq that
    /// does not chain (exit 1). An intact chain proves the log is as
    /// written only up to a head kept where the database's writers cannot
    /// reach it: pass one with --head or --signed-head.
    #[command(override_usage = "agentrt [--db PATH|URL] [--json] verify [OPTIONS]")]
    Verify(VerifyArgs),
    /// Signed chain heads.
    #[command(
        override_usage = "agentrt [--db PATH|URL] [--json] head sign --key FILE [--out FILE]"
    )]
    Head {
        /// What to do with the head.
        #[command(subcommand)]
        command: HeadCommand,
    },
    /// Make an Ed25519 key pair for head sign; needs no --db.
    #[command(override_usage = "agentrt [--json] keygen --out PREFIX")]
    Keygen(KeygenArgs),
    /// Copy a SQLite database into an empty PostgreSQL one, chain intact;
    /// needs no --db.
    ///
    /// Every row is copied as stored in one transaction, then `verify`
    /// runs on both: they must be intact with the same head.
    #[command(override_usage = "agentrt [--json] migrate --from PATH --to URL")]
    Migrate(MigrateArgs),
    /// Cedar policies (agentrt-cedar): check a file against the tools it
    /// decides, or test it against a table of requests and the outcomes
    /// expected; needs no --db.
    #[command(
        override_usage = "agentrt [--json] policy check FILE (--tools FILE | --manifest FILE)\n       agentrt [--json] policy test FILE (--tools FILE | --manifest FILE) --cases FILE\n       agentrt [--db PATH|URL] [--json] policy recheck FILE [--run ID] [--limit N] [--tools FILE]"
    )]
    Policy {
        /// What to do with the policy.
        #[command(subcommand)]
        command: PolicyCommand,
    },
    /// Print a shell completion script; needs no --db.
    ///
    /// For example: agentrt completions bash > ~/.local/share/bash-completion/completions/agentrt
    #[command(override_usage = "agentrt completions <SHELL>")]
    Completions {
        /// The shell.
        #[arg(value_enum, value_name = "SHELL")]
        shell: Shell,
    },
}

/// `policy` subcommands.
#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Parse the policies and validate them strictly against a schema
    /// made from the tools: a policy naming an argument a tool lacks, or
    /// comparing it with a value of another type, is refused with Cedar's
    /// diagnostic (exit 1). Prints the policy set's identity.
    #[command(
        override_usage = "agentrt [--json] policy check FILE (--tools FILE | --manifest FILE)"
    )]
    Check(PolicyCheckArgs),
    /// Check the policies, then put each case of the cases file to them:
    /// exit 1 naming every case whose outcome (or reason) is not the one
    /// expected.
    #[command(
        override_usage = "agentrt [--json] policy test FILE (--tools FILE | --manifest FILE) --cases FILE"
    )]
    Test(PolicyTestArgs),
    /// Re-check recorded runs under the Cedar policy in FILE: every
    /// recorded evaluation put to it, the steps it would decide otherwise
    /// named; exit 1 if any run differs. Each run's policy is validated
    /// against the tool specs that run recorded (or --tools). Opens the
    /// database read-only and writes nothing.
    #[command(
        override_usage = "agentrt [--db PATH|URL] [--json] policy recheck FILE [--run ID] [--limit N] [--tools FILE]"
    )]
    Recheck(PolicyRecheckArgs),
}

/// `policy recheck` flags.
#[derive(Debug, Args)]
pub struct PolicyRecheckArgs {
    /// The Cedar policy file.
    #[arg(value_name = "FILE", value_parser = clap::value_parser!(OsString))]
    pub file: OsString,
    /// Only this run (default: the newest runs).
    #[arg(long, value_name = "ID")]
    pub run: Option<String>,
    /// How many of the newest runs (default 50; 0 = all).
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = page_number)]
    pub limit: Option<u64>,
    /// The tools as they are now (a tools file, as for policy check): each
    /// request is judged with its tool's current spec, and a tool missing
    /// from it differs.
    #[arg(long, value_name = "FILE", value_parser = clap::value_parser!(OsString))]
    pub tools: Option<OsString>,
}

/// `policy check` flags (and `policy test`'s first ones): a policy file
/// and the tools it decides.
#[derive(Debug, Args)]
pub struct PolicyCheckArgs {
    /// The Cedar policy file.
    #[arg(value_name = "FILE", value_parser = clap::value_parser!(OsString))]
    pub file: OsString,
    /// The tools: a JSON array of tool specs as agentrt records them
    /// (name, description, input_schema, side_effect, timeout_ms).
    #[arg(long, value_name = "FILE", value_parser = clap::value_parser!(OsString))]
    pub tools: Option<OsString>,
    /// Or the tools a pinned MCP manifest offers, named `<server>_<tool>`,
    /// classed by the server's hints.
    #[arg(long, value_name = "FILE", value_parser = clap::value_parser!(OsString))]
    pub manifest: Option<OsString>,
}

/// `policy test` flags.
#[derive(Debug, Args)]
pub struct PolicyTestArgs {
    /// The policy and its tools, as for `policy check`.
    #[command(flatten)]
    pub policy: PolicyCheckArgs,
    /// The cases: a JSON array of requests, each with `tool`, `args`,
    /// optionally `principal`, `resource`, `labels`, `run` and
    /// `reason_contains`, and the outcome it should get in `expect`
    /// (allow, require_approval, deny, abort).
    #[arg(long, value_name = "FILE", value_parser = clap::value_parser!(OsString))]
    pub cases: OsString,
}

/// `head` subcommands.
#[derive(Debug, Subcommand)]
pub enum HeadCommand {
    /// Verify the whole chain, then sign its head (seq, link, time) with an
    /// Ed25519 key kept outside the database.
    #[command(
        override_usage = "agentrt [--db PATH|URL] [--json] head sign --key FILE [--out FILE]"
    )]
    Sign(HeadSignArgs),
}

/// `runs` flags.
#[derive(Debug, Args)]
pub struct RunsArgs {
    /// Runs per page (default 100; 0 = all).
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = page_number)]
    pub limit: Option<u64>,
    /// Runs to skip (default 0).
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = page_number)]
    pub offset: Option<u64>,
    /// Only runs begun with this label; repeat it for runs that carry
    /// every label given.
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = label)]
    pub labels: Vec<Label>,
}

/// `show` arguments.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The run id.
    #[arg(value_name = "RUN")]
    pub run: String,
    /// Steps and pending approvals per page (default 500; 0 = all).
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = page_number)]
    pub limit: Option<u64>,
    /// Steps and pending approvals to skip (default 0).
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = page_number)]
    pub offset: Option<u64>,
}

/// `events` arguments.
#[derive(Debug, Args)]
pub struct EventsArgs {
    /// The run id (with --follow: only this run's events).
    #[arg(value_name = "RUN")]
    pub run: Option<String>,
    /// Keep printing events as they commit, as JSON Lines, until SIGINT or
    /// SIGTERM.
    #[arg(long)]
    pub follow: bool,
    /// With --follow: start after this seq (default 0: from the first).
    #[arg(long, value_name = "SEQ", value_parser = page_number)]
    pub from: Option<u64>,
    /// With --follow: keep the position in FILE (created owner-only,
    /// replaced atomically): a restart goes on where the last one stopped.
    #[arg(long, value_name = "FILE")]
    pub cursor: Option<std::ffi::OsString>,
    /// Events per page (default 500; 0 = all, printed as read).
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = page_number)]
    pub limit: Option<u64>,
    /// Events to skip (default 0).
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = page_number)]
    pub offset: Option<u64>,
}

/// `approve` / `reject` arguments.
#[derive(Debug, Args)]
pub struct DecideArgs {
    /// The run id.
    #[arg(value_name = "RUN")]
    pub run: String,
    /// The approval to decide (default: the run's only pending approval);
    /// naming it is consent.
    #[arg(long, value_name = "ID")]
    pub approval: Option<String>,
    /// Who decides, recorded as given and never verified (default: $USER,
    /// else $LOGNAME, else the account's login name).
    #[arg(long, value_name = "WHO")]
    pub by: Option<String>,
    /// A note for the record (default: empty).
    #[arg(long, value_name = "TEXT", allow_hyphen_values = true)]
    pub note: Option<String>,
    /// Consent without a prompt.
    #[arg(long)]
    pub yes: bool,
}

/// `approve` arguments: those of a decision, and an edit.
#[derive(Debug, Args)]
pub struct ApproveArgs {
    #[command(flatten)]
    pub decide: DecideArgs,
    /// Approve these arguments instead of the request's: a JSON object in
    /// FILE, or on stdin with -. The edited request is checked against the
    /// tool's schema and approved; on resume the run's policy judges it.
    #[arg(long, value_name = "FILE|-", value_parser = clap::value_parser!(OsString), allow_hyphen_values = true)]
    pub edit: Option<OsString>,
}

/// `cancel` arguments.
#[derive(Debug, Args)]
pub struct CancelArgs {
    /// The run id.
    #[arg(value_name = "RUN")]
    pub run: String,
    /// Who cancels (default: $USER, else $LOGNAME, else the account's
    /// login name).
    #[arg(long, value_name = "WHO")]
    pub by: Option<String>,
    /// A note for the record (default: empty).
    #[arg(long, value_name = "TEXT", allow_hyphen_values = true)]
    pub note: Option<String>,
}

/// `verify` flags.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The first seq to check (default 1).
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = whole_number)]
    pub from: Option<i64>,
    /// The last seq to check (default: the last event); exit 1 if the chain
    /// ends before it.
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = whole_number)]
    pub to: Option<i64>,
    /// A head kept from an earlier verify: exit 1 unless the chain reaches
    /// SEQ unbroken with that link.
    #[arg(long, value_name = "SEQ:HASH")]
    pub head: Option<String>,
    /// A head signed with agentrt head sign: its signature is checked, then
    /// it is compared like --head.
    #[arg(long, value_name = "FILE", value_parser = clap::value_parser!(OsString))]
    pub signed_head: Option<OsString>,
    /// The public key the signed head must be signed with.
    #[arg(long, value_name = "FILE", value_parser = clap::value_parser!(OsString))]
    pub pubkey: Option<OsString>,
}

/// `head sign` flags.
#[derive(Debug, Args)]
pub struct HeadSignArgs {
    /// The private key (from agentrt keygen).
    #[arg(long, value_name = "FILE", value_parser = clap::value_parser!(OsString))]
    pub key: OsString,
    /// Write the signed head to FILE, a new file (default: print it).
    #[arg(long, value_name = "FILE", value_parser = clap::value_parser!(OsString))]
    pub out: Option<OsString>,
}

/// `migrate` flags.
#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// The SQLite database to copy (opened read-only).
    #[arg(long, value_name = "PATH", value_parser = clap::value_parser!(OsString))]
    pub from: OsString,
    /// The PostgreSQL database to copy it into: postgres://user@host/db;
    /// it must hold no runs yet (its schema is created when missing).
    #[arg(long, value_name = "URL")]
    pub to: String,
}

/// `keygen` flags.
#[derive(Debug, Args)]
pub struct KeygenArgs {
    /// Writes PREFIX.key (private, mode 0600) and PREFIX.pub; never
    /// overwrites a file.
    #[arg(long, value_name = "PREFIX", value_parser = clap::value_parser!(OsString))]
    pub out: OsString,
}

/// The command tree with the settings every level shares: the last of a
/// repeated flag wins.
pub fn command() -> clap::Command {
    fn settle(cmd: clap::Command) -> clap::Command {
        cmd.args_override_self(true).mut_subcommands(settle)
    }
    settle(Cli::command())
}

/// A whole number, surrounding spaces allowed.
fn whole_number(text: &str) -> Result<i64, String> {
    text.trim()
        .parse::<i64>()
        .map_err(|_| "want a whole number".to_owned())
}

/// A page size or offset: a whole number, where a negative one means 0.
fn page_number(text: &str) -> Result<u64, String> {
    whole_number(text).map(|n| u64::try_from(n).unwrap_or(0))
}

/// One `KEY=VALUE` label, checked by the core's rules.
fn label(text: &str) -> Result<Label, String> {
    text.parse::<Label>().map_err(|e| e.detail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_tree_is_consistent() {
        command().debug_assert();
    }

    /// The manual is written by hand: it must name every command and
    /// every flag clap accepts.
    #[test]
    fn the_manual_names_every_command_and_flag() {
        fn check(cmd: &clap::Command, path: &str) {
            for arg in cmd.get_arguments() {
                if let Some(long) = arg.get_long().filter(|l| !["help", "version"].contains(l)) {
                    assert!(USAGE.contains(&format!("--{long}")), "{path} --{long}");
                }
            }
            for sub in cmd.get_subcommands() {
                let path = format!("{path} {}", sub.get_name()).trim().to_owned();
                assert!(USAGE.contains(&format!("  {path}")), "{path}");
                check(sub, &path);
            }
        }
        check(&command(), "");
    }

    #[test]
    fn numbers_trim_and_negative_pages_mean_zero() {
        assert_eq!(whole_number(" 7 "), Ok(7));
        assert_eq!(whole_number("-2"), Ok(-2));
        assert!(whole_number("ten").is_err());
        assert_eq!(page_number("-5"), Ok(0));
        assert_eq!(page_number("12"), Ok(12));
    }
}
