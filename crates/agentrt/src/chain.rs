//! The hash chain over the event log: each event stores a BLAKE3 link over
//! the previous link and its own fields, length-prefixed, across all runs
//! in `seq` order.
//!
//! Two layouts are pinned here (and by the tests of this module):
//!
//! - the **link** of an event: BLAKE3 over `ns(prev) ns(seq) ns(run_id)
//!   ns(step_id) ns(at) ns(type) ns(payload_json) ns(rows_json)`, lowercase
//!   hex; `prev` is the stored link of the event before it (`""` for the
//!   first event);
//! - the **row digest** of a state row (the core's `runs`, `steps`,
//!   `approvals`, `run_labels`, `model_calls`, `tool_specs`, and every
//!   registered extension table): BLAKE3 over `ns(table) ns(column 1) …
//!   ns(column n)`, lowercase hex, with the columns in the fixed order of
//!   `store::schema::StateTable::digested_columns`, or of the extension
//!   table's registered columns.
//!
//! `ns(b)` is the length of `b` in bytes, in ASCII decimal, then `:`, the
//! bytes, then `,`. Text is hashed exactly as stored; integers are written
//! in ASCII decimal (`-` for negatives, no leading zeros).
//!
//! The last event of every write transaction carries in `rows_json` the
//! digests of the state rows that transaction inserted or updated, as a
//! canonical JSON array of `[table, id, digest]` sorted by table, then id
//! (see [`rows_json`]). Because the link covers `rows_json`, a state row
//! changed after the fact no longer matches the digest its event holds.

use crate::json::write_string;

/// The fields of one event, as stored, for [`link`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Link<'a> {
    /// The stored link of the event before (`""` for the first event).
    pub prev: &'a str,
    /// The event's seq.
    pub seq: i64,
    /// The run.
    pub run_id: &'a str,
    /// The step (`""` for none).
    pub step_id: &'a str,
    /// The time as stored (decision 6 text).
    pub at: &'a str,
    /// The event type.
    pub event_type: &'a str,
    /// The payload JSON as stored.
    pub payload: &'a str,
    /// The row listing as stored (`""` on every event but the last of a
    /// transaction that wrote state rows).
    pub rows: &'a str,
}

/// The link of one event: BLAKE3 over `ns(prev) ns(seq) ns(run_id)
/// ns(step_id) ns(at) ns(type) ns(payload_json) ns(rows_json)`, lowercase
/// hex. Fields exactly as stored.
///
/// ```
/// use agentrt::chain::{Link, link};
///
/// let first = link(&Link {
///     prev: "",
///     seq: 1,
///     run_id: "r",
///     step_id: "",
///     at: "2026-10-01T09:00:00.000000000Z",
///     event_type: "run.started",
///     payload: "{}",
///     rows: "",
/// });
/// assert_eq!(first.len(), 64);
/// ```
pub fn link(fields: &Link<'_>) -> String {
    let mut h = FieldHasher::new();
    h.field(fields.prev.as_bytes());
    h.int(fields.seq);
    h.field(fields.run_id.as_bytes());
    h.field(fields.step_id.as_bytes());
    h.field(fields.at.as_bytes());
    h.field(fields.event_type.as_bytes());
    h.field(fields.payload.as_bytes());
    h.field(fields.rows.as_bytes());
    h.finish().to_hex().to_string()
}

/// One column value of a state row, for [`row_digest`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowValue<'a> {
    /// An INTEGER column, hashed in ASCII decimal.
    Int(i64),
    /// A TEXT column, hashed as stored.
    Text(&'a [u8]),
    /// A NULL, hashed as a field no text can be (`\0null`).
    Null,
}

/// How a NULL column is hashed in a row digest, by every engine.
pub(crate) const NULL_FIELD: &[u8] = b"\0null";

