//! Fast scanning for the bytes that end a run of literal string content.

/// `true` for `"`, `\` and control characters (below 0x20): the bytes that
/// cannot appear raw in a JSON string, in input or canonical output.
pub(crate) const fn is_special(b: u8) -> bool {
    b == b'"' || b == b'\\' || b < 0x20
}

/// Index of the first special byte (see [`is_special`]) at or after `from`,
/// or `bytes.len()` if there is none.
///
/// Checks eight bytes at a time (SWAR): long strings are the bulk of
/// tool-call JSON, such as file contents.
pub(crate) fn find_special(bytes: &[u8], from: usize) -> usize {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    const QUOTE: u64 = u64::from_ne_bytes([b'"'; 8]);
    const BACKSLASH: u64 = u64::from_ne_bytes([b'\\'; 8]);
    const SPACE: u64 = u64::from_ne_bytes([0x20; 8]);

    let mut i = from;
    while let Some(chunk) = bytes.get(i..i + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let x = u64::from_ne_bytes(word);
        let q = x ^ QUOTE;
        let b = x ^ BACKSLASH;
        // Exact "some byte is zero / below 0x20" tests (Hacker's Delight 6-1).
        let hits = (q.wrapping_sub(ONES) & !q)
            | (b.wrapping_sub(ONES) & !b)
            | (x.wrapping_sub(SPACE) & !x);
        if hits & HIGH != 0 {
            break;
        }
        i += 8;
    }
    while let Some(&b) = bytes.get(i) {
        if is_special(b) {
            return i;
        }
        i += 1;
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_every_special_byte_at_every_position() {
        for special in (0u8..0x20).chain([b'"', b'\\']) {
            for len in 0..20 {
                for at in 0..len {
                    let mut v: Vec<u8> = (0..len).map(|i| b"a\xc3\xa9~ \x7f\xff/"[i % 8]).collect();
                    v[at] = special;
                    assert_eq!(find_special(&v, 0), at, "{v:?}");
                    assert_eq!(find_special(&v, at), at);
                    assert_eq!(find_special(&v, at + 1), len);
                }
            }
        }
    }

    #[test]
    fn no_false_positives() {
        // Every non-special byte value, in every lane.
        let all: Vec<u8> = (0u8..=255).filter(|&b| !is_special(b)).collect();
        for shift in 0..8 {
            let v: Vec<u8> = all
                .iter()
                .cycle()
                .skip(shift)
                .take(all.len() + 8)
                .copied()
                .collect();
            assert_eq!(find_special(&v, 0), v.len());
        }
        assert_eq!(find_special(b"", 0), 0);
        assert_eq!(find_special(b"abc", 5), 3);
    }
}
