//! The runtime's errors: one enum, a variant with fields for every case a
//! caller may act on (design §7). Match on variants, never on text.

use std::path::PathBuf;

use crate::json::JsonError;
use crate::model::{ApprovalStatus, LabelError, LimitsError, RunStatus};

/// Everything the runtime can refuse or fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The database failed (a constraint, a full disk, a corrupt file…).
    #[error("database: {message}")]
    Database {
        /// What kind of failure, for callers that act on it.
        kind: DatabaseErrorKind,
        /// What the database said.
        message: String,
    },

    /// A file operation failed.
    #[error("{path}: {source}", path = path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },

    /// The database was written by another schema version.
    #[error("database {path} is at schema version {database}, this build of agentrt writes version {build}", path = path.display())]
    SchemaVersion {
        /// The file.
        path: PathBuf,
        /// The version the database is at (0: not migrated).
        database: i64,
        /// The version this build writes.
        build: i64,
    },

    /// The file is not an agentrt database.
    #[error("{path} is not an agentrt database: {detail}", path = path.display())]
    NotAgentrt {
        /// The file.
        path: PathBuf,
        /// What is missing or wrong.
        detail: String,
    },

    /// A database file or sidecar has unsafe ownership or permissions.
    #[error("{path} has mode {mode:04o} and {reason}; fix it with: chmod 600 {path}", path = path.display())]
    InsecureMode {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
        /// What is wrong.
        reason: String,
    },

    /// The database holds a trigger or a view, which would run code on our
    /// reads and writes.
    #[error("{path} contains the {kind} {name:?}; a trigger or view could change what agentrt writes or reads, so the database is refused (drop it with the sqlite3 shell if it is yours)", path = path.display())]
    UnsafeSchema {
        /// The file.
        path: PathBuf,
        /// `trigger` or `view`.
        kind: String,
        /// Its name.
        name: String,
    },

    /// The database path is a symbolic link.
    #[error("{path} is a symbolic link; open the file it points to by its own path", path = path.display())]
    Symlink {
        /// The path.
        path: PathBuf,
    },

    /// A database path or sidecar is not a regular file.
    #[error("{path} is not a regular file", path = path.display())]
    NotRegular {
        /// The path.
        path: PathBuf,
    },

    /// SQLite stayed busy or locked past the busy timeout.
    #[error("the database is locked by another process; try again")]
    DatabaseLocked,

    /// No such run, approval or tool spec.
    #[error("no {what} {id:?}")]
    NotFound {
        /// `run`, `approval`, `step`, `tool spec`.
        what: &'static str,
        /// The id asked for.
        id: String,
    },

    /// The run is not in a state that allows the operation.
    #[error("run {run} is {status}: {detail}")]
    RunState {
        /// The run.
        run: String,
        /// Its status.
        status: RunStatus,
        /// What was refused.
        detail: String,
    },

    /// Another live owner holds the run's lease.
    #[error("run {run} is leased to {owner} until {expires_at}")]
    RunLeased {
        /// The run.
        run: String,
        /// The owner.
        owner: String,
        /// When the lease lapses.
        expires_at: String,
    },

    /// This instance lost the run's lease; it stopped before any further
    /// tool or model call.
    #[error("lost the lease on run {run}; another owner may have taken it over")]
    LeaseLost {
        /// The run.
        run: String,
    },

    /// The approval is not pending.
    #[error("approval {approval} is not pending (it is {status})")]
    NotPending {
        /// The approval.
        approval: String,
        /// Its status.
        status: ApprovalStatus,
    },

    /// The approval lapsed (it is, or just became, expired).
    #[error("approval {approval} expired")]
    ApprovalExpired {
        /// The approval.
        approval: String,
    },

    /// A newer approval for the same step exists; only the latest grants.
    #[error(
        "approval {approval} is not pending: it was superseded by approval {latest} of the same step"
    )]
    ApprovalSuperseded {
        /// The approval.
        approval: String,
        /// The step's latest approval.
        latest: String,
    },

    /// A session held a grant that a newer approval of the same step
    /// superseded before the tool started: nothing ran, and the refusal is
    /// on record (`approval.superseded`).
    #[error(
        "approval {approval} no longer grants: approval {latest} of the same step superseded it; nothing ran"
    )]
    GrantSuperseded {
        /// The grant the session held.
        approval: String,
        /// The step's latest approval now.
        latest: String,
    },

    /// A write group changed state rows but appended no event to explain
    /// them; it was rolled back (every durable change is on the chain).
    #[error(
        "a write group changed {rows} state row(s), {table} {id:?} first, without an event to explain them; nothing was written"
    )]
    UnexplainedWrite {
        /// The first table written.
        table: &'static str,
        /// The first row written.
        id: String,
        /// How many row writes the group made.
        rows: usize,
    },

    /// The approval changed after it was shown.
    #[error(
        "approval {approval} changed after it was shown (shown hash {shown}, stored hash {stored}); run the command again"
    )]
    ApprovalChanged {
        /// The approval.
        approval: String,
        /// The hash that was shown.
        shown: String,
        /// The hash stored now.
        stored: String,
    },

    /// An operator's edit of an approval was refused (arguments that are
    /// not a JSON object, that the tool's schema refuses, that the policy
    /// denies, or an approval that cannot be edited): nothing was decided.
    #[error("the edit of approval {approval} is refused: {detail}; nothing was decided")]
    EditRefused {
        /// The approval.
        approval: String,
        /// Why.
        detail: String,
    },

    /// The approval needs two distinct approvers and this one approved it
    /// already: another person must decide (design §46).
    #[error("approval {approval} was approved by {by:?} already: it needs another approver")]
    SameApprover {
        /// The approval.
        approval: String,
        /// The approver who tried twice.
        by: String,
    },

    /// The stored approval no longer matches its hash, or cannot be read.
    #[error("approval {approval} does not match its hash: {detail}")]
    ApprovalHash {
        /// The approval.
        approval: String,
        /// What does not match.
        detail: String,
    },

    /// The run has no pending approval.
    #[error("run {run} has no pending approval")]
    NoPendingApproval {
        /// The run.
        run: String,
    },

    /// The run has several pending approvals and none was named.
    #[error("run {run} has several pending approvals; name one with --approval: {}{}", ids.join(", "), if *more > 0 { format!(" and {more} more") } else { String::new() })]
    AmbiguousApproval {
        /// The run.
        run: String,
        /// Up to 20 pending approval ids.
        ids: Vec<String>,
        /// How many more are pending.
        more: usize,
    },

    /// A tool cannot be registered.
    #[error("tool {tool:?} cannot be registered: {reason}")]
    InvalidTool {
        /// The tool's name.
        tool: String,
        /// Why.
        reason: String,
    },

    /// Limits that cannot be used.
    #[error(transparent)]
    InvalidLimits(#[from] LimitsError),

    /// A policy id that cannot be recorded.
    #[error("policy id refused: {reason}")]
    InvalidPolicyId {
        /// Why.
        reason: String,
    },

    /// An argument the caller supplied is unusable.
    #[error("{what}: {detail}")]
    InvalidInput {
        /// Which argument.
        what: &'static str,
        /// What is wrong and what to do.
        detail: String,
    },

    /// A satellite refused its write group because a claim it keeps is
    /// held already (a request made before, a signature or a login link
    /// used): nothing of the group was written. The satellite names its
    /// claims and matches this variant by that name, never by the text.
    #[error("{claim}: {detail}")]
    ClaimHeld {
        /// Which claim, as the satellite that keeps it names it.
        claim: &'static str,
        /// What was refused and why.
        detail: String,
    },

    /// The configured model has no price (declare it free if it is).
    #[error(
        "model {model:?} has no price; add it to the price table, or declare it free with PriceTable::free"
    )]
    NoPrice {
        /// The model.
        model: String,
    },

    /// A value could not be encoded in the canonical form.
    #[error("canonical JSON: {0}")]
    Json(#[from] JsonError),

    /// A stored row is damaged.
    #[error("{table} row {id}: {detail}")]
    Corrupt {
        /// The table.
        table: &'static str,
        /// The row.
        id: String,
        /// What could not be read.
        detail: String,
    },

    /// A satellite's [`crate::store::Extension`] cannot be used as
    /// declared: its name, its migrations' versions, or its tables'
    /// names, keys or columns break a rule of the extension point.
    #[error("extension {extension:?} is declared wrongly: {detail}")]
    ExtensionDeclaration {
        /// The extension's name (as declared).
        extension: String,
        /// What is wrong and what to do.
        detail: String,
    },

    /// An extension migration was refused while it ran: its DDL did
    /// something an extension may not (create a trigger or a view, touch a
    /// table outside its prefix, write rows, drop a table, run a pragma or a
    /// transaction). Nothing of the open was applied.
    #[error("migration {version} of extension {extension:?} was refused: {detail}")]
    ExtensionMigrationRefused {
        /// The extension.
        extension: String,
        /// The migration's version.
        version: i64,
        /// What it did.
        detail: String,
    },

    /// A migration the database recorded as applied has another text in
    /// this build: released migrations are never edited.
    #[error(
        "migration {version} of extension {extension:?} was applied with DDL hash {applied}, but this build declares hash {declared}; released migrations are never edited, add a new one instead"
    )]
    ExtensionMigrationChanged {
        /// The extension.
        extension: String,
        /// The migration's version.
        version: i64,
        /// The hash recorded when it was applied.
        applied: String,
        /// The hash of the DDL this build declares.
        declared: String,
    },

    /// The database holds an extension at another version than this build
    /// declares: newer (a newer build of the satellite migrated it), or,
    /// for an opener that does not migrate, older.
    #[error("database {path} has extension {extension:?} at version {database}, this build declares version {build}", path = path.display())]
    ExtensionVersion {
        /// The file.
        path: PathBuf,
        /// The extension.
        extension: String,
        /// The version the database is at (0: never migrated).
        database: i64,
        /// The version this build declares.
        build: i64,
    },

    /// An extension table, as its migrations left it, does not match what
    /// the extension declares or what the chain needs (its columns, their
    /// types, `written_seq`, a unique key, its registration).
    #[error("extension {extension:?} table {table:?}: {detail}")]
    ExtensionSchema {
        /// The extension.
        extension: String,
        /// The table.
        table: String,
        /// What does not match.
        detail: String,
    },

    /// No extension table of that name is registered with this store.
    #[error("no extension table {table:?} is registered with this store")]
    NoSuchTable {
        /// The name asked for.
        table: String,
    },

    /// The extension table has no digested column of that name.
    #[error("extension table {table:?} has no column {column:?}")]
    NoSuchColumn {
        /// The table.
        table: &'static str,
        /// The name asked for.
        column: String,
    },

    /// A value of the wrong type for its column, or a row operation the
    /// extension point does not allow on it (changing the key, naming a
    /// column twice, setting nothing).
    #[error("extension table {table:?} column {column:?}: {detail}")]
    ColumnValue {
        /// The table.
        table: &'static str,
        /// The column.
        column: &'static str,
        /// What is wrong.
        detail: String,
    },

    /// The caller cancelled; what had happened was recorded first.
    #[error("cancelled by the caller")]
    Cancelled,

    /// The session is closed (after `close`, or after a failed call).
    #[error("the session is closed{}", cause.as_ref().map(|c| format!(": {c}")).unwrap_or_default())]
    SessionClosed {
        /// The error that closed it, if any.
        cause: Option<String>,
    },

    /// The runtime could not do its own part: the store's writer thread
    /// stopped (the process is shutting down) or could not start.
    #[error("internal: {detail}")]
    Internal {
        /// What failed.
        detail: String,
    },
}

