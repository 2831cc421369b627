//! The engine's statements inside one transaction: [`PgRows`] answers the
//! core's row surfaces (`ReadRows` in `read`, `GroupRows` in `group`) on a
//! transaction of a pooled connection, through its statement cache.

use std::cell::{Cell, OnceCell, RefCell};
use std::collections::HashMap;

use agentrt::chain::{RowValue, row_digest};
use agentrt::clock::Timestamp;
use agentrt::store::engine::RowColumns;
use agentrt::store::engine::schema::StateTable;
use agentrt::{Error, Result};
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, Row, SimpleQueryMessage, Statement};

use crate::error::{connection_gone, is_retryable, pg_error};
use crate::extensions::ExtensionTables;
use crate::pool::{Conn, Statements};
use crate::runtime::round_trip;

/// `BEGIN`, then the chain head's lock taken with the server's clock read
/// at that moment and the head itself: a write group's first statements.
const BEGIN_LOCKED: &str = "BEGIN; SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint, \
     head_seq, head_hash FROM agentrt_chain WHERE id = 1 FOR UPDATE";

/// How often a write group's first request is sent again when taking the
/// chain head's lock met a serialization failure or a broken deadlock.
const LOCK_ATTEMPTS: u32 = 8;

/// What a write group learns when it takes the chain head's lock.
pub(crate) struct Locked {
    pub(crate) now: Timestamp,
    pub(crate) head: (i64, String),
}

/// The lock's row, as the simple query protocol answers it (text).
fn lock_answer(messages: &[SimpleQueryMessage]) -> Option<Locked> {
    let row = messages.iter().find_map(|m| match m {
        SimpleQueryMessage::Row(row) => Some(row),
        _ => None,
    })?;
    let micros = row.get(0)?.parse::<i64>().ok()?;
    let seq = row.get(1)?.parse::<i64>().ok()?;
    let hash = row.get(2)?.to_owned();
    Some(Locked {
        now: Timestamp::from_unix_nanos(i128::from(micros) * 1000),
        head: (seq, hash),
    })
}

/// The digest of a state row of `table` selected as its digested columns
/// (BIGINT or TEXT) in their fixed order: the one SQLite's rows get.
pub(crate) fn digest_row(table: &str, row: &Row) -> Result<String> {
    let values = row
        .columns()
        .iter()
        .enumerate()
        .map(|(i, column)| {
            if *column.type_() == Type::INT8 {
                row.try_get::<_, Option<i64>>(i)
                    .map(|n| n.map_or(RowValue::Null, RowValue::Int))
            } else {
                row.try_get::<_, Option<&str>>(i)
                    .map(|t| t.map_or(RowValue::Null, |t| RowValue::Text(t.as_bytes())))
            }
        })
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| pg_error(&e))?;
    Ok(row_digest(table, &values))
}

/// A bound parameter.
pub(crate) type Param = Box<dyn ToSql + Sync>;

