//! Verifying the audit log (design §16): the hash chain over every run's
//! events, and the state rows digested into it.
//!
//! [`verify`] walks the events in `seq` order, a page of [`PAGE_EVENTS`] at
//! a time, inside one read transaction, and for each event:
//!
//! 1. checks that its seq follows the one before (a deleted event shows at
//!    the next seq);
//! 2. recomputes its link over the previous stored link and its fields
//!    ([`crate::chain`]) and compares it with the stored one;
//! 3. for each row its `rows_json` lists, looks the row up: a row whose
//!    `written_seq` is this event's seq must still have the digest listed;
//!    a row that is gone, or that claims an earlier writer than this event,
//!    is a break.
//!
//! The state tables are the core's and the extension tables the file's
//! registry (`extension_tables`) names, whatever satellite wrote them. The
//! registry is checked before the walk (each entry a valid extension table
//! as registered): an entry that does not hold is a break at seq 0.
//!
//! After an unbroken walk it counts the state rows whose `written_seq` lies
//! in the range walked (every row, when the whole log was walked): each
//! must have been matched by the event that last wrote it. A row added by
//! hand, or pointed at an event that does not list it, or written by an
//! event that was cut from the end of the log (even when every event was),
//! is named then.
//!
//! The walk stops at the first break. Memory stays flat: nothing is kept
//! per event or per row but counts; long fields are read in chunks.
//!
//! What an intact walk proves: the log up to its last event, and the state
//! rows it lists, are as the store wrote them, or were rewritten by someone
//! who recomputed every link after the change. Only a head kept where the
//! database's writers cannot reach it (see [`VerifyOptions::kept_head`])
//! reveals that, and a cut tail whose rows went with it (a restored older
//! copy of the file, say). A cut that leaves the rows it wrote behind is
//! caught by those rows.
//!
//! ```
//! use agentrt::verify::{self, VerifyOptions};
//!
//! let store = agentrt::Store::open(":memory:").unwrap();
//! let report = verify::verify(&store, &VerifyOptions::default()).unwrap();
//! assert!(report.intact());
//! assert_eq!(report.checked, 0);
//! assert_eq!(verify::chain_head(&store).unwrap(), None);
//! ```

mod listing;
mod seen;

use std::ops::ControlFlow;

use serde::Serialize;

use crate::chain::FieldHasher;
use crate::error::Result;
use crate::store::Store;
use crate::store::engine::{ChainRows, EventColumn, EventRow, Field, Piece};

use listing::ListingParser;
use seen::Seen;

/// Events read per page.
pub const PAGE_EVENTS: usize = 128;

/// Most characters of a stored link quoted in a break.
pub const MAX_FOUND_CHARS: usize = 128;

/// The chain head: an event's seq and its stored link.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChainHead {
    /// The seq.
    pub seq: i64,
    /// The stored link (64 lowercase hex characters when untouched).
    pub hash: String,
}

/// The first event that does not chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChainBreak {
    /// The event's seq. For a row no event accounts for: the seq the row
    /// names as its writer, or the seq after the last event when that one
    /// is gone (a cut tail).
    pub seq: i64,
    /// What should be stored: the recomputed link, or a row's listed
    /// digest (empty when there is none).
    pub expected: String,
    /// What is stored: the event's link or the row's digest now (at most
    /// [`MAX_FOUND_CHARS`] characters; empty when there is none).
    pub found: String,
    /// What is wrong, in words.
    pub detail: String,
}

/// A kept head compared with the log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeptHeadCheck {
    /// The kept seq.
    pub seq: i64,
    /// The kept link.
    pub hash: String,
    /// The link stored for that seq, when the walk reached it unbroken.
    pub found: Option<String>,
    /// Whether the walk reached the kept seq unbroken.
    pub reached: bool,
    /// Whether the stored link equals the kept one.
    pub matches: bool,
}

/// What to verify.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyOptions {
    /// The first seq to check (≤ 0: 1). A range not starting at 1 chains
    /// from the link stored for the seq before it.
    pub from: i64,
    /// The last seq to check (≤ 0: the chain head).
    pub to: i64,
    /// A head kept outside the database (from an earlier walk, or a signed
    /// head): the walk must reach its seq unbroken, with its link.
    pub kept_head: Option<ChainHead>,
}