/// A label's refusal as the crate's: [`Error::InvalidInput`] with `what:
/// "label"` (the same text).
impl From<LabelError> for Error {
    fn from(e: LabelError) -> Error {
        Error::InvalidInput {
            what: "label",
            detail: e.detail,
        }
    }
}

impl Error {
    /// The claim a satellite refused with ([`Error::ClaimHeld`]), if that
    /// is what this error is.
    ///
    /// ```
    /// use agentrt::Error;
    ///
    /// const USED: &str = "login link";
    /// let refused = Error::ClaimHeld { claim: USED, detail: "used already".into() };
    /// assert_eq!(refused.held_claim(), Some(USED));
    /// assert_eq!(refused.to_string(), "login link: used already");
    /// ```
    pub fn held_claim(&self) -> Option<&'static str> {
        match self {
            Error::ClaimHeld { claim, .. } => Some(claim),
            _ => None,
        }
    }

    /// `true` for the errors that mean "this approval cannot be decided
    /// because it is not the pending one": not pending, expired, superseded.
    pub fn is_not_pending(&self) -> bool {
        matches!(
            self,
            Error::NotPending { .. }
                | Error::ApprovalExpired { .. }
                | Error::ApprovalSuperseded { .. }
        )
    }

    /// `true` for errors about the run's state, a foreign lease included.
    pub fn is_run_state(&self) -> bool {
        matches!(self, Error::RunState { .. } | Error::RunLeased { .. })
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// Busy and locked SQLite errors become [`Error::DatabaseLocked`].
    pub(crate) fn from_sqlite(e: rusqlite::Error) -> Error {
        if let rusqlite::Error::SqliteFailure(f, _) = &e
            && matches!(
                f.code,
                rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
            )
        {
            return Error::DatabaseLocked;
        }
        let kind = match &e {
            rusqlite::Error::SqliteFailure(f, _) => match f.code {
                rusqlite::ErrorCode::ConstraintViolation => DatabaseErrorKind::Constraint,
                rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase => {
                    DatabaseErrorKind::Corrupt
                }
                rusqlite::ErrorCode::DiskFull => DatabaseErrorKind::Full,
                rusqlite::ErrorCode::ReadOnly => DatabaseErrorKind::ReadOnly,
                rusqlite::ErrorCode::SystemIoFailure => DatabaseErrorKind::Io,
                _ => DatabaseErrorKind::Other,
            },
            _ => DatabaseErrorKind::Other,
        };
        Error::Database {
            kind,
            message: e.to_string(),
        }
    }

    /// The same failure again, for every write group of a batch whose
    /// commit failed (errors are not `Clone`: an I/O source is not).
    ///
    /// ```
    /// let e = agentrt::Error::DatabaseLocked;
    /// assert!(matches!(e.for_each_group(), agentrt::Error::DatabaseLocked));
    /// ```
    pub fn for_each_group(&self) -> Error {
        match self {
            Error::DatabaseLocked => Error::DatabaseLocked,
            Error::Database { kind, message } => Error::Database {
                kind: *kind,
                message: message.clone(),
            },
            other => Error::Database {
                kind: DatabaseErrorKind::Other,
                message: other.to_string(),
            },
        }
    }
}

/// What kind of database failure an [`Error::Database`] is, in terms any
/// backend can report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DatabaseErrorKind {
    /// A uniqueness or reference constraint refused a row.
    Constraint,
    /// The file is damaged.
    Corrupt,
    /// The disk or the database is full.
    Full,
    /// The database or its directory cannot be written.
    ReadOnly,
    /// The operating system failed an I/O operation.
    Io,
    /// Anything else.
    Other,
}

/// The runtime's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
