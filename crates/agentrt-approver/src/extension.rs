//! The approver's satellite tables, declared through the core's extension
//! point: the signatures of requests that decided something (migration 1)
//! and the nonces of login links taken (migration 2). Applied migrations
//! never change; a new table comes with a new migration.

use agentrt::store::{Extension, ExtensionTable};

/// The table of used request signatures.
pub const SIGNATURES_TABLE: &str = "approver_signatures";

/// The table of used login-link nonces.
pub const LOGIN_NONCES_TABLE: &str = "approver_login_nonces";

/// The approver's extension: hand it to the store's options when the
/// store is opened for a [`crate::StoreApprover`] built with
/// [`crate::StoreApprover::new`] (`open` does it itself).
pub const EXTENSION: Extension = Extension {
    name: "approver",
    migrations: &[
        (
            1,
            "CREATE TABLE approver_signatures (
             signature   TEXT NOT NULL PRIMARY KEY,
             run_id      TEXT NOT NULL,
             used_at     TEXT NOT NULL,
             written_seq INTEGER NOT NULL DEFAULT 0
         )",
        ),
        (
            2,
            "CREATE TABLE approver_login_nonces (
             nonce       TEXT NOT NULL PRIMARY KEY,
             run_id      TEXT NOT NULL,
             signed_in   TEXT NOT NULL,
             used_at     TEXT NOT NULL,
             written_seq INTEGER NOT NULL DEFAULT 0
         )",
        ),
    ],
    tables: &[
        ExtensionTable {
            name: SIGNATURES_TABLE,
            key_column: "signature",
            columns: &["signature", "run_id", "used_at"],
        },
        ExtensionTable {
            name: LOGIN_NONCES_TABLE,
            key_column: "nonce",
            columns: &["nonce", "run_id", "signed_in", "used_at"],
        },
    ],
};
