//! The nonces of login links taken, kept in the run's database (a
//! satellite table of the core's extension point): a link is taken in one
//! write group that checks its nonce is not there, records it, and appends
//! the run's `approver.signed_in` event, which explains the row on the
//! chain. The group is one transaction of the store (serialized with every
//! other writer on SQLite and on PostgreSQL), so of two approver processes
//! on one database taking the same link at once exactly one succeeds, and a
//! restart forgets nothing.

use agentrt::store::SqlValue;
use agentrt::{EventType, Store, Timestamp};

use crate::SignIn;
use crate::extension::LOGIN_NONCES_TABLE;

/// The type of the event a taken link appends to its run: the approver's
/// own (the core keeps a type it does not know as its text).
pub const SIGNED_IN_EVENT: &str = "approver.signed_in";

/// What a refusal of a used link names (mapped to
/// [`crate::ApproverError::LinkUsed`]).
pub(crate) const LINK_USED: &str = "login link";

/// Takes the link `sign_in` describes at `at`: refused when its run does
/// not exist (not found) or its nonce was taken before (nothing written);
/// else its nonce is recorded with the run's `approver.signed_in` event
/// (`{"by": …}`).
pub(crate) fn take(store: &Store, sign_in: &SignIn, at: Timestamp) -> agentrt::Result<()> {
    store.write(|tx| {
        if tx.run(&sign_in.run_id)?.is_none() {
            return Err(agentrt::Error::NotFound {
                what: "run",
                id: sign_in.run_id.clone(),
            });
        }
        if tx
            .row(LOGIN_NONCES_TABLE, sign_in.nonce.as_str())?
            .is_some()
        {
            return Err(agentrt::Error::ClaimHeld {
                claim: LINK_USED,
                detail: "this login link was used already".into(),
            });
        }
        tx.insert_row(
            LOGIN_NONCES_TABLE,
            &[
                ("nonce", SqlValue::from(sign_in.nonce.as_str())),
                ("run_id", SqlValue::from(sign_in.run_id.as_str())),
                ("signed_in", SqlValue::from(sign_in.by.as_str())),
                ("used_at", SqlValue::from(at.to_string().as_str())),
            ],
        )?;
        let mut payload = String::from("{\"by\":");
        agentrt::json::write_string(&mut payload, &sign_in.by);
        payload.push('}');
        tx.append_event(
            &sign_in.run_id,
            "",
            &at,
            EventType::from_text(SIGNED_IN_EVENT),
            &payload,
        )
    })?;
    Ok(())
}
