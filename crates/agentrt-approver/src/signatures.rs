//! The signatures of requests that changed something, kept in the run's
//! database (a satellite table of the core's extension point), each written
//! in the transaction of the decision it carried and explained by that
//! decision's event: a restart does not forget them.

use agentrt::store::SqlValue;
use agentrt::{Timestamp, gate::SatelliteRows};

use crate::extension::SIGNATURES_TABLE;

/// What a refusal of a used signature names (mapped to
/// [`crate::ApproverError::Replayed`]).
pub(crate) const USED: &str = "request signature";

/// The rows of a decision carried by a request signed `signature`, written
/// first in the decision's transaction: refused when the signature was
/// recorded before (nothing is decided), else recorded. Without a
/// signature, nothing.
pub(crate) fn record(signature: Option<String>, run_id: String, at: Timestamp) -> SatelliteRows {
    Box::new(move |tx| {
        let Some(signature) = signature else {
            return Ok(());
        };
        if tx.row(SIGNATURES_TABLE, signature.as_str())?.is_some() {
            return Err(agentrt::Error::ClaimHeld {
                claim: USED,
                detail: "signature already used".into(),
            });
        }
        tx.insert_row(
            SIGNATURES_TABLE,
            &[
                ("signature", SqlValue::from(signature.as_str())),
                ("run_id", SqlValue::from(run_id.as_str())),
                ("used_at", SqlValue::from(at.to_string().as_str())),
            ],
        )?;
        Ok(())
    })
}
