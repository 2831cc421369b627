//! The seam between the statements the core writes for every engine and
//! the few fragments whose SQL differs between engines: an engine renders
//! those fragments through its [`Dialect`]; the core holds SQLite's
//! ([`SqliteDialect`]) and each engine outside the core holds its own.

/// The fragments of SQL whose text differs between engines, rendered by
/// the engine for the statements the core builds: the capped select
/// lists of page reads (`capped_select`) and the `SET` lists of updates
/// (`Assignment::set_list`).
pub trait Dialect {
    /// The right-hand side of `column = …` that adds the statement's next
    /// `?` to `column`, saturating at `i64::MAX` instead of failing.
    fn add_saturating(&self, column: &str) -> String;

    /// The select expression of a JSON text `column` longer than `cap`
    /// characters: the canonical JSON object
    /// `{"head":"<first cap characters>","length":<n>,"truncated":true}`,
    /// as text. Used only inside `CASE WHEN length(column) > cap`.
    fn json_cut(&self, column: &str, cap: usize) -> String;
}

/// SQLite's dialect.
pub(crate) struct SqliteDialect;

impl Dialect for SqliteDialect {
    fn add_saturating(&self, column: &str) -> String {
        format!("MIN({column} + ?, 9223372036854775807)")
    }

    fn json_cut(&self, column: &str, cap: usize) -> String {
        format!(
            "json_object('truncated', json('true'), 'length', length({column}), 'head', CAST(substr({column}, 1, {cap}) AS TEXT))"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::changes::Assignment;
    use super::super::page::{PageTable, capped_select};
    use super::SqliteDialect;

    /// The texts as the core rendered them for SQLite before the dialect
    /// became a seam.
    #[test]
    fn sqlite_fragments_render_as_before_the_seam() {
        let sets = [Assignment::AddSaturating("active_ms", 5)];
        assert_eq!(
            Assignment::set_list(&sets, &SqliteDialect).0,
            "active_ms = MIN(active_ms + ?, 9223372036854775807)"
        );
        let runs = capped_select(PageTable::Runs, &SqliteDialect);
        assert!(runs.contains(
            "CASE WHEN length(limits_json) > 65536 THEN json_object('truncated', json('true'), 'length', length(limits_json), 'head', CAST(substr(limits_json, 1, 65536) AS TEXT)) ELSE limits_json END"
        ));
    }
}