/// The outcome of a walk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyReport {
    /// The chain head when the walk began (events committed later are not
    /// checked); `None` for an empty log.
    pub head: Option<ChainHead>,
    /// The first seq of the range.
    pub from: i64,
    /// The last seq checked unbroken (`0` when none was).
    pub to: i64,
    /// How many events were checked unbroken.
    pub checked: u64,
    /// The link of the last event checked unbroken (`""` when none was).
    pub hash: String,
    /// The first break (the spec's `break`), if any.
    pub broken: Option<ChainBreak>,
    /// The kept head's comparison, when one was given.
    pub kept_head: Option<KeptHeadCheck>,
    /// Rows written before their table joined the chain (model calls and
    /// tool specs in a database migrated from schema 1): not covered, and
    /// counted here so a reader knows.
    pub unchained_rows: u64,
}

impl VerifyReport {
    /// `true` when no break was found (a kept head is judged apart, by
    /// [`KeptHeadCheck::matches`]).
    pub fn intact(&self) -> bool {
        self.broken.is_none()
    }
}

/// The chain head: the highest stored event and its link; `None` for an
/// empty log.
pub fn chain_head(store: &Store) -> Result<Option<ChainHead>> {
    store.snapshot(|s| Ok(s.head()?.map(|(seq, hash)| ChainHead { seq, hash })))
}

/// The link stored for event `seq`, if there is such an event.
pub fn event_hash(store: &Store, seq: i64) -> Result<Option<String>> {
    store.snapshot(|s| s.hash_at(seq))
}

/// Verifies events `from..=to` (see [`VerifyOptions`]) and the rows they
/// list.
pub fn verify_events(store: &Store, from: i64, to: i64) -> Result<VerifyReport> {
    verify(
        store,
        &VerifyOptions {
            from,
            to,
            kept_head: None,
        },
    )
}

/// Verifies the chain as `options` say; read-only. Holds the store's
/// connection for the walk: verify a large log on a store of its own
/// (`Store::open_existing(path, true)`) to leave writers free.
pub fn verify(store: &Store, options: &VerifyOptions) -> Result<VerifyReport> {
    store.snapshot(|snap| Walk::run(snap, options))
}

/// The index of the chained table named `name`.
fn table_index(snap: &dyn ChainRows, name: &str) -> Result<Option<usize>> {
    for index in 0..snap.table_count()? {
        if snap.table_name(index)? == name {
            return Ok(Some(index));
        }
    }
    Ok(None)
}

/// The state of one walk.
struct Walk<'s> {
    snap: &'s dyn ChainRows,
    from: i64,
    /// The seq the next event must have.
    next: i64,
    /// The stored link of the last event checked.
    prev: String,
    checked: u64,
    broken: Option<ChainBreak>,
    /// Rows found current at the event that lists them, per table of
    /// the snapshot's chained tables.
    matched: Vec<u64>,
    kept: Option<ChainHead>,
    kept_found: Option<String>,
    hasher: FieldHasher,
    listing: ListingParser,
    seen: Seen,
}

fn quoted(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .chars()
        .take(MAX_FOUND_CHARS)
        .collect()
}

impl<'s> Walk<'s> {
    fn run(snap: &'s dyn ChainRows, options: &VerifyOptions) -> Result<VerifyReport> {
        let head = snap.head()?.map(|(seq, hash)| ChainHead { seq, hash });
        let from = options.from.max(1);
        let head_seq = head.as_ref().map_or(0, |h| h.seq);
        let to = if options.to <= 0 {
            head_seq
        } else {
            options.to
        };
        let mut walk = Walk {
            snap,
            from,
            next: from,
            prev: String::new(),
            checked: 0,
            broken: None,
            matched: vec![0; snap.table_count()?],
            kept: options.kept_head.clone(),
            kept_found: None,
            hasher: FieldHasher::new(),
            listing: ListingParser::default(),
            seen: Seen::default(),
        };
        if let Some(problem) = snap.registry_problem()? {
            // The registry says which tables the chain covers: one that
            // does not hold would leave rows unchecked.
            walk.set_break(0, String::new(), String::new(), problem.to_owned());
        } else if to >= from && head.is_some() {
            walk.walk(to)?;
        }
        if walk.broken.is_none() {
            // Even when no event was checked: a log whose every event was
            // deleted leaves the rows they wrote to name the cut.
            walk.account_for_rows(head_seq)?;
        }
        let (unchained_rows, recorded) = snap.unchained_rows()?;
        if walk.broken.is_none() && unchained_rows > recorded {
            // More rows claim to predate the chain than the migration
            // marked: someone marked rows to hide them from the walk.
            walk.set_break(
                0,
                recorded.to_string(),
                unchained_rows.to_string(),
                format!(
                    "{unchained_rows} rows are marked as written before their table joined the chain, but the migration marked {recorded}"
                ),
            );
        }
        let kept_head = walk.kept_check()?;
        let last = walk.next - 1;
        Ok(VerifyReport {
            head,
            from,
            to: if walk.checked > 0 { last } else { 0 },
            checked: walk.checked,
            hash: if walk.checked > 0 {
                walk.prev
            } else {
                String::new()
            },
            broken: walk.broken,
            kept_head,
            unchained_rows,
        })
    }

