//! The row listing of an event (`rows_json`), parsed as it is read: fed
//! in pieces, so a long listing never has to be in memory as text.
//!
//! The accepted form is the one the store writes: `""`, or a JSON array of
//! `[table, id, digest]` string triples with no whitespace, strictly sorted
//! by table, then id. Anything else is malformed (the link covers the
//! bytes, so only a forged chain can hold another form).

/// Longest entry accepted, in bytes.
const MAX_ENTRY: usize = 1 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum State {
    /// Nothing read yet.
    #[default]
    Start,
    /// After the opening `[`: an entry or `]`.
    Open,
    /// After a `,`: an entry.
    Next,
    /// Inside an entry.
    Entry,
    /// After an entry: `,` or `]`.
    After,
    /// After the closing `]`.
    Done,
}

/// Where one entry's three strings are in [`ListingParser::text`].
type Spans = [(usize, usize); 3];

/// Parses a listing fed with [`ListingParser::feed`]; reusable across
/// events ([`ListingParser::reset`]) so the walk allocates once.
#[derive(Debug, Default)]
pub(super) struct ListingParser {
    state: State,
    entry: Vec<u8>,
    in_string: bool,
    escaped: bool,
    /// Every entry's strings, one after the other.
    text: String,
    spans: Vec<Spans>,
    error: Option<String>,
}

impl ListingParser {
    /// Forgets the last listing.
    pub(super) fn reset(&mut self) {
        self.state = State::Start;
        self.entry.clear();
        self.text.clear();
        self.spans.clear();
        self.error = None;
    }

    /// Reads a whole listing. The common form (no backslash anywhere) is
    /// split at its quotes directly; anything else goes through
    /// [`ListingParser::feed`].
    pub(super) fn whole(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        if !bytes.contains(&b'\\')
            && let Ok(text) = std::str::from_utf8(bytes)
            && self.split_plain(text).is_some()
        {
            self.state = State::Done;
            return;
        }
        self.reset();
        self.feed(bytes);
    }

    /// `[["t","i","d"],…]` without escapes, split at its quotes; `None`
    /// (with whatever was taken left in place) when it has another form.
    fn split_plain(&mut self, text: &str) -> Option<()> {
        let mut rest = text.strip_prefix('[')?;
        if rest == "]" {
            return Some(());
        }
        loop {
            rest = rest.strip_prefix("[\"")?;
            let mut spans = [(0, 0); 3];
            for (k, span) in spans.iter_mut().enumerate() {
                let end = rest.find('"')?;
                let part = &rest[..end];
                if part.bytes().any(|b| b < 0x20) {
                    return None;
                }
                let a = self.text.len();
                self.text.push_str(part);
                *span = (a, self.text.len());
                rest = &rest[end..];
                rest = if k < 2 {
                    rest.strip_prefix("\",\"")?
                } else {
                    rest.strip_prefix("\"]")?
                };
            }
            self.spans.push(spans);
            if !self.sorted() {
                return None;
            }
            match rest.as_bytes().first()? {
                b',' => rest = &rest[1..],
                b']' if rest.len() == 1 => return Some(()),
                _ => return None,
            }
        }
    }

    /// Whether the last entry sorts after the one before it.
    fn sorted(&self) -> bool {
        let n = self.spans.len();
        if n < 2 {
            return true;
        }
        let key = |s: &Spans| {
            let part = |(a, b): (usize, usize)| self.text.get(a..b).unwrap_or_default();
            (part(s[0]), part(s[1]))
        };
        key(&self.spans[n - 2]) < key(&self.spans[n - 1])
    }

    /// Reads the next piece of the listing.
    pub(super) fn feed(&mut self, bytes: &[u8]) {
        let mut i = 0;
        while i < bytes.len() && self.error.is_none() {
            if self.state == State::Entry && !self.escaped {
                // A run of bytes that change nothing is copied at once (the
                // byte after a backslash goes through `byte`).
                let rest = &bytes[i..];
                let plain = rest
                    .iter()
                    .position(|b| matches!(b, b'"' | b'\\' | b']'))
                    .unwrap_or(rest.len());
                if plain > 0 {
                    if self.entry.len() + plain > MAX_ENTRY {
                        return self.fail("a row listing entry is over 1 MiB");
                    }
                    self.entry.extend_from_slice(&rest[..plain]);
                    i += plain;
                    continue;
                }
            }
            self.byte(bytes[i]);
            i += 1;
        }
    }

