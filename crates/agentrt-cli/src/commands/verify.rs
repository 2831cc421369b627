//! `verify`: checks the hash chain over every run's events, and the state
//! rows digested into it (design §16), optionally against a head kept
//! outside the database (`--head SEQ:HASH`) or a signed head.

use std::io::Write;

use agentrt::Store;
use agentrt::Timestamp;
use agentrt::text::sanitize;
use agentrt::verify::{self, ChainHead, KeptHeadCheck, VerifyOptions, VerifyReport};
use serde::Serialize;

use crate::args::{KeptHead, Verify, check_head_seq};
use crate::error::CliError;
use crate::output::{self, line};
use crate::signed_head::{self, SignedHead};

/// The head to compare with, resolved before the database is opened.
#[derive(Debug)]
pub enum Kept {
    /// `--head SEQ:HASH`.
    Given(ChainHead),
    /// A signed head whose signature was checked.
    Signed(SignedHead),
}

impl Kept {
    fn head(&self) -> ChainHead {
        match self {
            Kept::Given(h) => h.clone(),
            Kept::Signed(s) => ChainHead {
                seq: s.seq,
                hash: s.hash.clone(),
            },
        }
    }

    fn noun(&self) -> &'static str {
        match self {
            Kept::Given(_) => "kept head",
            Kept::Signed(_) => "signed head",
        }
    }
}

/// Reads and checks a signed head (signature, then its seq against
/// `--from`/`--to`); nothing is opened but the two files.
pub fn resolve(args: &Verify) -> Result<Option<Kept>, CliError> {
    Ok(match &args.kept {
        None => None,
        Some(KeptHead::Given { seq, hash }) => Some(Kept::Given(ChainHead {
            seq: *seq,
            hash: hash.clone(),
        })),
        Some(KeptHead::Signed { file, pubkey }) => {
            let head = signed_head::read_checked(file, pubkey)?;
            check_head_seq(head.seq, args.from, args.to)
                .map_err(|m| CliError::Usage(format!("the signed head: {m}")))?;
            Some(Kept::Signed(head))
        }
    })
}

#[derive(Serialize)]
struct Requested {
    to: i64,
    reached: bool,
}

#[derive(Serialize)]
struct SignedJson<'a> {
    seq: i64,
    hash: &'a str,
    at: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    database: Option<&'a str>,
    public_key: &'a str,
    found: Option<&'a str>,
    matches: bool,
}

#[derive(Serialize)]
struct Report<'a> {
    head: ChainHead,
    from: i64,
    to: i64,
    hash: &'a str,
    checked: u64,
    intact: bool,
    #[serde(rename = "break", skip_serializing_if = "Option::is_none")]
    broken: Option<&'a verify::ChainBreak>,
    #[serde(skip_serializing_if = "Option::is_none")]
    requested: Option<Requested>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kept_head: Option<&'a KeptHeadCheck>,
    #[serde(skip_serializing_if = "Option::is_none")]
    signed_head: Option<SignedJson<'a>>,
    /// Rows older than their table's place on the chain (only when some are).
    #[serde(skip_serializing_if = "is_zero")]
    unchained_rows: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

pub fn run(
    store: &Store,
    args: &Verify,
    kept: Option<&Kept>,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let report = verify::verify(
        store,
        &VerifyOptions {
            from: args.from,
            to: args.to,
            kept_head: kept.map(Kept::head),
        },
    )?;
    let requested = (args.to > 0).then(|| Requested {
        to: args.to,
        reached: report.intact() && report.to >= args.to,
    });
    if json {
        write_json(&report, requested, kept, out)?;
    } else {
        write_text(&report, kept, out)?;
    }
    verdict(&report, args, kept)
}