/// The digest of a state row: BLAKE3 over `ns(table)` and `ns(value)` for
/// each column in the table's fixed order, lowercase hex.
///
/// ```
/// use agentrt::chain::{RowValue, row_digest};
///
/// let d = row_digest("steps", &[RowValue::Text(b"s1"), RowValue::Int(0)]);
/// assert_eq!(d.len(), 64);
/// assert_ne!(d, row_digest("steps", &[RowValue::Text(b"s1"), RowValue::Int(1)]));
/// ```
pub fn row_digest(table: &str, values: &[RowValue<'_>]) -> String {
    let mut h = FieldHasher::new();
    h.field(table.as_bytes());
    for v in values {
        match v {
            RowValue::Int(n) => h.int(*n),
            RowValue::Text(t) => h.field(t),
            RowValue::Null => h.field(NULL_FIELD),
        }
    }
    h.finish().to_hex().to_string()
}

/// The `rows_json` text for the rows a transaction wrote: a JSON array of
/// `[table, id, digest]`, sorted by table then id (bytes), in the
/// canonical form; `""` when there are none.
///
/// ```
/// let text = agentrt::chain::rows_json(&mut vec![
///     ("steps", "s1".to_owned(), "d2".to_owned()),
///     ("runs", "r1".to_owned(), "d1".to_owned()),
/// ]);
/// assert_eq!(text, r#"[["runs","r1","d1"],["steps","s1","d2"]]"#);
/// assert_eq!(agentrt::chain::rows_json(&mut Vec::new()), "");
/// ```
pub fn rows_json(entries: &mut [(&str, String, String)]) -> String {
    if entries.is_empty() {
        return String::new();
    }
    entries.sort_unstable_by(|a, b| (a.0, a.1.as_str()).cmp(&(b.0, b.1.as_str())));
    let mut out = String::from("[");
    for (i, (table, id, digest)) in entries.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push('[');
        write_string(&mut out, table);
        out.push(',');
        write_string(&mut out, id);
        out.push(',');
        write_string(&mut out, digest);
        out.push(']');
    }
    out.push(']');
    out
}

/// Hashes a sequence of length-prefixed fields (`ns(b)` each) with BLAKE3.
/// Small fields are gathered in a buffer and hashed in one call; a long
/// field can be given in pieces ([`FieldHasher::begin`],
/// [`FieldHasher::piece`], [`FieldHasher::end`]) so it never has to be in
/// memory whole.
///
/// ```
/// use agentrt::chain::FieldHasher;
///
/// let mut whole = FieldHasher::new();
/// whole.field(b"hello");
/// let mut pieces = FieldHasher::new();
/// pieces.begin(5);
/// pieces.piece(b"hel");
/// pieces.piece(b"lo");
/// pieces.end();
/// assert_eq!(whole.finish(), pieces.finish());
/// assert_eq!(whole.finish(), blake3::hash(b"5:hello,"));
/// ```
#[derive(Debug, Clone, Default)]
pub struct FieldHasher {
    hasher: blake3::Hasher,
    buf: Vec<u8>,
}

/// Pieces larger than this go straight to the hasher.
const BUFFER_LIMIT: usize = 16 * 1024;

impl FieldHasher {
    /// An empty hasher.
    pub fn new() -> FieldHasher {
        FieldHasher::default()
    }

    /// Forgets everything hashed so far (keeps the buffer's memory).
    pub fn reset(&mut self) {
        self.hasher.reset();
        self.buf.clear();
    }

    /// Adds `ns(bytes)`.
    pub fn field(&mut self, bytes: &[u8]) {
        self.begin(bytes.len() as u64);
        self.piece(bytes);
        self.end();
    }

    /// Adds `ns(decimal n)`.
    pub fn int(&mut self, n: i64) {
        let mut digits = [0u8; 20];
        let text = decimal(n, &mut digits);
        self.field(text);
    }

    /// Starts a field of `len` bytes: `len` then `:`. Give exactly `len`
    /// bytes with [`FieldHasher::piece`], then call [`FieldHasher::end`].
    pub fn begin(&mut self, len: u64) {
        let mut digits = [0u8; 20];
        let text = decimal_u64(len, &mut digits);
        self.buf.extend_from_slice(text);
        self.buf.push(b':');
    }

    /// Adds bytes of the current field.
    pub fn piece(&mut self, bytes: &[u8]) {
        if bytes.len() >= BUFFER_LIMIT {
            self.flush();
            self.hasher.update(bytes);
        } else {
            self.buf.extend_from_slice(bytes);
            if self.buf.len() >= BUFFER_LIMIT {
                self.flush();
            }
        }
    }

    /// Ends the current field: `,`.
    pub fn end(&mut self) {
        self.buf.push(b',');
    }

    /// The hash of everything added.
    pub fn finish(&mut self) -> blake3::Hash {
        self.flush();
        self.hasher.finalize()
    }

    fn flush(&mut self) {
        if !self.buf.is_empty() {
            self.hasher.update(&self.buf);
            self.buf.clear();
        }
    }
}

