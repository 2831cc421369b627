//! The `written_seq` of recently listed rows, in a small fixed table.
//!
//! A row's `written_seq` does not change during a walk (it reads one
//! snapshot), and the same rows come back in nearby listings (a run's row
//! is listed by every step of the run, a step's row by its two or three
//! write groups), so most lookups are answered here. The table is
//! direct-mapped and never grows: memory stays flat whatever the log holds.

use std::hash::{DefaultHasher, Hash, Hasher};

/// Slots in the table.
const SLOTS: usize = 1024;

#[derive(Debug, Default)]
struct Slot {
    /// The table's index among the snapshot's chained tables.
    table: Option<usize>,
    id: String,
    written: i64,
}

/// Remembers `(table, id) → written_seq` for the last rows looked up.
#[derive(Debug)]
pub(super) struct Seen {
    slots: Vec<Slot>,
}

impl Default for Seen {
    fn default() -> Seen {
        Seen {
            slots: (0..SLOTS).map(|_| Slot::default()).collect(),
        }
    }
}

fn slot_of(table: usize, id: &str) -> usize {
    let mut h = DefaultHasher::new();
    table.hash(&mut h);
    id.hash(&mut h);
    (h.finish() % SLOTS as u64) as usize
}

impl Seen {
    /// The remembered `written_seq` of the row, if it is still here.
    pub(super) fn get(&self, table: usize, id: &str) -> Option<i64> {
        let slot = self.slots.get(slot_of(table, id))?;
        (slot.table == Some(table) && slot.id == id).then_some(slot.written)
    }

    /// Remembers the row's `written_seq` (evicting whatever shared its slot).
    pub(super) fn put(&mut self, table: usize, id: &str, written: i64) {
        if let Some(slot) = self.slots.get_mut(slot_of(table, id)) {
            slot.table = Some(table);
            slot.id.clear();
            slot.id.push_str(id);
            slot.written = written;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUNS: usize = 3;
    const STEPS: usize = 4;

    #[test]
    fn remembers_the_last_rows_and_nothing_else() {
        let mut seen = Seen::default();
        assert_eq!(seen.get(RUNS, "r1"), None);
        seen.put(RUNS, "r1", 7);
        assert_eq!(seen.get(RUNS, "r1"), Some(7));
        assert_eq!(seen.get(STEPS, "r1"), None, "the table counts");
        seen.put(RUNS, "r1", 9);
        assert_eq!(seen.get(RUNS, "r1"), Some(9));
        for i in 0..10 * SLOTS {
            seen.put(STEPS, &format!("s{i}"), i as i64);
        }
        assert_eq!(seen.slots.len(), SLOTS, "it never grows");
    }

    #[test]
    fn remembers_most_of_many_recent_rows() {
        // A quarter as many rows as slots: most have a slot of their own.
        let mut seen = Seen::default();
        let rows = SLOTS / 4;
        for i in 0..rows {
            seen.put(STEPS, &format!("s{i}"), i as i64);
        }
        let remembered = (0..rows)
            .filter(|&i| seen.get(STEPS, &format!("s{i}")) == Some(i as i64))
            .count();
        assert!(remembered > rows / 2, "{remembered} of {rows}");
    }
}
