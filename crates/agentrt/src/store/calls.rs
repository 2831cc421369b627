//! Model call attempts: recorded before dispatch (only under a live
//! lease), completed after, and read back.

use rusqlite::types::Value;
use rusqlite::{OptionalExtension, Row};

use super::schema::StateTable;
use super::{Store, WriteTx};
use crate::clock::Timestamp;
use crate::error::{Error, Result};
use crate::model::{CallStatus, ModelCall, Usage};

fn int(n: u64) -> Value {
    Value::Integer(i64::try_from(n).unwrap_or(i64::MAX))
}

impl WriteTx<'_> {
    /// Records a call attempt as `dispatched`, only while `owner` holds an
    /// unexpired lease on the RUNNING run (checked by the wall clock in the
    /// same statement); `false` when the lease is gone.
    pub fn insert_model_call(
        &mut self,
        call: &ModelCall,
        owner: &str,
        wall: &Timestamp,
    ) -> Result<bool> {
        let n = self.exec(
            "INSERT INTO model_calls (id, run_id, step_id, attempt, status, model, dispatched_at)
             SELECT ?, ?, ?, ?, ?, ?, ?
             WHERE EXISTS (SELECT 1 FROM runs WHERE id = ? AND status = 'RUNNING'
                           AND lease_owner = ? AND lease_expires_at > ?)",
            vec![
                Value::Text(call.id.clone()),
                Value::Text(call.run_id.clone()),
                Value::Text(call.step_id.clone()),
                Value::Integer(i64::from(call.attempt)),
                Value::Text(CallStatus::Dispatched.as_str().to_owned()),
                Value::Text(call.model.clone()),
                Value::Text(call.dispatched_at.to_string()),
                Value::Text(call.run_id.clone()),
                Value::Text(owner.to_owned()),
                Value::Text(wall.to_string()),
            ],
        )?;
        if n == 1 {
            self.wrote(StateTable::ModelCalls, &call.id);
        }
        Ok(n == 1)
    }

    /// Records a dispatched call's outcome; `false` if it is not dispatched.
    pub fn complete_model_call(&mut self, call: &ModelCall) -> Result<bool> {
        let n = self.exec(
            "UPDATE model_calls SET status = ?, input_tokens = ?, output_tokens = ?,
                 cached_input_tokens = ?, cost_micros = ?, latency_ms = ?, error = ?, completed_at = ?
             WHERE id = ? AND status = 'dispatched'",
            vec![
                Value::Text(call.status.as_str().to_owned()),
                int(call.usage.input_tokens),
                int(call.usage.output_tokens),
                int(call.usage.cached_input_tokens),
                Value::Integer(call.cost_micros),
                int(call.latency_ms),
                Value::Text(call.error.clone()),
                Value::Text(call.completed_at.map(|t| t.to_string()).unwrap_or_default()),
                Value::Text(call.id.clone()),
            ],
        )?;
        if n == 1 {
            self.wrote(StateTable::ModelCalls, &call.id);
        }
        Ok(n == 1)
    }
}

const CALL_COLUMNS: &str = "id, run_id, step_id, attempt, status, model, input_tokens, output_tokens, \
     cached_input_tokens, cost_micros, latency_ms, error, dispatched_at, completed_at";

fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

fn call_from_row(r: &Row<'_>) -> rusqlite::Result<ModelCall> {
    let status: String = r.get(4)?;
    let dispatched: String = r.get(12)?;
    let completed: String = r.get(13)?;
    Ok(ModelCall {
        id: r.get(0)?,
        run_id: r.get(1)?,
        step_id: r.get(2)?,
        attempt: u32::try_from(r.get::<_, i64>(3)?).unwrap_or(0),
        status: CallStatus::parse(&status).unwrap_or(CallStatus::Error),
        model: r.get(5)?,
        usage: Usage {
            input_tokens: count(r.get(6)?),
            output_tokens: count(r.get(7)?),
            cached_input_tokens: count(r.get(8)?),
        },
        cost_micros: r.get(9)?,
        latency_ms: count(r.get(10)?),
        error: r.get(11)?,
        dispatched_at: Timestamp::parse(&dispatched)
            .unwrap_or_else(|_| Timestamp::from_unix_nanos(0)),
        completed_at: Timestamp::parse(&completed).ok(),
    })
}

impl Store {
    /// A run's model call attempts, in dispatch order.
    pub fn list_model_calls(&self, run_id: &str) -> Result<Vec<ModelCall>> {
        self.read(|c| {
            let sql =
                format!("SELECT {CALL_COLUMNS} FROM model_calls WHERE run_id = ? ORDER BY rowid");
            let mut stmt = c.prepare_cached(&sql).map_err(Error::from_sqlite)?;
            let rows = stmt
                .query_map([run_id], call_from_row)
                .map_err(Error::from_sqlite)?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
                .map_err(Error::from_sqlite)
        })
    }

    /// One model call.
    pub fn get_model_call(&self, call_id: &str) -> Result<ModelCall> {
        self.read(|c| {
            let sql = format!("SELECT {CALL_COLUMNS} FROM model_calls WHERE id = ?");
            c.query_row(&sql, [call_id], call_from_row)
                .optional()
                .map_err(Error::from_sqlite)
        })?
        .ok_or_else(|| Error::NotFound {
            what: "model call",
            id: call_id.to_owned(),
        })
    }
}