/// `n` in ASCII decimal, written into `out`.
fn decimal(n: i64, out: &mut [u8; 20]) -> &[u8] {
    if n >= 0 {
        return decimal_u64(n.unsigned_abs(), out);
    }
    let len = {
        let digits = decimal_u64(n.unsigned_abs(), out);
        digits.len()
    };
    // 20 bytes hold "-" and the 19 digits of i64::MIN's magnitude.
    let start = out.len() - len;
    out[start - 1] = b'-';
    &out[start - 1..]
}

/// `n` in ASCII decimal, right-aligned in `out`.
fn decimal_u64(mut n: u64, out: &mut [u8; 20]) -> &[u8] {
    let mut i = out.len();
    loop {
        i -= 1;
        out[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &out[i..]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn golden_link() -> Link<'static> {
        Link {
            prev: "",
            seq: 1,
            run_id: "r",
            step_id: "",
            at: "2026-10-01T09:00:00.000000000Z",
            event_type: "run.started",
            payload: "{}",
            rows: "",
        }
    }

    #[test]
    fn link_golden() {
        // The spec's layout example with the Rust time text (decision 6)
        // and the row listing as the eighth field.
        let bytes = "0:,1:1,1:r,0:,30:2026-10-01T09:00:00.000000000Z,11:run.started,2:{},0:,";
        let want = blake3::hash(bytes.as_bytes()).to_hex().to_string();
        assert_eq!(link(&golden_link()), want);
        assert_eq!(
            link(&golden_link()),
            "c2057d0f21087d557037a6274c5e09e79f28770d5836567bb2e09141efec7250"
        );
    }

    #[test]
    fn link_covers_the_row_listing() {
        let rows = r#"[["runs","r","d"]]"#;
        let with_rows = Link {
            rows,
            ..golden_link()
        };
        let bytes = format!(
            "0:,1:1,1:r,0:,30:2026-10-01T09:00:00.000000000Z,11:run.started,2:{{}},{}:{rows},",
            rows.len()
        );
        assert_eq!(
            link(&with_rows),
            blake3::hash(bytes.as_bytes()).to_hex().as_str()
        );
        assert_ne!(link(&with_rows), link(&golden_link()));
    }

    #[test]
    fn row_digest_golden() {
        let values = [
            RowValue::Text(b"s1"),
            RowValue::Text(b"r1"),
            RowValue::Int(0),
            RowValue::Int(-12),
            RowValue::Text(b""),
        ];
        let bytes = "5:steps,2:s1,2:r1,1:0,3:-12,0:,";
        assert_eq!(
            row_digest("steps", &values),
            blake3::hash(bytes.as_bytes()).to_hex().as_str()
        );
        assert_eq!(
            row_digest("steps", &values),
            "770a6840c975360d68232a25adfe4dbbf15e926dd41029239313c179979d50f7"
        );
    }

    #[test]
    fn integers_are_plain_decimal() {
        let mut d = [0u8; 20];
        assert_eq!(decimal(0, &mut d), b"0");
        assert_eq!(decimal(42, &mut d), b"42");
        assert_eq!(decimal(-7, &mut d), b"-7");
        assert_eq!(decimal(i64::MAX, &mut d), i64::MAX.to_string().as_bytes());
        assert_eq!(decimal(i64::MIN, &mut d), i64::MIN.to_string().as_bytes());
    }

    #[test]
    fn long_fields_in_pieces_hash_like_whole_fields() {
        let long = vec![b'x'; 3 * BUFFER_LIMIT + 17];
        let mut whole = FieldHasher::new();
        whole.field(b"a");
        whole.field(&long);
        let mut parts = FieldHasher::new();
        parts.field(b"a");
        parts.begin(long.len() as u64);
        for chunk in long.chunks(5000) {
            parts.piece(chunk);
        }
        parts.end();
        assert_eq!(whole.finish(), parts.finish());
        let mut direct = format!("1:a,{}:", long.len()).into_bytes();
        direct.extend_from_slice(&long);
        direct.push(b',');
        assert_eq!(whole.finish(), blake3::hash(&direct));
    }

    #[test]
    fn rows_json_is_sorted_and_escaped() {
        let mut entries = vec![
            ("steps", "b".to_owned(), "d3".to_owned()),
            ("approvals", "q\"x".to_owned(), "d1".to_owned()),
            ("steps", "a".to_owned(), "d2".to_owned()),
        ];
        assert_eq!(
            rows_json(&mut entries),
            r#"[["approvals","q\"x","d1"],["steps","a","d2"],["steps","b","d3"]]"#
        );
    }
}
