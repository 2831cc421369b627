//! The schema, as forward-only migrations. Released migrations are never
//! edited: a change adds a migration (README decision 7).

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = 1;

/// The hash algorithm every stored hash uses (recorded in `agentrt_meta`).
pub const HASH_ALGORITHM: &str = "blake3-256";
/// The canonical JSON form every hashed value uses (recorded in `agentrt_meta`).
pub const CANONICAL_FORM: &str = "agentrt-canonical-json-v1";
/// The stored time format (recorded in `agentrt_meta`).
pub const TIME_FORMAT: &str = "rfc3339-utc-nanos9";

/// Migration 1: the whole schema.
pub const MIGRATION_1: &str = "\
CREATE TABLE agentrt_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE runs (
    id                    TEXT PRIMARY KEY,
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
    hash         TEXT NOT NULL DEFAULT ''
);
CREATE INDEX events_run ON events (run_id, seq);
CREATE TABLE approvals (
    id                TEXT PRIMARY KEY,
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

/// Every migration, in order: `(version, sql)`.
pub const MIGRATIONS: &[(i64, &str)] = &[(1, MIGRATION_1)];

#[cfg(test)]
mod tests {
    use super::*;

    /// Released migration texts never change: this pins migration 1 by hash.
    /// If this fails, you edited a released migration; add a new one instead.
    #[test]
    fn released_migration_texts_are_pinned() {
        let pinned = [(
            1,
            "d7dcf6c4dd48b8b9d6da7a272c29479b308e910c393f6d7c38abf9385e99e42b",
        )];
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
}
