//! PostgreSQL's fragments of the statements the core builds for every
//! engine (see [`Dialect`]).

use agentrt::store::engine::Dialect;

/// PostgreSQL's dialect.
pub(crate) struct Postgres;

impl Dialect for Postgres {
    // The sum in numeric, so it saturates instead of failing.
    fn add_saturating(&self, column: &str) -> String {
        format!("LEAST({column}::numeric + ?::bigint, 9223372036854775807)::bigint")
    }

    fn json_cut(&self, column: &str, cap: usize) -> String {
        format!(
            "json_build_object('truncated', true, 'length', length({column}), 'head', substr({column}, 1, {cap}))::text"
        )
    }
}

#[cfg(test)]
mod tests {
    use agentrt::store::engine::{Assignment, PageTable, capped_select};

    use super::Postgres;

    /// The texts as the core rendered them for PostgreSQL before the
    /// dialect moved here.
    #[test]
    fn fragments_render_as_before_the_move() {
        let sets = [Assignment::AddSaturating("active_ms", 5)];
        assert_eq!(
            Assignment::set_list(&sets, &Postgres).0,
            "active_ms = LEAST(active_ms::numeric + ?::bigint, 9223372036854775807)::bigint"
        );
        let runs = capped_select(PageTable::Runs, &Postgres);
        assert!(runs.contains(
            "CASE WHEN length(limits_json) > 65536 THEN json_build_object('truncated', true, 'length', length(limits_json), 'head', substr(limits_json, 1, 65536))::text ELSE limits_json END"
        ));
    }
}