fn write_json(
    report: &VerifyReport,
    requested: Option<Requested>,
    kept: Option<&Kept>,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let check = report.kept_head.as_ref();
    let signed = match (kept, check) {
        (Some(Kept::Signed(s)), Some(c)) => Some(SignedJson {
            seq: s.seq,
            hash: &s.hash,
            at: &s.at,
            database: s.database.as_deref(),
            public_key: &s.public_key,
            found: c.found.as_deref(),
            matches: c.matches,
        }),
        _ => None,
    };
    let given = matches!(kept, Some(Kept::Given(_)));
    output::json(
        out,
        &Report {
            head: report.head.clone().unwrap_or(ChainHead {
                seq: 0,
                hash: String::new(),
            }),
            from: report.from,
            to: report.to,
            hash: &report.hash,
            checked: report.checked,
            intact: report.intact(),
            broken: report.broken.as_ref(),
            requested,
            kept_head: check.filter(|_| given),
            signed_head: signed,
            unchained_rows: report.unchained_rows,
        },
    )
}

fn or_dash(text: &str) -> String {
    if text.is_empty() {
        "-".to_owned()
    } else {
        sanitize(text)
    }
}

fn write_text(
    report: &VerifyReport,
    kept: Option<&Kept>,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    match &report.head {
        None => line(out, "head: no events")?,
        Some(h) => line(out, &format!("head: seq {} {}", h.seq, sanitize(&h.hash)))?,
    }
    if let Some(b) = &report.broken {
        line(
            out,
            &format!("broken at seq {}: {}", b.seq, sanitize(&b.detail)),
        )?;
        line(out, &format!("  expected {}", or_dash(&b.expected)))?;
        return line(out, &format!("  found    {}", or_dash(&b.found)));
    }
    if report.checked == 0 {
        line(out, "intact: no events in the range")?;
    } else {
        line(
            out,
            &format!(
                "intact: {} event(s), seq {} to {}",
                report.checked, report.from, report.to
            ),
        )?;
        line(
            out,
            &format!("last checked: seq {} {}", report.to, sanitize(&report.hash)),
        )?;
    }
    if report.unchained_rows > 0 {
        line(
            out,
            &format!(
                "not covered: {} model call or tool spec row(s) written before schema 2 chained them",
                report.unchained_rows
            ),
        )?;
    }
    if let (Some(kept), Some(check)) = (kept, &report.kept_head)
        && check.matches
    {
        let text = match kept {
            Kept::Given(_) => format!("kept head: seq {} matches", check.seq),
            Kept::Signed(s) => {
                let at = Timestamp::parse(&s.at)
                    .map(|t| output::stamp(&t))
                    .unwrap_or_else(|_| sanitize(&s.at));
                format!(
                    "signed head: seq {} matches (signed {at} with key {})",
                    check.seq,
                    sanitize(&s.public_key)
                )
            }
        };
        line(out, &text)?;
    }
    Ok(())
}

/// Exit 1 for a break, a `--to` not reached, or a head not matched.
fn verdict(report: &VerifyReport, args: &Verify, kept: Option<&Kept>) -> Result<(), CliError> {
    if let Some(b) = &report.broken {
        return Err(CliError::Failed(format!(
            "the event chain is broken at seq {}",
            b.seq
        )));
    }
    if args.to > 0 && report.to < args.to {
        return Err(CliError::Failed(format!(
            "the event chain is shorter than asked: --to {} was not reached; the last event checked is seq {}",
            args.to, report.to
        )));
    }
    if let (Some(kept), Some(check)) = (kept, &report.kept_head) {
        let noun = kept.noun();
        if !check.reached {
            return Err(CliError::Failed(format!(
                "the event chain is shorter than the {noun}: the {noun}, seq {}, was not reached; the last event checked is seq {}",
                check.seq, report.to
            )));
        }
        if !check.matches {
            let (name, kept_word) = match kept {
                Kept::Given(_) => ("head kept", "kept"),
                Kept::Signed(_) => ("signed head", "signed"),
            };
            return Err(CliError::Failed(format!(
                "the event chain does not match the {name}: seq {} has hash {}, not the {} {kept_word}",
                check.seq,
                sanitize(check.found.as_deref().unwrap_or_default()),
                sanitize(&check.hash)
            )));
        }
    }
    Ok(())
}
