//! The hash chain over the event log: each event stores a BLAKE3 link over
//! the previous link and its own fields, length-prefixed, across all runs
//! in `seq` order.

/// The link of one event: BLAKE3 over `ns(prev) ns(seq) ns(run_id)
/// ns(step_id) ns(at) ns(type) ns(payload)`, where `ns(b)` is the length of
/// `b` in ASCII decimal, `:`, `b`, `,`. Fields exactly as stored.
///
/// ```
/// let link = agentrt::chain::link("", 1, "r", "", "2026-10-01T09:00:00.000000000Z", "run.started", "{}");
/// assert_eq!(link.len(), 64);
/// ```
pub fn link(
    prev: &str,
    seq: i64,
    run_id: &str,
    step_id: &str,
    at: &str,
    event_type: &str,
    payload: &str,
) -> String {
    let mut hasher = blake3::Hasher::new();
    let mut seq_buf = itoa_buf(seq);
    for field in [
        prev.as_bytes(),
        seq_buf.as_bytes(),
        run_id.as_bytes(),
        step_id.as_bytes(),
        at.as_bytes(),
        event_type.as_bytes(),
        payload.as_bytes(),
    ] {
        let len = itoa_buf(field.len() as i64);
        hasher.update(len.as_bytes());
        hasher.update(b":");
        hasher.update(field);
        hasher.update(b",");
    }
    seq_buf.clear();
    hasher.finalize().to_hex().to_string()
}

fn itoa_buf(n: i64) -> String {
    n.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_golden() {
        // The spec's layout example with the Rust time text (decision 6).
        let bytes = "0:,1:1,1:r,0:,30:2026-10-01T09:00:00.000000000Z,11:run.started,2:{},";
        assert_eq!(
            link(
                "",
                1,
                "r",
                "",
                "2026-10-01T09:00:00.000000000Z",
                "run.started",
                "{}"
            ),
            blake3::hash(bytes.as_bytes()).to_hex().as_str()
        );
        assert_eq!(
            link(
                "",
                1,
                "r",
                "",
                "2026-10-01T09:00:00.000000000Z",
                "run.started",
                "{}"
            ),
            "617ecdc7fe3b348f7beb53d61f1c6e686705421ab29537627c1f0351f28c729c"
        );
    }
}