/// A statement sent later: one whose result decides nothing in the group
/// (an insert, the head's move), only whether the group fails.
enum Deferred {
    /// A statement's SQL and its parameters; with `Some(what)`, it must
    /// change exactly one row, else the request fails naming `what`.
    Prepared(String, Vec<Param>, Option<String>),
    /// A statement without parameters or rows (`SAVEPOINT`).
    Simple(&'static str),
}

/// What one pipelined request answered.
enum Answer {
    Rows(Vec<Row>),
    Count(u64),
    Done,
    /// The simple query protocol's answer (the lock's).
    Messages(Vec<SimpleQueryMessage>),
}

/// Opens a connection to replace one found dead.
pub(crate) type Reconnect<'a> = &'a dyn Fn() -> Result<Conn>;

/// The row operations of one transaction, open on `client`'s connection.
///
/// Statements whose result the group does not need are deferred and sent
/// in one request with the next statement whose result it needs, or with
/// the `COMMIT`: a round trip per decision, not per statement. A deferred
/// statement's failure fails the request it went with, so the group still
/// fails whole.
///
/// A lone write group's `BEGIN` and lock go with its first request too
/// ([`PgRows::unbegun`]). Until that request is answered nothing of the
/// group can last and nothing it sent depended on an answer, so when its
/// connection turns out dead the same request goes again on a new one
/// (and, when the lock met a serialization failure, again on the same):
/// the group never notices.
pub(crate) struct PgRows<'a> {
    client: &'a Client,
    statements: RefCell<&'a mut Statements>,
    /// The connection that took over from `client`, found dead before the
    /// transaction's first answer.
    replacement: OnceCell<(Client, RefCell<Statements>)>,
    /// How to open that replacement (write groups only).
    reconnect: Option<Reconnect<'a>>,
    /// Whether `BEGIN` and the chain head's lock still wait to go with the
    /// transaction's first request.
    unbegun: Cell<bool>,
    /// The server's clock, read once per transaction (see `clock_now`).
    now: Cell<Option<Timestamp>>,
    /// The chain head as the group's lock read it, moved by the group's
    /// own events (`None` outside a write group: read on demand).
    head: RefCell<Option<(i64, String)>>,
    deferred: RefCell<Vec<Deferred>>,
    /// Whether anything deferred has been sent.
    sent: Cell<bool>,
    /// The digest of each row the group wrote, as its last change left
    /// it (an update's `RETURNING`, an insert's own values), so marking
    /// the rows written needs no answer from the server.
    digests: RefCell<HashMap<(StateTable, String), String>>,
    /// The extension tables of the store, as created.
    pub(crate) extensions: &'a ExtensionTables,
    /// Each extension row the group wrote: its key as typed, and its
    /// digest when the group knows it.
    pub(crate) extension_rows: RefCell<HashMap<(&'static str, String), ExtensionWrite>>,
}

/// An extension row a group wrote: its key as typed, its digest if known.
pub(crate) struct ExtensionWrite {
    pub(crate) key: agentrt::store::SqlValue,
    pub(crate) digest: Option<String>,
}

impl<'a> PgRows<'a> {
    /// The rows of the transaction open on `client`; `now` is the server's
    /// clock when it was read with the transaction's first request, `head`
    /// the chain head the group locked.
    pub(crate) fn new(
        client: &'a Client,
        statements: &'a mut Statements,
        extensions: &'a ExtensionTables,
        now: Option<Timestamp>,
        head: Option<(i64, String)>,
    ) -> Self {
        PgRows {
            client,
            statements: RefCell::new(statements),
            replacement: OnceCell::new(),
            reconnect: None,
            unbegun: Cell::new(false),
            now: Cell::new(now),
            head: RefCell::new(head),
            deferred: RefCell::new(Vec::new()),
            sent: Cell::new(false),
            digests: RefCell::new(HashMap::new()),
            extensions,
            extension_rows: RefCell::new(HashMap::new()),
        }
    }

    /// The rows of a write transaction on `client` not yet begun: `BEGIN`
    /// and the chain head's lock go with its first request, which goes
    /// again on a connection from `reconnect` if `client` turns out dead
    /// before answering it (without one, the dead connection's error is
    /// the answer).
    pub(crate) fn unbegun(
        client: &'a Client,
        statements: &'a mut Statements,
        extensions: &'a ExtensionTables,
        reconnect: Option<Reconnect<'a>>,
    ) -> Self {
        let rows = PgRows::new(client, statements, extensions, None, None);
        rows.unbegun.set(true);
        PgRows { reconnect, ..rows }
    }

    /// The server's clock and the chain head as the lock answered them,
    /// the lock taken first if it still waits.
    pub(crate) fn locked(&self) -> Result<Locked> {
        self.begin()?;
        match (self.now.get(), self.held_head()) {
            (Some(now), Some(head)) => Ok(Locked { now, head }),
            _ => Err(Error::Internal {
                detail: "a write transaction holds no chain head lock".into(),
            }),
        }
    }

    /// The connection that replaced the one the rows were opened on, if
    /// it was found dead; the caller puts it in the dead one's place.
    pub(crate) fn into_replacement(self) -> Option<Conn> {
        self.replacement
            .into_inner()
            .map(|(client, statements)| Conn {
                client,
                statements: statements.into_inner(),
            })
    }

    /// The connection the transaction runs on.
    fn client(&self) -> &Client {
        self.replacement
            .get()
            .map_or(self.client, |(client, _)| client)
    }