    fn walk(&mut self, to: i64) -> Result<()> {
        if self.from > 1 {
            match self.snap.hash_at(self.from - 1)? {
                Some(hash) => self.prev = hash,
                None => {
                    self.broken = Some(ChainBreak {
                        seq: self.from,
                        expected: String::new(),
                        found: String::new(),
                        detail: format!(
                            "the event before the range, seq {}, is missing",
                            self.from - 1
                        ),
                    });
                    return Ok(());
                }
            }
        }
        loop {
            let snap = self.snap;
            let (read, flow) =
                snap.events(self.next - 1, to, PAGE_EVENTS, &mut |e| self.check(e))?;
            if flow.is_break() || read < PAGE_EVENTS {
                return Ok(());
            }
        }
    }

    /// Checks one event; breaks the walk at the first problem.
    fn check(&mut self, event: &EventRow<'_>) -> Result<ControlFlow<()>> {
        let mut listing = std::mem::take(&mut self.listing);
        listing.reset();
        let flow = self.check_with(event, &mut listing);
        self.listing = listing;
        flow
    }

    fn check_with(
        &mut self,
        event: &EventRow<'_>,
        listing: &mut ListingParser,
    ) -> Result<ControlFlow<()>> {
        let seq = event.seq;
        self.hasher.reset();
        self.hasher.field(self.prev.as_bytes());
        self.hasher.int(seq);
        for (column, field) in EventColumn::ALL.into_iter().zip(event.fields) {
            let is_rows = column == EventColumn::Rows;
            match field {
                Field::Inline(bytes) => {
                    self.hasher.field(bytes);
                    if is_rows {
                        listing.whole(bytes);
                    }
                }
                Field::Long => {
                    let hasher = &mut self.hasher;
                    self.snap
                        .read_event_field(column, seq, &mut |piece| match piece {
                            Piece::Len(len) => hasher.begin(len),
                            Piece::Bytes(bytes) => {
                                hasher.piece(bytes);
                                if is_rows {
                                    listing.feed(bytes);
                                }
                            }
                        })?;
                    hasher.end();
                }
            }
        }
        let expected = self.hasher.finish().to_hex();
        if seq != self.next {
            // Pages are read from `self.next` on in seq order, so a seq
            // other than the next one is higher: the ones between are gone.
            let missing = if seq == self.next + 1 {
                format!("seq {} is missing", self.next)
            } else {
                format!("seqs {} to {} are missing", self.next, seq - 1)
            };
            return Ok(self.fail(seq, expected.to_string(), quoted(event.hash), missing));
        }
        if expected.as_bytes() != event.hash {
            return Ok(self.fail(
                seq,
                expected.to_string(),
                quoted(event.hash),
                "the stored link does not match the event's fields and the link before it".into(),
            ));
        }
        if let Err(why) = listing.finish() {
            return Ok(self.fail(seq, String::new(), String::new(), why));
        }
        for (table, id, digest) in listing.entries() {
            if self.check_row(seq, table, id, digest)?.is_break() {
                return Ok(ControlFlow::Break(()));
            }
        }
        if self.kept.as_ref().is_some_and(|k| k.seq == seq) {
            self.kept_found = Some(quoted(event.hash));
        }
        self.prev.clear();
        self.prev.push_str(expected.as_str());
        self.next = seq + 1;
        self.checked += 1;
        Ok(ControlFlow::Continue(()))
    }

