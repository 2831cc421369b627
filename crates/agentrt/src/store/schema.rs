//! The schema, as forward-only migrations. Released migrations are never
//! edited: a change adds a migration (design §4).

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = 5;

/// The hash algorithm every stored hash uses (recorded in `agentrt_meta`).
pub const HASH_ALGORITHM: &str = "blake3-256";
/// The canonical JSON form every hashed value uses (recorded in `agentrt_meta`).
pub const CANONICAL_FORM: &str = "agentrt-canonical-json-v1";
/// The stored time format (recorded in `agentrt_meta`).
pub const TIME_FORMAT: &str = "rfc3339-utc-nanos9";

/// The rows migration 1 writes into `agentrt_meta`, on every engine.
pub const META: [(&str, &str); 3] = [
    ("hash_algorithm", HASH_ALGORITHM),
    ("canonical_form", CANONICAL_FORM),
    ("time_format", TIME_FORMAT),
];

/// Migration 1: the whole schema.
pub const MIGRATION_1: &str = "\
CREATE TABLE agentrt_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE runs (
    id                    TEXT PRIMARY KEY,
    written_seq           INTEGER NOT NULL DEFAULT 0,
    goal                  TEXT NOT NULL,
    status                TEXT NOT NULL,
    reason                TEXT NOT NULL DEFAULT '',
    reason_detail         TEXT NOT NULL DEFAULT '',
    limits_json           TEXT NOT NULL,
    step_count            INTEGER NOT NULL DEFAULT 0,
    created_at            TEXT NOT NULL,
    started_at            TEXT NOT NULL DEFAULT '',
    finished_at           TEXT NOT NULL DEFAULT '',
    result_json           TEXT NOT NULL DEFAULT '',
    model_calls           INTEGER NOT NULL DEFAULT 0,
    input_tokens          INTEGER NOT NULL DEFAULT 0,
    output_tokens         INTEGER NOT NULL DEFAULT 0,
    cached_input_tokens   INTEGER NOT NULL DEFAULT 0,
    estimated_cost_micros INTEGER NOT NULL DEFAULT 0,
    active_ms             INTEGER NOT NULL DEFAULT 0,
    lease_owner           TEXT NOT NULL DEFAULT '',
    lease_expires_at      TEXT NOT NULL DEFAULT ''
);
CREATE TABLE steps (
    id               TEXT PRIMARY KEY,
    written_seq      INTEGER NOT NULL DEFAULT 0,
    run_id           TEXT NOT NULL REFERENCES runs(id),
    idx              INTEGER NOT NULL,
    status           TEXT NOT NULL,
    decision_json    TEXT NOT NULL DEFAULT '',
    policy_json      TEXT NOT NULL DEFAULT '',
    observation_json TEXT NOT NULL DEFAULT '',
    observation_hash TEXT NOT NULL DEFAULT '',
    started_at       TEXT NOT NULL,
    finished_at      TEXT NOT NULL DEFAULT '',
    spec_hash        TEXT NOT NULL DEFAULT '',
    policy_id        TEXT NOT NULL DEFAULT '',
    UNIQUE (run_id, idx)
);
CREATE TABLE events (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id       TEXT NOT NULL REFERENCES runs(id),
    step_id      TEXT NOT NULL DEFAULT '',
    at           TEXT NOT NULL,
    type         TEXT NOT NULL,
    payload_json TEXT NOT NULL,
    rows_json    TEXT NOT NULL DEFAULT '',
    hash         TEXT NOT NULL DEFAULT ''
);
CREATE INDEX events_run ON events (run_id, seq);
CREATE TABLE approvals (
    id                TEXT PRIMARY KEY,
    written_seq       INTEGER NOT NULL DEFAULT 0,
    run_id            TEXT NOT NULL REFERENCES runs(id),
    step_id           TEXT NOT NULL,
    kind              TEXT NOT NULL,
    capability_json   TEXT NOT NULL,
    presentation_json TEXT NOT NULL,
    request_json      TEXT NOT NULL,
    hash              TEXT NOT NULL,
    status            TEXT NOT NULL,
    created_at        TEXT NOT NULL,
    decided_at        TEXT NOT NULL DEFAULT '',
    decided_by        TEXT NOT NULL DEFAULT '',
    note              TEXT NOT NULL DEFAULT '',
    expires_at        TEXT NOT NULL DEFAULT ''
);
CREATE INDEX approvals_run ON approvals (run_id, created_at);
CREATE TABLE model_calls (
    id                  TEXT PRIMARY KEY,
    run_id              TEXT NOT NULL REFERENCES runs(id),
    step_id             TEXT NOT NULL,
    attempt             INTEGER NOT NULL,
    status              TEXT NOT NULL,
    model               TEXT NOT NULL,
    input_tokens        INTEGER NOT NULL DEFAULT 0,
    output_tokens       INTEGER NOT NULL DEFAULT 0,
    cached_input_tokens INTEGER NOT NULL DEFAULT 0,
    cost_micros         INTEGER NOT NULL DEFAULT 0,
    latency_ms          INTEGER NOT NULL DEFAULT 0,
    error               TEXT NOT NULL DEFAULT '',
    dispatched_at       TEXT NOT NULL,
    completed_at        TEXT NOT NULL DEFAULT ''
);
CREATE INDEX model_calls_run ON model_calls (run_id, dispatched_at);
CREATE TABLE tool_specs (
    hash      TEXT PRIMARY KEY,
    spec_json TEXT NOT NULL
);
";

