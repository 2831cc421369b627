//! Model call attempts: recorded before dispatch (only under a live
//! lease), completed after, and read back.

use super::columns::RowColumns;

use super::schema::StateTable;
use super::{Store, WriteTx};
use crate::clock::Timestamp;
use crate::error::{Error, Result};
use crate::model::{CallStatus, ModelCall, Usage};

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
        let inserted = self.rows().insert_model_call(call, owner, wall)?;
        if inserted {
            self.wrote(StateTable::ModelCalls, &call.id);
        }
        Ok(inserted)
    }

    /// Records a dispatched call's outcome; `false` if it is not dispatched.
    pub fn complete_model_call(&mut self, call: &ModelCall) -> Result<bool> {
        let completed = self.rows().complete_model_call(call)?;
        if completed {
            self.wrote(StateTable::ModelCalls, &call.id);
        }
        Ok(completed)
    }
}

/// The columns of a model call, in the order [`call_from_row`] reads them.
pub const CALL_COLUMNS: &str = "id, run_id, step_id, attempt, status, model, input_tokens, output_tokens, \
     cached_input_tokens, cost_micros, latency_ms, error, dispatched_at, completed_at";

fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// A model call from a row of [`CALL_COLUMNS`].
pub fn call_from_row(r: &dyn RowColumns) -> Result<ModelCall> {
    let status: String = r.get(4)?;
    let dispatched: String = r.get(12)?;
    let completed: String = r.get(13)?;
    Ok(ModelCall {
        id: r.get(0)?,
        run_id: r.get(1)?,
        step_id: r.get(2)?,
        attempt: u32::try_from(r.int(3)?).unwrap_or(0),
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
        self.read(|rows| rows.model_calls(run_id))
    }

    /// One model call.
    pub fn get_model_call(&self, call_id: &str) -> Result<ModelCall> {
        self.read(|rows| rows.model_call(call_id))?
            .ok_or_else(|| Error::NotFound {
                what: "model call",
                id: call_id.to_owned(),
            })
    }
}