    /// The prepared statement for `sql` (written with `?` placeholders) on
    /// the transaction's connection.
    fn statement(&self, sql: &str) -> Result<Statement> {
        let prepare = |statements: &mut Statements, client: &Client| {
            if let Some(statement) = statements.get(sql) {
                return Ok(statement.clone());
            }
            let statement = round_trip(client.prepare(&numbered(sql))).map_err(|e| pg_error(&e))?;
            statements.insert(sql.to_owned(), statement.clone());
            Ok(statement)
        };
        match self.replacement.get() {
            Some((client, statements)) => prepare(&mut statements.borrow_mut(), client),
            None => prepare(&mut self.statements.borrow_mut(), self.client),
        }
    }

    /// Sends `BEGIN` and the lock (with what is deferred) if they still
    /// wait: the group needs the clock or the head they answer.
    pub(crate) fn begin(&self) -> Result<()> {
        if self.unbegun.get() {
            self.send(Vec::new())?;
        }
        Ok(())
    }

    /// The server's clock (`clock_timestamp()`, so a group that queued on
    /// the chain head reads the time it runs at), read on first use and
    /// kept for the rest of the transaction: one instant per group, as the
    /// gate reads its clock once per group.
    pub(crate) fn server_now(&self) -> Result<Timestamp> {
        self.begin()?;
        if let Some(now) = self.now.get() {
            return Ok(now);
        }
        let micros = self.int(
            "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint",
            &[],
        )?;
        let now = Timestamp::from_unix_nanos(i128::from(micros) * 1000);
        self.now.set(Some(now));
        Ok(now)
    }

    /// The chain head the group holds, if it was read with its lock.
    pub(crate) fn held_head(&self) -> Option<(i64, String)> {
        self.head.borrow().clone()
    }

    /// Records the head the group's own events moved it to.
    pub(crate) fn moved_head(&self, seq: i64, hash: &str) {
        let mut head = self.head.borrow_mut();
        if head.is_some() {
            *head = Some((seq, hash.to_owned()));
        }
    }

    /// Queues a statement whose result the group does not need; it is sent
    /// with the next request.
    pub(crate) fn defer(&self, sql: &str, params: Vec<Param>) -> Result<()> {
        self.deferred
            .borrow_mut()
            .push(Deferred::Prepared(sql.to_owned(), params, None));
        Ok(())
    }

    /// Queues a statement that must change exactly one row (`what` names
    /// it): the group fails with the request it goes with if it does not.
    pub(crate) fn defer_one(&self, sql: &str, params: Vec<Param>, what: String) -> Result<()> {
        self.deferred
            .borrow_mut()
            .push(Deferred::Prepared(sql.to_owned(), params, Some(what)));
        Ok(())
    }

    /// Forgets the digest noted for `table`'s row `key` (a deferred change
    /// will alter the row without answering it).
    pub(crate) fn forget_row(&self, table: StateTable, key: &str) {
        self.digests.borrow_mut().remove(&(table, key.to_owned()));
    }

    /// Notes the digest of `table`'s row `key` as the group's last change
    /// left it.
    pub(crate) fn wrote_row(&self, table: StateTable, key: &str, digest: String) {
        self.digests
            .borrow_mut()
            .insert((table, key.to_owned()), digest);
    }

    /// The digest noted for `table`'s row `key`, if the group wrote it.
    pub(crate) fn written_digest(&self, table: StateTable, key: &str) -> Option<String> {
        self.digests.borrow().get(&(table, key.to_owned())).cloned()
    }

    /// Whether any statement of this transaction went through a
    /// pipelined request (a group whose savepoint was deferred sent none
    /// before that).
    pub(crate) fn sent_any(&self) -> bool {
        self.sent.get()
    }

    /// Queues a statement without parameters or rows (`SAVEPOINT`).
    pub(crate) fn defer_simple(&self, sql: &'static str) {
        self.deferred.borrow_mut().push(Deferred::Simple(sql));
    }

    /// Sends what is deferred, if anything, and waits for its answers.
    pub(crate) fn flush(&self) -> Result<()> {
        if self.deferred.borrow().is_empty() {
            return Ok(());
        }
        self.send(Vec::new()).map(|_| ())
    }

