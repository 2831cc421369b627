//! Budgets: limits on model calls, tokens and money, enforced before each
//! call is sent, and the accounting caller that is the only model handle an
//! agent receives.

mod caller;
mod prices;

pub use caller::{CallError, ModelCaller, ModelConfig};
pub(crate) use caller::{CallHost, SharedTotals};
pub use prices::{DollarsError, Micros, NoPrice, Price, PriceTable, parse_dollars};
