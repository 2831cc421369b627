//! The schema on PostgreSQL, as forward-only migrations of its own
//! (versioned like SQLite's: `schema_migrations`, a newer database
//! refused). The tables and columns are SQLite's, so the core's column
//! lists, decoders and row digests apply unchanged; what PostgreSQL adds:
//!
//! - `agentrt_chain`, the one chain head row every write group locks first
//!   (`SELECT … FOR UPDATE`): groups of every host queue on it, so each
//!   sees the head the previous one left and events get consecutive seqs
//!   in commit order;
//! - `pos`, an identity column on every state table (SQLite's `rowid`):
//!   insertion order, outside every digest;
//! - `agentrt_labels(text)`, a labels text as `jsonb`, `{}` when it is not
//!   JSON (a hand-edited row matches no label filter instead of failing
//!   the read);
//! - `agentrt_listing(text)`, an event's row listing as a `jsonb` array,
//!   `[]` when it is not one (`verify` then names the rows it misses).

use agentrt::store::engine::schema::META;
use tokio_postgres::Client;

use crate::error::{Describe, pg_error};
use crate::runtime::block_on;

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = 1;

/// The advisory lock key that serializes migrations of one database
/// (`pg_advisory_xact_lock`): hosts that open it at once migrate in turn.
pub(crate) const MIGRATION_LOCK: i64 = 0x6167_656e_7472_7431; // "agentrt1"

