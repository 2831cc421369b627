//! One module per command; each reads through `agentrt::view` or decides
//! through `agentrt::Operator`, and writes its report to stdout.

mod cancel;
mod decide;
mod events;
mod follow;
mod head;
pub mod keygen;
pub mod migrate;
pub mod policy;
mod runs;
mod show;
mod verify;

use std::io::Write;

use crate::args::{Command, Invocation};
use crate::error::CliError;
use crate::keys;
use crate::open::{Access, open};

/// Runs a validated invocation, writing its report to `out`.
pub fn run(inv: &Invocation, out: &mut dyn Write) -> Result<(), CliError> {
    match &inv.command {
        Command::Runs { paging, labels } => {
            let store = open(&inv.db, Access::ReadOnly)?;
            runs::run(&store, *paging, labels, inv.json, out)
        }
        Command::Show { run, paging } => {
            let store = open(&inv.db, Access::ReadOnly)?;
            show::run(&store, run, *paging, inv, out)
        }
        Command::Events { run, paging } => {
            let store = open(&inv.db, Access::ReadOnly)?;
            events::run(&store, run, *paging, inv.json, out)
        }
        Command::Follow { run, start } => {
            let store = open(&inv.db, Access::ReadOnly)?;
            follow::run(store, run.as_deref(), start, out)
        }
        Command::Decide(decide) => {
            let store = open(&inv.db, Access::ReadWrite)?;
            decide::run(&store, decide, inv, out)
        }
        Command::Cancel { run, by, note } => {
            let store = open(&inv.db, Access::ReadWrite)?;
            cancel::run(&store, run, by, note, inv.json, out)
        }
        Command::Verify(args) => {
            // A signed head is read and checked before the database opens.
            let kept = verify::resolve(args)?;
            let store = open(&inv.db, Access::ReadOnly)?;
            verify::run(&store, args, kept.as_ref(), inv.json, out)
        }
        Command::PolicyRecheck {
            file,
            run,
            limit,
            tools,
        } => {
            let store = open(&inv.db, Access::ReadOnly)?;
            policy::recheck(
                &store,
                file,
                run.as_deref(),
                *limit,
                tools.as_deref(),
                inv.json,
                out,
            )
        }
        Command::HeadSign { key, out: file } => {
            let key = keys::read_private(key)?;
            let store = open(&inv.db, Access::ReadOnly)?;
            head::sign(&store, &inv.db, &key, file.as_deref(), inv.json, out)
        }
    }
}

/// The paging footer of a listing, when rows exist past the page:
/// `... <k> more <what>; rerun with --offset <next> to see them (showing <n> of <total>)`.
pub fn footer(what: &str, offset: u64, shown: usize, total: u64) -> Option<String> {
    let next = offset.saturating_add(shown as u64);
    (next < total).then(|| {
        format!(
            "... {} more {what}; rerun with --offset {next} to see them (showing {shown} of {total})",
            total - next
        )
    })
}