    /// Checks that the listing ended; then [`ListingParser::entries`] are
    /// all of it.
    pub(super) fn finish(&self) -> Result<(), String> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        match self.state {
            State::Start | State::Done => Ok(()),
            _ => Err("the row listing ends early".into()),
        }
    }

    /// The entries read: `(table, id, digest)`.
    pub(super) fn entries(&self) -> impl Iterator<Item = (&str, &str, &str)> + '_ {
        self.spans.iter().map(|spans| {
            let [t, i, d] = spans.map(|(a, b)| self.text.get(a..b).unwrap_or_default());
            (t, i, d)
        })
    }

    fn fail(&mut self, why: impl Into<String>) {
        self.error = Some(why.into());
    }

    fn byte(&mut self, b: u8) {
        match (self.state, b) {
            (State::Start, b'[') => self.state = State::Open,
            (State::Open, b']') | (State::After, b']') => self.state = State::Done,
            (State::Open | State::Next, b'[') => self.start_entry(),
            (State::After, b',') => self.state = State::Next,
            (State::Entry, _) => self.entry_byte(b),
            (state, b) => self.fail(format!(
                "the row listing has {:?} where it does not belong ({state:?})",
                char::from(b)
            )),
        }
    }

    fn start_entry(&mut self) {
        self.entry.clear();
        self.entry.push(b'[');
        self.in_string = false;
        self.escaped = false;
        self.state = State::Entry;
    }

    fn entry_byte(&mut self, b: u8) {
        if self.entry.len() >= MAX_ENTRY {
            return self.fail("a row listing entry is over 1 MiB");
        }
        self.entry.push(b);
        if self.in_string {
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.in_string = false;
            }
            return;
        }
        // Anything else outside the strings (a nested array or object,
        // whitespace) is refused when the entry ends: it is then not
        // three strings.
        match b {
            b'"' => self.in_string = true,
            b']' => self.end_entry(),
            _ => {}
        }
    }

    fn end_entry(&mut self) {
        let start = self.text.len();
        if let Err(e) = self.take_entry() {
            self.text.truncate(start);
            return self.fail(format!(
                "a row listing entry is not [table, id, digest]: {e}"
            ));
        }
        if !self.sorted() {
            return self
                .fail("the row listing is not sorted by table and id, or lists a row twice");
        }
        self.state = State::After;
    }

    /// Appends the entry's three strings to `text` and their spans.
    fn take_entry(&mut self) -> Result<(), String> {
        let entry = std::mem::take(&mut self.entry);
        let result = self.split_entry(&entry);
        self.entry = entry;
        let spans = result?;
        self.spans.push(spans);
        Ok(())
    }

    fn split_entry(&mut self, entry: &[u8]) -> Result<Spans, String> {
        // The store writes no escapes in tables and digests, and ids rarely
        // have any: without a backslash the strings are the bytes between
        // the quotes. Otherwise JSON decodes them.
        let strings: Vec<String>;
        let parts: [&str; 3] = if !entry.contains(&b'\\') {
            let inner = entry
                .strip_prefix(b"[\"")
                .and_then(|e| e.strip_suffix(b"\"]"))
                .ok_or("not three strings")?;
            let inner = std::str::from_utf8(inner).map_err(|e| e.to_string())?;
            if inner.bytes().any(|b| b < 0x20) {
                return Err("a control character is not escaped".into());
            }
            let mut it = inner.split("\",\"");
            match (it.next(), it.next(), it.next(), it.next()) {
                (Some(t), Some(i), Some(d), None)
                    if !(t.contains('"') || i.contains('"') || d.contains('"')) =>
                {
                    [t, i, d]
                }
                _ => return Err("not three strings".into()),
            }
        } else {
            let (t, i, d): (String, String, String) =
                serde_json::from_slice(entry).map_err(|e| e.to_string())?;
            strings = vec![t, i, d];
            [&strings[0], &strings[1], &strings[2]]
        };
        let mut spans = [(0, 0); 3];
        for (span, part) in spans.iter_mut().zip(parts) {
            let a = self.text.len();
            self.text.push_str(part);
            *span = (a, self.text.len());
        }
        Ok(spans)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Entry = (String, String, String);

    fn collect(p: &ListingParser) -> Result<Vec<Entry>, String> {
        p.finish()?;
        Ok(p.entries()
            .map(|(t, i, d)| (t.to_owned(), i.to_owned(), d.to_owned()))
            .collect())
    }

    /// Parses fed in `pieces`, and whole: both must agree.
    fn parse_in(pieces: &[&str]) -> Result<Vec<Entry>, String> {
        let mut p = ListingParser::default();
        // Reused: what came before does not leak in.
        p.feed(br#"[["x","y","z"]"#);
        p.reset();
        for piece in pieces {
            p.feed(piece.as_bytes());
        }
        let fed = collect(&p);
        p.reset();
        p.whole(pieces.concat().as_bytes());
        let whole = collect(&p);
        assert_eq!(fed.is_ok(), whole.is_ok(), "{pieces:?}: {fed:?} {whole:?}");
        if fed.is_ok() {
            assert_eq!(fed, whole, "{pieces:?}");
        }
        fed
    }

    fn e(t: &str, id: &str, d: &str) -> Entry {
        (t.into(), id.into(), d.into())
    }

    #[test]
    fn reads_listings_in_any_pieces() {
        let text = r#"[["runs","r\"1","d1"],["steps","s]1","d2"],["steps","t\u0041","d3"]]"#;
        let want = vec![
            e("runs", "r\"1", "d1"),
            e("steps", "s]1", "d2"),
            e("steps", "tA", "d3"),
        ];
        assert_eq!(parse_in(&[text]), Ok(want.clone()));
        for cut in 1..text.len() {
            let (a, b) = text.split_at(cut);
            assert_eq!(parse_in(&[a, b]), Ok(want.clone()), "cut at {cut}");
        }
        assert_eq!(parse_in(&[""]), Ok(vec![]));
        assert_eq!(parse_in(&["[]"]), Ok(vec![]));
        // Ids are any text: a space is taken as it is, with or without
        // escapes elsewhere.
        assert_eq!(
            parse_in(&[r#"[["runs","r 1","d1"]]"#]),
            Ok(vec![e("runs", "r 1", "d1")])
        );
        // An escape is decoded wherever it is, whatever else the listing
        // holds.
        assert_eq!(
            parse_in(&[r#"[["steps","t\u0041","d3"]]"#]),
            Ok(vec![e("steps", "tA", "d3")])
        );
        assert_eq!(
            parse_in(&[r#"[["steps","t\\","d3"]]"#]),
            Ok(vec![e("steps", "t\\", "d3")])
        );
    }

    #[test]
    fn refuses_other_forms() {
        for bad in [
            "{}",
            "[",
            r#"[["runs","r","d"]"#,
            r#"[["runs","r","d"],]"#,
            r#"[["runs","r"]]"#,
            r#"[["runs","r","d",1]]"#,
            r#"[["runs",["r"],"d"]]"#,
            r#"[["steps","a","d"],["runs","b","d"]]"#,
            r#"[["runs","a","d"],["runs","a","d"]]"#,
            r#" [["runs","a","d"]]"#,
            r#"[["runs","a","d"]] "#,
            r#"[["runs","a","d"]]]"#,
            "[[\"runs\",\"a\u{1}\",\"d\"]]",
            r#"[["runs","a","d"]["runs","b","d"]]"#,
            // Whitespace between the strings of an entry.
            r#"[["runs", "a","d"]]"#,
            r#"[["runs","a" ,"d"]]"#,
            // A quote that does not end its string where a comma follows.
            r#"[["ru"n"s","a","d"]]"#,
            r#"[["runs","a"b"c","d"]]"#,
            r#"[["runs","a","d"e"f"]]"#,
            // Quotes and brackets out of place.
            r#"[["runs","a","d","]"#,
            r#"[["a"]b"]c","]"#,
            r#"[["a"]b"]c"]]"#,
            // Strings of nothing but a control character.
            "[[\"\u{1}\",\"\",\"\"]]",
        ] {
            assert!(parse_in(&[bad]).is_err(), "{bad}");
        }
    }

    /// The listing of one entry whose id is `len` bytes long.
    fn one_entry(len: usize) -> String {
        format!(r#"[["runs","{}","d"]]"#, "i".repeat(len))
    }

    #[test]
    fn an_entry_of_one_mib_is_read_and_a_longer_one_is_refused() {
        // The entry `["runs","…","d"]` is its id and this many bytes.
        let frame = r#"["runs","","d"]"#.len();
        let at_limit = one_entry(MAX_ENTRY - frame);
        for piece in [4096, 65_536] {
            let mut p = ListingParser::default();
            for chunk in at_limit.as_bytes().chunks(piece) {
                p.feed(chunk);
            }
            let entries = collect(&p).unwrap();
            assert_eq!(entries.len(), 1);
            assert_eq!(entries[0].1.len(), MAX_ENTRY - frame);

            let mut p = ListingParser::default();
            for chunk in one_entry(MAX_ENTRY - frame + 1).as_bytes().chunks(piece) {
                p.feed(chunk);
            }
            let err = collect(&p).unwrap_err();
            assert!(err.contains("over 1 MiB"), "{err}");
        }
    }

    #[test]
    fn an_entry_over_one_mib_is_refused_while_it_is_read() {
        // A forged listing whose entry never ends: it is refused once it
        // passes the limit, and what is kept of it stays within it.
        let mut p = ListingParser::default();
        p.feed(br#"[["runs",""#);
        let piece = [b'i'; 65_536];
        for _ in 0..(3 * MAX_ENTRY / piece.len()) {
            p.feed(&piece);
            assert!(p.entry.len() <= MAX_ENTRY, "{}", p.entry.len());
        }
        let err = p.finish().unwrap_err();
        assert!(err.contains("over 1 MiB"), "{err}");
    }
}