    /// Checks one row the event at `seq` lists with `digest`.
    fn check_row(
        &mut self,
        seq: i64,
        table_name: &str,
        id: &str,
        digest: &str,
    ) -> Result<ControlFlow<()>> {
        let digest_text = || digest.to_owned();
        let snap = self.snap;
        let Some(table) = table_index(snap, table_name)? else {
            return Ok(self.fail(
                seq,
                digest_text(),
                String::new(),
                format!("the row listing names {table_name:?}, which is not a state table"),
            ));
        };
        let name = snap.table_name(table)?;
        let written = match self.seen.get(table, id) {
            Some(w) => Some(w),
            None => {
                let w = self.snap.row_written_seq(table, id)?;
                if let Some(w) = w {
                    self.seen.put(table, id, w);
                }
                w
            }
        };
        let Some(written) = written else {
            return Ok(self.fail(
                seq,
                digest_text(),
                String::new(),
                format!("{name} row {id:?}, written by this event, no longer exists"),
            ));
        };
        if written > seq {
            // A later event wrote the row again; that one is checked.
            return Ok(ControlFlow::Continue(()));
        }
        let now = self.snap.row_digest(table, id)?.unwrap_or_default();
        Ok(if written < seq {
            self.fail(
                seq,
                digest_text(),
                now.clone(),
                format!(
                    "{name} row {id:?} names seq {written} as its last writer, but this later event wrote it"
                ),
            )
        } else if now.as_str() == digest {
            if let Some(n) = self.matched.get_mut(table) {
                *n += 1;
            }
            ControlFlow::Continue(())
        } else {
            self.fail(
                seq,
                digest_text(),
                now,
                format!("{name} row {id:?} was changed after this event wrote it"),
            )
        })
    }

    /// After an unbroken walk: every state row whose `written_seq` lies in
    /// the range (every row, for a walk over the whole log) must have been
    /// matched by the event that wrote it. The break names the unmatched
    /// row with the lowest `written_seq`; on a tie, the one of the table
    /// first in name order.
    fn account_for_rows(&mut self, head_seq: i64) -> Result<()> {
        let last = self.next - 1;
        let range = if self.from == 1 && last >= head_seq {
            None
        } else {
            Some((self.from, last))
        };
        let snap = self.snap;
        let mut first: Option<(usize, String, i64)> = None;
        for table in 0..snap.table_count()? {
            let rows = snap.count_rows(table, range)?;
            if Some(&rows) == self.matched.get(table) {
                continue;
            }
            let found = self.snap.first_unlisted_row(table, range)?;
            let (id, written) = match found {
                Some(row) => row,
                // Counts differ but no row is unlisted: only a row listed
                // twice could do it, which the listing check refuses.
                None => (String::new(), last),
            };
            if first.as_ref().is_none_or(|(_, _, w)| written < *w) {
                first = Some((table, id, written));
            }
        }
        if let Some((table, id, written)) = first {
            let name = snap.table_name(table)?;
            let (seq, detail) = if written > head_seq {
                (
                    head_seq + 1,
                    format!(
                        "{name} row {id:?} names seq {written} as its last writer, after the last event (seq {head_seq}): events were cut from the end"
                    ),
                )
            } else if written <= 0 {
                (
                    written,
                    format!("{name} row {id:?} names no event as its writer"),
                )
            } else {
                (
                    written,
                    format!(
                        "{name} row {id:?} names seq {written} as its last writer, which does not list it"
                    ),
                )
            };
            self.set_break(seq, String::new(), String::new(), detail);
        }
        Ok(())
    }

    fn kept_check(&self) -> Result<Option<KeptHeadCheck>> {
        let Some(kept) = &self.kept else {
            return Ok(None);
        };
        let found = if kept.seq < self.from {
            self.snap.hash_at(kept.seq)?
        } else {
            self.kept_found.clone()
        };
        Ok(Some(KeptHeadCheck {
            seq: kept.seq,
            hash: kept.hash.clone(),
            reached: found.is_some(),
            matches: found.as_deref() == Some(kept.hash.as_str()),
            found,
        }))
    }

    /// Records the break and stops the walk.
    fn fail(
        &mut self,
        seq: i64,
        expected: String,
        found: String,
        detail: String,
    ) -> ControlFlow<()> {
        self.set_break(seq, expected, found, detail);
        ControlFlow::Break(())
    }

    fn set_break(&mut self, seq: i64, expected: String, found: String, detail: String) {
        self.broken = Some(ChainBreak {
            seq,
            expected,
            found,
            detail,
        });
    }
}
