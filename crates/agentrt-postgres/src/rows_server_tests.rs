//! The pipeline of one transaction's statements on a real server (feature
//! `real-postgres`, run by `cargo xtask test`).

use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};

use crate::PgOptions;
use crate::extensions::ExtensionTables;
use crate::rows::{PgRows, int};
use crate::runtime::round_trip;

use crate::batch_server_tests::backends;

/// A parameter that cannot be encoded: its statement fails before any
/// of it is sent.
#[derive(Debug)]
struct Unencodable;

impl ToSql for Unencodable {
    fn to_sql(
        &self,
        _: &Type,
        _: &mut bytes::BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        Err("cannot be encoded".into())
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::INT8
    }

    to_sql_checked!();
}

#[test]
fn a_statement_that_fails_before_it_is_sent_stops_the_ones_after_it() {
    let url = backends::fresh_database();
    let backend = crate::backend(&url, &PgOptions::default()).unwrap();
    let tables = ExtensionTables::default();
    // A sequence's `nextval` is not undone by a rollback: whether it
    // ran shows whether its statement reached the server.
    backend
        .pool
        .with(|conn| {
            round_trip(conn.client.batch_execute("CREATE SEQUENCE probe")).unwrap();
            round_trip(conn.client.batch_execute("BEGIN")).unwrap();
            let rows = PgRows::new(&conn.client, &mut conn.statements, &tables, None, None);
            rows.defer("SELECT ?::bigint", vec![Box::new(Unencodable)])?;
            rows.defer("SELECT nextval('probe') + ?", vec![int(0)])?;
            let failed = rows.query("SELECT 1", &[]);
            assert!(failed.is_err(), "{failed:?}");
            drop(rows);
            round_trip(conn.client.batch_execute("ROLLBACK")).unwrap();
            let called: bool =
                round_trip(conn.client.query_one("SELECT is_called FROM probe", &[]))
                    .unwrap()
                    .get(0);
            assert!(
                !called,
                "a statement after the one that failed unsent was sent"
            );
            Ok(())
        })
        .unwrap();
}
