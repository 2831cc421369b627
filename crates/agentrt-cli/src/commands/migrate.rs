//! `migrate --from PATH --to URL`: a SQLite database copied into an empty
//! PostgreSQL one with its chain intact, checked by `verify` on both.

use std::io::Write;

use crate::args::Migrate;
use crate::error::CliError;

#[cfg(feature = "postgres")]
#[derive(serde::Serialize)]
struct Report<'a> {
    from: &'a str,
    to: &'a str,
    rows: Vec<Copied<'a>>,
    head_seq: i64,
    head_hash: &'a str,
    verified: bool,
}

#[cfg(feature = "postgres")]
#[derive(serde::Serialize)]
struct Copied<'a> {
    table: &'a str,
    rows: u64,
}

#[cfg(feature = "postgres")]
pub fn run(args: &Migrate, out: &mut dyn Write) -> Result<(), CliError> {
    use agentrt::text::sanitize;
    use agentrt::verify::{self, VerifyOptions};

    use crate::database::Database;
    use crate::open::{Access, open};
    use crate::output::{self, line};

    let from = Database::File(args.from.clone());
    let (from_shown, to_shown) = (sanitize(&from.shown()), args.to.shown());
    let Database::Postgres(url) = &args.to else {
        return Err(CliError::Failed(format!(
            "{to_shown} is not a PostgreSQL database"
        )));
    };
    let source = open(&from, Access::ReadOnly)?;
    // Only an intact chain is carried over: a broken one would arrive
    // looking as trustworthy as the rest.
    let before = verify::verify(&source, &VerifyOptions::default())?;
    if let Some(b) = &before.broken {
        return Err(CliError::Failed(format!(
            "{from_shown}: the event chain is broken at seq {}: {}; agentrt migrate copies only an intact chain (see agentrt verify)",
            b.seq,
            sanitize(&b.detail)
        )));
    }
    let copied = agentrt_postgres::copy_from(&source, url).map_err(|e| {
        CliError::Failed(format!("migrate into {to_shown}: {e}; nothing was copied"))
    })?;
    let destination = open(&args.to, Access::ReadOnly)?;
    let after = verify::verify(&destination, &VerifyOptions::default())?;
    if let Some(b) = &after.broken {
        return Err(CliError::Failed(format!(
            "{to_shown}: the copied chain is broken at seq {}: {}",
            b.seq,
            sanitize(&b.detail)
        )));
    }
    if after.head != before.head || after.checked != before.checked {
        return Err(CliError::Failed(format!(
            "{to_shown} verifies to another head than {from_shown}: {:?} and {:?}",
            after.head, before.head
        )));
    }
    let (head_seq, head_hash) = before
        .head
        .as_ref()
        .map_or((0, ""), |h| (h.seq, h.hash.as_str()));
    if args.json {
        return output::json(
            out,
            &Report {
                from: &from_shown,
                to: &to_shown,
                rows: copied
                    .rows
                    .iter()
                    .map(|(table, rows)| Copied { table, rows: *rows })
                    .collect(),
                head_seq,
                head_hash,
                verified: true,
            },
        );
    }
    let counts: Vec<String> = copied
        .rows
        .iter()
        .map(|(table, rows)| format!("{rows} {table}"))
        .collect();
    line(
        out,
        &format!("copied {from_shown} into {to_shown}: {}", counts.join(", ")),
    )?;
    line(
        out,
        &format!(
            "verify: both intact, {} events, the same head (seq {head_seq}, {head_hash})",
            after.checked
        ),
    )
}

#[cfg(not(feature = "postgres"))]
pub fn run(args: &Migrate, _: &mut dyn Write) -> Result<(), CliError> {
    Err(CliError::Failed(format!(
        "{} is a PostgreSQL database, and this agentrt was built without PostgreSQL (the `postgres` feature)",
        args.to.shown()
    )))
}