/// Migration 1: the whole schema (SQLite's schema 5, on PostgreSQL).
pub const MIGRATION_1: &str = "
CREATE TABLE agentrt_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE agentrt_chain (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    head_seq  BIGINT NOT NULL,
    head_hash TEXT NOT NULL
);
INSERT INTO agentrt_chain (id, head_seq, head_hash) VALUES (1, 0, '');
CREATE TABLE runs (
    pos                   BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
    id                    TEXT PRIMARY KEY,
    written_seq           BIGINT NOT NULL DEFAULT 0,
    goal                  TEXT NOT NULL,
    status                TEXT NOT NULL,
    reason                TEXT NOT NULL DEFAULT '',
    reason_detail         TEXT NOT NULL DEFAULT '',
    limits_json           TEXT NOT NULL,
    step_count            BIGINT NOT NULL DEFAULT 0,
    created_at            TEXT NOT NULL,
    started_at            TEXT NOT NULL DEFAULT '',
    finished_at           TEXT NOT NULL DEFAULT '',
    result_json           TEXT NOT NULL DEFAULT '',
    model_calls           BIGINT NOT NULL DEFAULT 0,
    input_tokens          BIGINT NOT NULL DEFAULT 0,
    output_tokens         BIGINT NOT NULL DEFAULT 0,
    cached_input_tokens   BIGINT NOT NULL DEFAULT 0,
    estimated_cost_micros BIGINT NOT NULL DEFAULT 0,
    active_ms             BIGINT NOT NULL DEFAULT 0,
    lease_owner           TEXT NOT NULL DEFAULT '',
    lease_expires_at      TEXT NOT NULL DEFAULT ''
);
CREATE TABLE run_labels (
    pos BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
    run_id      TEXT PRIMARY KEY REFERENCES runs(id),
    labels_json TEXT NOT NULL,
    written_seq BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE steps (
    pos BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
    id               TEXT PRIMARY KEY,
    written_seq      BIGINT NOT NULL DEFAULT 0,
    run_id           TEXT NOT NULL REFERENCES runs(id),
    idx              BIGINT NOT NULL,
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
    seq          BIGINT PRIMARY KEY,
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
    pos               BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
    id                TEXT PRIMARY KEY,
    written_seq       BIGINT NOT NULL DEFAULT 0,
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
CREATE INDEX approvals_run ON approvals (run_id, pos);
CREATE INDEX approvals_step ON approvals (run_id, step_id, pos);
CREATE TABLE model_calls (
    pos                 BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
    id                  TEXT PRIMARY KEY,
    run_id              TEXT NOT NULL REFERENCES runs(id),
    step_id             TEXT NOT NULL,
    attempt             BIGINT NOT NULL,
    status              TEXT NOT NULL,
    model               TEXT NOT NULL,
    input_tokens        BIGINT NOT NULL DEFAULT 0,
    output_tokens       BIGINT NOT NULL DEFAULT 0,
    cached_input_tokens BIGINT NOT NULL DEFAULT 0,
    cost_micros         BIGINT NOT NULL DEFAULT 0,
    latency_ms          BIGINT NOT NULL DEFAULT 0,
    error               TEXT NOT NULL DEFAULT '',
    dispatched_at       TEXT NOT NULL,
    completed_at        TEXT NOT NULL DEFAULT '',
    written_seq         BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX model_calls_run ON model_calls (run_id, pos);
CREATE TABLE tool_specs (
    pos BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
    hash        TEXT PRIMARY KEY,
    spec_json   TEXT NOT NULL,
    written_seq BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE extension_migrations (
    extension  TEXT NOT NULL,
    version    BIGINT NOT NULL,
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
CREATE FUNCTION agentrt_labels(labels TEXT) RETURNS jsonb
    LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    RETURN CASE WHEN jsonb_typeof(labels::jsonb) = 'object' THEN labels::jsonb ELSE '{}'::jsonb END;
EXCEPTION WHEN others THEN
    RETURN '{}'::jsonb;
END
$$;
CREATE FUNCTION agentrt_listing(listing TEXT) RETURNS jsonb
    LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    RETURN CASE WHEN jsonb_typeof(listing::jsonb) = 'array' THEN listing::jsonb ELSE '[]'::jsonb END;
EXCEPTION WHEN others THEN
    RETURN '[]'::jsonb;
END
$$;
";

/// Every migration, in order: `(version, sql)`.
pub const MIGRATIONS: &[(i64, &str)] = &[(1, MIGRATION_1)];

/// Creates or migrates the schema, in one transaction under the migration
/// lock; refuses a database at a newer version than this build's.
pub(crate) fn migrate(
    client: &mut Client,
    about: &Describe,
    applied_at: &str,
) -> agentrt::Result<()> {
    block_on(migrate_async(client, about, applied_at))
}

/// Checks, without writing anything, that the database is at this build's
/// schema version (0 when it has no schema at all).
pub(crate) fn check(client: &mut Client, about: &Describe) -> agentrt::Result<()> {
    block_on(async {
        let present: bool = client
            .query_one("SELECT to_regclass('schema_migrations') IS NOT NULL", &[])
            .await
            .and_then(|row| row.try_get(0))
            .map_err(|e| pg_error(&e))?;
        let current: i64 = if present {
            client
                .query_one(
                    "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
                    &[],
                )
                .await
                .and_then(|row| row.try_get(0))
                .map_err(|e| pg_error(&e))?
        } else {
            0
        };
        if current == SCHEMA_VERSION {
            Ok(())
        } else {
            Err(about.schema_version(current, SCHEMA_VERSION))
        }
    })
}

async fn migrate_async(
    client: &mut Client,
    about: &Describe,
    applied_at: &str,
) -> agentrt::Result<()> {
    let tx = client.transaction().await.map_err(|e| pg_error(&e))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(|e| pg_error(&e))?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, applied_at TEXT NOT NULL)",
    )
    .await
    .map_err(|e| pg_error(&e))?;
    let current: i64 = tx
        .query_one(
            "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
            &[],
        )
        .await
        .and_then(|row| row.try_get(0))
        .map_err(|e| pg_error(&e))?;
    if current > SCHEMA_VERSION {
        return Err(about.schema_version(current, SCHEMA_VERSION));
    }
    for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > current) {
        tx.batch_execute(sql).await.map_err(|e| pg_error(&e))?;
        tx.execute(
            "INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)",
            &[version, &applied_at],
        )
        .await
        .map_err(|e| pg_error(&e))?;
        if *version == 1 {
            for (key, value) in META {
                tx.execute(
                    "INSERT INTO agentrt_meta (key, value) VALUES ($1, $2)",
                    &[&key, &value],
                )
                .await
                .map_err(|e| pg_error(&e))?;
            }
        }
    }
    tx.commit().await.map_err(|e| pg_error(&e))
}