    /// Sends the deferred statements and then `last` in one request and
    /// returns `last`'s answers, each query's in order; the first failure
    /// among them is the answer. The transaction's first request, when
    /// `BEGIN` and the lock still wait, starts with them and goes again
    /// whole where that is safe (see [`PgRows`]).
    fn send(&self, last: Vec<Last<'_>>) -> Result<Vec<Answer>> {
        let deferred = std::mem::take(&mut *self.deferred.borrow_mut());
        self.sent.set(true);
        if !self.unbegun.replace(false) {
            return self.send_once(false, &deferred, &last).map_err(|(e, _)| e);
        }
        let mut attempt = 0;
        loop {
            attempt += 1;
            let (e, cure) = match self.send_once(true, &deferred, &last) {
                Ok(answers) => return Ok(answers),
                Err(failed) => failed,
            };
            if cure == Cure::Reconnect || self.client().is_closed() {
                // Dead before it answered: nothing of the group lasted and
                // nothing it sent depended on an answer. Once, on a new one.
                let reconnect = match self.reconnect {
                    Some(reconnect) if self.replacement.get().is_none() => reconnect,
                    _ => return Err(e),
                };
                let conn = reconnect()?;
                let _ = self
                    .replacement
                    .set((conn.client, RefCell::new(conn.statements)));
            } else if cure == Cure::Retake && attempt < LOCK_ATTEMPTS {
                // The transaction began and is aborted: end it, then again.
                let _ = round_trip(self.client().batch_execute("ROLLBACK"));
            } else {
                return Err(e);
            }
        }
    }