/// Migration 2: model call attempts and tool specs join the chain. Rows
/// already there were written before their table was chained: they are
/// marked [`UNCHAINED_SEQ`] and their number is recorded in `agentrt_meta`
/// (`unchained_rows`), so `verify` can tell them from rows marked later.
pub const MIGRATION_2: &str = "\
ALTER TABLE model_calls ADD COLUMN written_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tool_specs ADD COLUMN written_seq INTEGER NOT NULL DEFAULT 0;
UPDATE model_calls SET written_seq = -1;
UPDATE tool_specs SET written_seq = -1;
INSERT INTO agentrt_meta (key, value)
    VALUES ('unchained_rows', CAST((SELECT COUNT(*) FROM model_calls) + (SELECT COUNT(*) FROM tool_specs) AS TEXT));
";

/// Migration 3: run labels. A row only for a run begun with labels,
/// written in the run's first write group and chained like the run's own
/// row; a database migrated from schema 2 has none, so no row predates the
/// chain.
pub const MIGRATION_3: &str = "\
CREATE TABLE run_labels (
    run_id      TEXT PRIMARY KEY REFERENCES runs(id),
    labels_json TEXT NOT NULL,
    written_seq INTEGER NOT NULL DEFAULT 0
);
";

/// Migration 4: the registry of satellite extensions (see
/// [`crate::store::Extension`]): each extension migration applied, with the
/// hash of its DDL, and each extension table whose rows the chain covers,
/// with its key column and its digested columns in digest order (a JSON
/// array of names). `verify` reads the second table, so it checks
/// extension rows without the satellite that wrote them.
pub const MIGRATION_4: &str = "\
CREATE TABLE extension_migrations (
    extension  TEXT NOT NULL,
    version    INTEGER NOT NULL,
    ddl_hash   TEXT NOT NULL,
    applied_at TEXT NOT NULL,
    PRIMARY KEY (extension, version)
);
CREATE TABLE extension_tables (
    name         TEXT PRIMARY KEY,
    extension    TEXT NOT NULL,
    key_column   TEXT NOT NULL,
    columns_json TEXT NOT NULL
);
";

/// Migration 5: `events` without `AUTOINCREMENT` (issue 15). The store
/// sets each seq itself (the head plus one, inside the write transaction),
/// so the counter row in `sqlite_sequence` that `AUTOINCREMENT` rewrote at
/// every commit, one more page to the WAL each time, ordered nothing. What
/// it added, a seq never given twice after a tail was cut, is not what
/// finds a cut: `verify` names it through the rows the cut events wrote,
/// and a kept head names the rest (design §16).
///
/// The table is rebuilt under its own name, every row and column as it
/// was (a copy, once: its time grows with the log), so every stored link
/// and row digest still holds.
pub const MIGRATION_5: &str = "\
CREATE TABLE events_rebuilt (
    seq          INTEGER PRIMARY KEY,
    run_id       TEXT NOT NULL REFERENCES runs(id),
    step_id      TEXT NOT NULL DEFAULT '',
    at           TEXT NOT NULL,
    type         TEXT NOT NULL,
    payload_json TEXT NOT NULL,
    rows_json    TEXT NOT NULL DEFAULT '',
    hash         TEXT NOT NULL DEFAULT ''
);
INSERT INTO events_rebuilt (seq, run_id, step_id, at, type, payload_json, rows_json, hash)
    SELECT seq, run_id, step_id, at, type, payload_json, rows_json, hash FROM events ORDER BY seq;
