//! `head sign`: verifies the whole chain, then signs its head with the
//! operator's Ed25519 key (see [`crate::signed_head`] for the document).

use crate::database::Database;
use std::io::Write;
use std::path::Path;

use agentrt::text::sanitize;
use agentrt::verify::{self, VerifyOptions};
use agentrt::{Store, Timestamp};
use ed25519_dalek::SigningKey;

use crate::error::CliError;
use crate::output::{line, raw};
use crate::signed_head::SignedHead;

pub fn sign(
    store: &Store,
    db: &Database,
    key: &SigningKey,
    out_file: Option<&Path>,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let report = verify::verify(store, &VerifyOptions::default())?;
    if let Some(b) = &report.broken {
        return Err(CliError::Failed(format!(
            "the event chain is broken at seq {}: {}; agentrt signs only an intact chain (see agentrt verify)",
            b.seq, b.detail
        )));
    }
    let Some(head) = report.head else {
        return Err(CliError::Failed(
            "the database has no events: there is no head to sign".into(),
        ));
    };
    // A file as the store opened it; a server's URL without its password.
    let database = store
        .path()
        .map(|p| p.to_string_lossy().into_owned())
        .or_else(|| Some(db.shown()));
    let signed = SignedHead::new(
        key,
        head.seq,
        &head.hash,
        &Timestamp::now().to_string(),
        database,
    )?;
    let text = signed.to_text()?;
    match out_file {
        None => raw(out, &text),
        Some(path) => {
            write_new(path, &text)?;
            if json {
                return raw(out, &text);
            }
            line(
                out,
                &format!("signed head: seq {} {}", signed.seq, signed.hash),
            )?;
            line(
                out,
                &format!("written to {}", sanitize(&path.to_string_lossy())),
            )
        }
    }
}

/// Writes a new file; never replaces one (a signed head is evidence).
fn write_new(path: &Path, text: &str) -> Result<(), CliError> {
    let fail = |e: std::io::Error| {
        CliError::Failed(if e.kind() == std::io::ErrorKind::AlreadyExists {
            format!(
                "{} exists; agentrt never overwrites a signed head: choose another --out",
                sanitize(&path.to_string_lossy())
            )
        } else {
            format!("{}: {e}", sanitize(&path.to_string_lossy()))
        })
    };
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(fail)?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(fail)
}
