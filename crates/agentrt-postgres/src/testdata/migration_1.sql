
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