DROP TABLE events;
ALTER TABLE events_rebuilt RENAME TO events;
CREATE INDEX events_run ON events (run_id, seq);
";

/// Every migration, in order: `(version, sql)`.
pub const MIGRATIONS: &[(i64, &str)] = &[
    (1, MIGRATION_1),
    (2, MIGRATION_2),
    (3, MIGRATION_3),
    (4, MIGRATION_4),
    (5, MIGRATION_5),
];

/// The name of every table and index the core's migrations create. No
/// extension may own a prefix any of them starts with (an extension `run`
/// would own `run_labels`), nor one SQLite keeps (`sqlite_`).
pub const CORE_OBJECTS: &[&str] = &[
    "agentrt_meta",
    "approvals",
    "approvals_run",
    "events",
    "events_run",
    "extension_migrations",
    "extension_tables",
    "model_calls",
    "model_calls_run",
    "run_labels",
    "runs",
    "schema_migrations",
    "steps",
    "tool_specs",
];

/// The `written_seq` of a row written before its table joined the chain
/// (see [`MIGRATION_2`]).
pub const UNCHAINED_SEQ: i64 = -1;

/// A state table whose rows are digested into the event that explains
/// their last write (see [`crate::chain`]). Each row carries
/// `written_seq`: the seq of the last event of the transaction that last
/// wrote it, the event whose `rows_json` lists the row's digest.
///
/// ```
/// use agentrt::store::engine::schema::StateTable;
///
/// assert_eq!(StateTable::parse("steps"), Some(StateTable::Steps));
/// assert_eq!(StateTable::Steps.name(), "steps");
/// assert_eq!(StateTable::Runs.digested_columns()[0], "id");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StateTable {
    /// `approvals`.
    Approvals,
    /// `model_calls` (chained since schema 2).
    ModelCalls,
    /// `run_labels`, keyed by `run_id` (since schema 3).
    RunLabels,
    /// `runs`.
    Runs,
    /// `steps`.
    Steps,
    /// `tool_specs`, keyed by `hash` (chained since schema 2).
    ToolSpecs,
}

/// Columns of the state tables left out of row digests: `written_seq`
/// itself, and the run's lease, which the heartbeat renews without an
/// event (a lease decides who may write next, not what happened).
pub const NOT_DIGESTED: &[&str] = &["written_seq", "lease_owner", "lease_expires_at"];

impl StateTable {
    /// Every state table, in name order.
    pub const ALL: [StateTable; 6] = [
        StateTable::Approvals,
        StateTable::ModelCalls,
        StateTable::RunLabels,
        StateTable::Runs,
        StateTable::Steps,
        StateTable::ToolSpecs,
    ];