    /// One sending of a request (see [`PgRows::send`]), `begins` with
    /// `BEGIN` and the lock; a failure says what would cure it.
    fn send_once(
        &self,
        begins: bool,
        deferred: &[Deferred],
        last: &[Last<'_>],
    ) -> std::result::Result<Vec<Answer>, (Error, Cure)> {
        let unretryable = |e: Error| (e, Cure::None);
        let client = self.client();
        // Every statement prepared on this connection before any is sent.
        let mut outgoing = Vec::with_capacity(deferred.len() + last.len());
        for d in deferred {
            outgoing.push(match d {
                Deferred::Prepared(sql, params, _) => {
                    Outgoing::Execute(self.statement(sql).map_err(unretryable)?, params)
                }
                Deferred::Simple(sql) => Outgoing::Simple(sql),
            });
        }
        for item in last {
            outgoing.push(match *item {
                Last::Query(sql, params) => {
                    Outgoing::Query(self.statement(sql).map_err(unretryable)?, params)
                }
                Last::Execute(sql, params) => {
                    Outgoing::Execute(self.statement(sql).map_err(unretryable)?, params)
                }
                Last::Simple(sql) => Outgoing::Simple(sql),
            });
        }
        let mut requests: Vec<Request<'_>> = Vec::with_capacity(outgoing.len() + 1);
        if begins {
            requests.push(Box::pin(async move {
                client
                    .simple_query(BEGIN_LOCKED)
                    .await
                    .map(Answer::Messages)
            }));
        }
        for out in &outgoing {
            requests.push(match out {
                Outgoing::Execute(statement, params) => Box::pin(async move {
                    let refs: Vec<&(dyn ToSql + Sync)> =
                        params.iter().map(|p| p.as_ref()).collect();
                    client.execute(statement, &refs).await.map(Answer::Count)
                }),
                Outgoing::Query(statement, params) => Box::pin(async move {
                    let refs: Vec<&(dyn ToSql + Sync)> =
                        params.iter().map(|p| p.as_ref()).collect();
                    client.query(statement, &refs).await.map(Answer::Rows)
                }),
                Outgoing::Simple(sql) => {
                    Box::pin(async move { client.batch_execute(sql).await.map(|()| Answer::Done) })
                }
            });
        }
        let mut answers = round_trip(in_order(requests)).into_iter();
        if begins {
            match answers.next() {
                Some(Ok(Answer::Messages(messages))) => match lock_answer(&messages) {
                    Some(Locked { now, head }) => {
                        self.now.set(Some(now));
                        *self.head.borrow_mut() = Some(head);
                    }
                    None => {
                        return Err(unretryable(Error::Internal {
                            detail: "the database has no chain head row (agentrt_chain)".into(),
                        }));
                    }
                },
                Some(Err(e)) => return Err((pg_error(&e), Cure::of(&e))),
                _ => {
                    return Err(unretryable(Error::Internal {
                        detail: "the chain head's lock was not answered".into(),
                    }));
                }
            }
        }
        let first_wanted = deferred.len();
        let mut wanted = Vec::with_capacity(last.len());
        for (i, answer) in answers.enumerate() {
            let answer = answer.map_err(|e| (pg_error(&e), Cure::of(&e)))?;
            if let (Some(Deferred::Prepared(_, _, Some(what))), Answer::Count(n)) =
                (deferred.get(i), &answer)
                && *n != 1
            {
                return Err(unretryable(Error::Internal {
                    detail: format!("{what} changed {n} rows, not one"),
                }));
            }
            if i >= first_wanted {
                wanted.push(answer);
            }
        }
        Ok(wanted)
    }

    /// Every row of a query (sent with the deferred statements).
    pub(crate) fn query(&self, sql: &str, params: &[Param]) -> Result<Vec<Row>> {
        match self.send(vec![Last::Query(sql, params)])?.pop() {
            Some(Answer::Rows(rows)) => Ok(rows),
            _ => Ok(Vec::new()),
        }
    }

    /// The rows of several queries sent in one request (with the deferred
    /// statements), in order.
    pub(crate) fn query_all(&self, queries: &[(String, Vec<Param>)]) -> Result<Vec<Vec<Row>>> {
        let last = queries
            .iter()
            .map(|(sql, params)| Last::Query(sql, params))
            .collect();
        Ok(self
            .send(last)?
            .into_iter()
            .map(|answer| match answer {
                Answer::Rows(rows) => rows,
                _ => Vec::new(),
            })
            .collect())
    }

    /// Sends the deferred statements with `sql` (a `COMMIT`) in one
    /// request.
    pub(crate) fn finish(&self, sql: &str) -> Result<()> {
        // Never with the transaction's first request: that one may go
        // twice, and a `COMMIT` must not.
        self.begin()?;
        // A statement that must change one row is checked here, by the
        // client: it goes before the `COMMIT`, never with it.
        let expecting = self
            .deferred
            .borrow()
            .iter()
            .any(|d| matches!(d, Deferred::Prepared(_, _, Some(_))));
        if expecting {
            self.flush()?;
        }
        self.send(vec![Last::Simple(sql)]).map(|_| ())
    }

    /// The rows of a query, decoded by `f`.
    pub(crate) fn rows<T>(
        &self,
        sql: &str,
        params: &[Param],
        f: fn(&dyn RowColumns) -> Result<T>,
    ) -> Result<Vec<T>> {
        self.query(sql, params)?
            .iter()
            .map(|row| f(&Columns(row)))
            .collect()
    }

    /// The first row of a query, decoded by `f`.
    pub(crate) fn first<T>(
        &self,
        sql: &str,
        params: &[Param],
        f: fn(&dyn RowColumns) -> Result<T>,
    ) -> Result<Option<T>> {
        self.query(sql, params)?
            .first()
            .map(|row| f(&Columns(row)))
            .transpose()
    }

    /// One integer (a count, a seq) from the first row's first column.
    pub(crate) fn int(&self, sql: &str, params: &[Param]) -> Result<i64> {
        let rows = self.query(sql, params)?;
        match rows.first() {
            Some(row) => Columns(row).int(0),
            None => Ok(0),
        }
    }

    /// How many rows a statement changed (sent with the deferred
    /// statements).
    pub(crate) fn execute(&self, sql: &str, params: &[Param]) -> Result<u64> {
        match self.send(vec![Last::Execute(sql, params)])?.pop() {
            Some(Answer::Count(n)) => Ok(n),
            _ => Ok(0),
        }
    }
}

/// The statements of a request whose answers the caller wants, by their
/// SQL (prepared on the connection they go on).
#[derive(Clone, Copy)]
enum Last<'s> {
    Query(&'s str, &'s [Param]),
    Execute(&'s str, &'s [Param]),
    Simple(&'s str),
}

/// What cures a failed first request of a transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cure {
    /// Taking the lock again (a serialization failure, a broken deadlock).
    Retake,
    /// Another connection: this one is gone, whether or not the client
    /// noticed yet.
    Reconnect,
    /// Nothing: the failure is the answer.
    None,
}

impl Cure {
    fn of(e: &tokio_postgres::Error) -> Cure {
        if connection_gone(e) {
            Cure::Reconnect
        } else if is_retryable(e) {
            Cure::Retake
        } else {
            Cure::None
        }
    }
}

/// A statement of a request, ready to go on one connection.
enum Outgoing<'s> {
    Execute(Statement, &'s [Param]),
    Query(Statement, &'s [Param]),
    Simple(&'s str),
}

/// One statement of a pipelined request.
type Request<'r> = std::pin::Pin<
    Box<dyn std::future::Future<Output = std::result::Result<Answer, tokio_postgres::Error>> + 'r>,
>;

/// Runs `requests` together and answers them in order. Each is polled
/// first in its order, which is when tokio-postgres queues its message:
/// the server receives and runs them in that order, in one round trip. A
/// request that fails before it is sent (a parameter that cannot be
/// encoded) stops the ones after it from being sent at all, so a `COMMIT`
/// at the end never commits a transaction missing a statement.
async fn in_order(
    mut requests: Vec<Request<'_>>,
) -> Vec<std::result::Result<Answer, tokio_postgres::Error>> {
    use std::task::Poll;
    let mut answers: Vec<Option<std::result::Result<Answer, tokio_postgres::Error>>> =
        requests.iter().map(|_| None).collect();
    let mut sent = 0;
    let mut failed_unsent = false;
    std::future::poll_fn(|cx| {
        // Send: the first poll of each, in order, until one fails unsent.
        while sent < requests.len() && !failed_unsent {
            if let Poll::Ready(answer) = requests[sent].as_mut().poll(cx) {
                failed_unsent = answer.is_err();
                answers[sent] = Some(answer);
            }
            sent += 1;
        }
        // Then wait for the answers of what was sent.
        let mut waiting = false;
        for (request, answer) in requests.iter_mut().zip(answers.iter_mut()).take(sent) {
            if answer.is_none() {
                match request.as_mut().poll(cx) {
                    Poll::Ready(value) => *answer = Some(value),
                    Poll::Pending => waiting = true,
                }
            }
        }
        if waiting {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    answers.into_iter().flatten().collect()
}

/// A PostgreSQL row read through the core's decoders.
pub(crate) struct Columns<'r>(pub(crate) &'r Row);

impl RowColumns for Columns<'_> {
    fn text(&self, index: usize) -> Result<String> {
        self.0.try_get(index).map_err(|e| pg_error(&e))
    }

    fn int(&self, index: usize) -> Result<i64> {
        self.0.try_get(index).map_err(|e| pg_error(&e))
    }

    fn opt_text(&self, index: usize) -> Result<Option<String>> {
        self.0.try_get(index).map_err(|e| pg_error(&e))
    }
}

/// `sql` with its `?` placeholders numbered (`$1`, `$2`, …). The store's
/// statements have no `?` in literals or operators.
pub(crate) fn numbered(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 16);
    let mut n = 0;
    for c in sql.chars() {
        if c == '?' {
            n += 1;
            out.push('$');
            out.push_str(&n.to_string());
        } else {
            out.push(c);
        }
    }
    out
}

/// A text parameter.
pub(crate) fn text(value: impl Into<String>) -> Param {
    Box::new(value.into())
}

/// An integer parameter.
pub(crate) fn int(value: i64) -> Param {
    Box::new(value)
}

/// A count as a parameter (saturating).
pub(crate) fn count(value: u64) -> Param {
    int(i64::try_from(value).unwrap_or(i64::MAX))
}

/// A `LIMIT` parameter: 0 means all (`LIMIT NULL`).
pub(crate) fn limit(value: u64) -> Param {
    let limit: Option<i64> = (value > 0).then(|| i64::try_from(value).unwrap_or(i64::MAX));
    Box::new(limit)
}

#[cfg(test)]
mod tests {
    use super::numbered;

    #[test]
    fn placeholders_are_numbered_in_order() {
        assert_eq!(
            numbered("SELECT a FROM t WHERE b = ? AND c IN (?, ?)"),
            "SELECT a FROM t WHERE b = $1 AND c IN ($2, $3)"
        );
        assert_eq!(numbered("SELECT 1"), "SELECT 1");
    }
}