    /// The table's name.
    pub fn name(self) -> &'static str {
        match self {
            StateTable::Approvals => "approvals",
            StateTable::ModelCalls => "model_calls",
            StateTable::RunLabels => "run_labels",
            StateTable::Runs => "runs",
            StateTable::Steps => "steps",
            StateTable::ToolSpecs => "tool_specs",
        }
    }

    /// The column that names a row in the chain's row listing.
    pub fn key_column(self) -> &'static str {
        match self {
            StateTable::ToolSpecs => "hash",
            StateTable::RunLabels => "run_id",
            _ => "id",
        }
    }

    /// `true` for the tables that joined the chain after schema 1, whose
    /// older rows may be marked [`UNCHAINED_SEQ`].
    pub fn joined_later(self) -> bool {
        matches!(self, StateTable::ModelCalls | StateTable::ToolSpecs)
    }

    /// The table named `name`, if it is a state table.
    pub fn parse(name: &str) -> Option<StateTable> {
        StateTable::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The table's position in [`StateTable::ALL`] (for per-table arrays).
    pub fn index(self) -> usize {
        self as usize
    }

    /// The columns a row digest covers, in digest order (the schema's
    /// order without [`NOT_DIGESTED`]).
    pub fn digested_columns(self) -> &'static [&'static str] {
        match self {
            StateTable::Approvals => &[
                "id",
                "run_id",
                "step_id",
                "kind",
                "capability_json",
                "presentation_json",
                "request_json",
                "hash",
                "status",
                "created_at",
                "decided_at",
                "decided_by",
                "note",
                "expires_at",
            ],
            StateTable::Runs => &[
                "id",
                "goal",
                "status",
                "reason",
                "reason_detail",
                "limits_json",
                "step_count",
                "created_at",
                "started_at",
                "finished_at",
                "result_json",
                "model_calls",
                "input_tokens",
                "output_tokens",
                "cached_input_tokens",
                "estimated_cost_micros",
                "active_ms",
            ],
            StateTable::ModelCalls => &[
                "id",
                "run_id",
                "step_id",
                "attempt",
                "status",
                "model",
                "input_tokens",
                "output_tokens",
                "cached_input_tokens",
                "cost_micros",
                "latency_ms",
                "error",
                "dispatched_at",
                "completed_at",
            ],
            StateTable::RunLabels => &["run_id", "labels_json"],
            StateTable::ToolSpecs => &["hash", "spec_json"],
            StateTable::Steps => &[
                "id",
                "run_id",
                "idx",
                "status",
                "decision_json",
                "policy_json",
                "observation_json",
                "observation_hash",
                "started_at",
                "finished_at",
                "spec_hash",
                "policy_id",
            ],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Released migration texts never change: this pins each one by hash.
    /// If this fails, you edited a released migration; add a new one instead.
    #[test]
    fn released_migration_texts_are_pinned() {
        let pinned = [
            (
                1,
                "b5a89ac3d2ca2136a5a0de76f3db400c896b9696aa085ac7b375053c2fbb84b9",
            ),
            (
                2,
                "f92cf9e34b2f94526d41670357b0626b63272a1792bf4b5ae5972f956fe32e0a",
            ),
            (
                3,
                "0c1546187eff32a3ec8279f8f1150c1e8b20098d71e936d4da5a474c4e78c7cb",
            ),
            (
                4,
                "4dc6eb8b4b844606e0b61184009cf883baf0849732820472d510dd0a3775236f",
            ),
            (
                5,
                "6bdcf8183a1573f3be72afbb549ec89b1b31e2d91ee952a0eef270f10f4009b7",
            ),
        ];
        for (version, hash) in pinned {
            let (_, sql) = MIGRATIONS
                .iter()
                .find(|(v, _)| *v == version)
                .expect("migration exists");
            assert_eq!(
                blake3::hash(sql.as_bytes()).to_hex().as_str(),
                hash,
                "migration {version}"
            );
        }
        assert_eq!(MIGRATIONS.last().map(|(v, _)| *v), Some(SCHEMA_VERSION));
    }

    /// Row digests cover every column of a state table but the ones left
    /// out on purpose, in the schema's order: a column added later fails
    /// here until it is digested or excluded.
    #[test]
    fn digests_cover_every_state_column_in_schema_order() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        for (_, sql) in MIGRATIONS {
            conn.execute_batch(sql).unwrap();
        }
        for table in StateTable::ALL {
            let mut stmt = conn
                .prepare(&format!(
                    "SELECT name FROM pragma_table_info('{}')",
                    table.name()
                ))
                .unwrap();
            let columns: Vec<String> = stmt
                .query_map([], |r| r.get(0))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            // Tables of migration 1 have it second; later ones got it last
            // (the columns added by migration 2, the table of migration 3).
            let at = if table.joined_later() || table == StateTable::RunLabels {
                columns.len() - 1
            } else {
                1
            };
            assert_eq!(columns[at], "written_seq", "{table:?}");
            assert_eq!(columns[0], table.key_column(), "{table:?}");
            let digested: Vec<&str> = columns
                .iter()
                .map(String::as_str)
                .filter(|c| !NOT_DIGESTED.contains(c))
                .collect();
            assert_eq!(digested, table.digested_columns(), "{table:?}");
            assert_eq!(StateTable::parse(table.name()), Some(table));
            assert_eq!(StateTable::ALL[table.index()], table);
        }
        assert_eq!(StateTable::parse("events"), None);
    }

    /// [`CORE_OBJECTS`] names every table and index the migrations create
    /// (and `schema_migrations`, which the opener creates): a new one fails
    /// here until it is listed, so no extension can claim its prefix.
    #[test]
    fn core_objects_name_every_table_and_index_of_the_schema() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)",
        )
        .unwrap();
        for (_, sql) in MIGRATIONS {
            conn.execute_batch(sql).unwrap();
        }
        let mut stmt = conn
            .prepare(
                "SELECT name FROM sqlite_master WHERE type IN ('table', 'index')
                 AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name",
            )
            .unwrap();
        let names: Vec<String> = stmt
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(names, CORE_OBJECTS);
    }
}
