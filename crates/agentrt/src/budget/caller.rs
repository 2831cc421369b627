//! The accounting caller: every attempt gets a `model_calls` row before it
//! is sent; call, token and cost limits are checked against the run's totals
//! plus what the step's calls in flight have reserved plus a conservative
//! projection of the call before dispatch; an attempt whose outcome is
//! unknown is charged the estimate; transient failures are retried with
//! backoff.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::prices::{Micros, Price, PriceTable};
use crate::cancel::Cancel;
use crate::clock::{Timestamp, lock};
use crate::error::Error;
use crate::llm::{Model, ModelError, ModelRequest, ModelResponse};
use crate::model::{CallStatus, Event, EventType, Limits, ModelCall, TerminalReason, Usage};
use crate::store::{RunChange, RunGuard, Store, WriteTx};

/// What the accounting caller needs of the session that made it: the
/// store, the clocks and ids, the lease and the observer. The gate
/// implements it; the caller never sees the gate itself (the gate builds
/// callers, so the two modules depend on each other only through this).
pub(crate) trait CallHost: Send + Sync {
    /// The store the run lives in.
    fn store(&self) -> &Store;
    /// Now by the state-change clock.
    fn now(&self) -> Timestamp;
    /// A new id.
    fn new_id(&self) -> String;
    /// Now for a lease written in `tx`.
    fn lease_now_in(&self, tx: &WriteTx<'_>) -> Result<Timestamp, Error>;
    /// The lease owner the caller's rows are written under.
    fn owner(&self) -> &str;
    /// Hands committed events to the observer.
    fn deliver(&self, events: &[Event]);
}

/// Whether the session still holds its run's lease.
pub(crate) type LeaseHeld = Arc<dyn Fn() -> bool + Send + Sync>;

/// The model a gate gives its agents, its prices, and how calls are timed
/// out and retried.
#[derive(Clone)]
pub struct ModelConfig {
    /// The model.
    pub model: Arc<dyn Model>,
    /// Prices; the model must be in the table (priced, or declared free).
    pub prices: PriceTable,
    /// How long one attempt may take (default 2 minutes).
    pub call_timeout: Duration,
    /// Retries after the first attempt (default 2).
    pub max_retries: u32,
    /// The first retry's wait; each later one doubles it (default 1 s).
    pub backoff: Duration,
    /// The longest `Retry-After` honoured; a longer one ends the calls
    /// (default 1 minute).
    pub max_retry_after: Duration,
}

impl ModelConfig {
    /// A configuration with the defaults.
    pub fn new(model: Arc<dyn Model>, prices: PriceTable) -> ModelConfig {
        ModelConfig {
            model,
            prices,
            call_timeout: Duration::from_secs(120),
            max_retries: 2,
            backoff: Duration::from_secs(1),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl std::fmt::Debug for ModelConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelConfig")
            .field("model", &self.model.name())
            .field("call_timeout", &self.call_timeout)
            .field("max_retries", &self.max_retries)
            .finish()
    }
}

/// Why the caller returned no reply.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// A limit refused the call before anything was sent.
    #[error("{detail}")]
    Limit {
        /// The limit's terminal reason.
        reason: TerminalReason,
        /// What would have been exceeded.
        detail: String,
    },
    /// Every attempt failed, or the model cannot be used.
    #[error("model unavailable after {attempts} attempt(s): {last}")]
    ModelUnavailable {
        /// Attempts made.
        attempts: u32,
        /// The last failure.
        last: String,
    },
    /// The model refused the request for good (not retried).
    #[error("{message}")]
    Failed {
        /// What it said.
        message: String,
    },
    /// The caller cancelled; an attempt in flight was recorded as ambiguous.
    #[error("cancelled by the caller")]
    Cancelled,
    /// This instance no longer holds the run's lease; nothing was sent.
    #[error("lost the lease on the run; nothing was sent")]
    LeaseLost,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] Error),
}

/// The run's model totals as the last caller wrote them, shared with the
/// session so its cached run (and the policy's view) stays current.
#[derive(Clone, Default)]
pub(crate) struct SharedTotals(Arc<Mutex<Option<(u64, Usage, Micros)>>>);

impl SharedTotals {
    fn set(&self, totals: (u64, Usage, Micros)) {
        *lock(&self.0) = Some(totals);
    }

    /// The latest totals written, if any since the last take.
    pub(crate) fn take(&self) -> Option<(u64, Usage, Micros)> {
        lock(&self.0).take()
    }
}

/// What this step's calls in flight have reserved and the run's totals do
/// not count yet: calls not yet dispatched (a dispatch row counts its call),
/// tokens and cost not yet charged (a recorded outcome charges its call).
#[derive(Default, Clone, Copy)]
struct Reserved {
    calls: u64,
    tokens: u64,
    cost: Micros,
}

impl Reserved {
    /// The call itself, which its dispatch row counts.
    fn call(self) -> Reserved {
        Reserved {
            calls: self.calls,
            ..Reserved::default()
        }
    }

    /// Its tokens and cost, which its recorded outcome charges.
    fn spend(self) -> Reserved {
        Reserved { calls: 0, ..self }
    }

    fn remove(&mut self, part: Reserved) {
        self.calls = self.calls.saturating_sub(part.calls);
        self.tokens = self.tokens.saturating_sub(part.tokens);
        self.cost = self.cost.saturating_sub(part.cost);
    }
}

struct Inner {
    gate: Arc<dyn CallHost>,
    config: Arc<ModelConfig>,
    price: Price,
    limits: Limits,
    created_at: Timestamp,
    run_id: String,
    step_id: String,
    lease: LeaseHeld,
    cancel: Cancel,
    totals: SharedTotals,
    /// The per-step lock: totals are reloaded, checked and reserved under
    /// it, and a reservation becomes a recorded call or charge under it.
    reserved: Mutex<Reserved>,
    attempts: AtomicU32,
}

impl Inner {
    /// In `tx`: the run's totals (model calls, usage, cost) changed by
    /// `change` from what is committed, written and shared.
    fn update_totals(
        &self,
        tx: &mut WriteTx<'_>,
        change: impl FnOnce(&crate::model::Run) -> (u64, Usage, Micros),
    ) -> Result<(), Error> {
        let run = tx.run(&self.run_id)?.ok_or_else(|| Error::NotFound {
            what: "run",
            id: self.run_id.clone(),
        })?;
        let totals = change(&run);
        tx.update_run(
            &self.run_id,
            &RunGuard::default(),
            &RunChange {
                totals: Some(totals),
                ..RunChange::default()
            },
        )?;
        self.totals.set(totals);
        Ok(())
    }

    /// Under the step's lock: the run's totals as committed, plus what
    /// this step has in flight, checked against every limit with this
    /// call's projection; the projection is reserved if it fits.
    fn check_and_reserve(
        &self,
        run: &crate::model::Run,
        uncapped: bool,
        estimate: &Usage,
    ) -> Result<Reserved, CallError> {
        let mut reserved = lock(&self.reserved);
        let limits = &self.limits;
        let priced = !self.price.is_free();
        let projection = estimate.input_tokens.saturating_add(estimate.output_tokens);
        let projected_cost = most_cost(&self.price, estimate);
        let refuse = |reason, detail: String| Err(CallError::Limit { reason, detail });
        let calls = run.model_calls.saturating_add(reserved.calls);
        if limits.max_model_calls > 0 && calls >= limits.max_model_calls {
            return refuse(
                TerminalReason::LimitModelCalls,
                format!(
                    "{calls} model call(s) made or in flight; the limit is {}",
                    limits.max_model_calls
                ),
            );
        }
        if uncapped {
            if limits.max_total_tokens > 0 {
                return refuse(
                    TerminalReason::LimitTokens,
                    "a request without an output cap cannot be sent under a token limit; set max_output_tokens".into(),
                );
            }
            if limits.max_estimated_cost_micros > 0 && priced {
                return refuse(
                    TerminalReason::LimitCost,
                    "a request without an output cap cannot be sent to a priced model under a cost limit; set max_output_tokens"
                        .into(),
                );
            }
        }
        let used = run
            .usage
            .input_tokens
            .saturating_add(run.usage.output_tokens)
            .saturating_add(reserved.tokens);
        if limits.max_total_tokens > 0 && used.saturating_add(projection) > limits.max_total_tokens
        {
            return refuse(
                TerminalReason::LimitTokens,
                format!(
                    "{used} tokens used or in flight plus up to {projection} for this call would pass the limit of {}",
                    limits.max_total_tokens
                ),
            );
        }
        let spent = run.estimated_cost_micros.saturating_add(reserved.cost);
        if limits.max_estimated_cost_micros > 0
            && spent.saturating_add(projected_cost) > limits.max_estimated_cost_micros
        {
            return refuse(
                TerminalReason::LimitCost,
                format!(
                    "{spent} µ$ spent or in flight plus up to {projected_cost} µ$ for this call would pass the limit of {} µ$",
                    limits.max_estimated_cost_micros
                ),
            );
        }
        let this = Reserved {
            calls: 1,
            tokens: projection,
            cost: projected_cost,
        };
        reserved.calls = reserved.calls.saturating_add(this.calls);
        reserved.tokens = reserved.tokens.saturating_add(this.tokens);
        reserved.cost = reserved.cost.saturating_add(this.cost);
        Ok(this)
    }
}

/// The only model handle an agent receives: one per step. Cheap to clone;
/// clones share the step's reservations.
#[derive(Clone)]
pub struct ModelCaller {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ModelCaller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelCaller")
            .field("run", &self.inner.run_id)
            .field("step", &self.inner.step_id)
            .field("model", &self.inner.config.model.name())
            .finish()
    }
}

/// How an attempt ended, as the accounting sees it.
struct Outcome {
    status: CallStatus,
    charged: Usage,
    error: String,
    next: Next,
}

enum Next {
    Done(ModelResponse),
    Retry { retry_after: Option<Duration> },
    Stop(CallError),
}

fn saturating_usage(a: Usage, b: Usage) -> Usage {
    Usage {
        input_tokens: a.input_tokens.saturating_add(b.input_tokens),
        output_tokens: a.output_tokens.saturating_add(b.output_tokens),
        cached_input_tokens: a.cached_input_tokens.saturating_add(b.cached_input_tokens),
    }
}

/// The most a call admitted under `estimate` can be charged: its input at
/// the dearer of the two input rates (a reply may report any of it as
/// cached, and a cached token may be priced above an uncached one), its
/// output at the output rate.
fn most_cost(price: &Price, estimate: &Usage) -> Micros {
    let dearer = Price {
        input_per_mtok_micros: price
            .input_per_mtok_micros
            .max(price.cached_input_per_mtok_micros),
        ..*price
    };
    dearer.cost(&Usage {
        cached_input_tokens: 0,
        ..*estimate
    })
}

/// Usage a provider could have reported: cached within the input, and,
/// under a token or cost limit, within the projection the call was
/// admitted under (so no reply can push the recorded spend past a limit).
fn usable(usage: &Usage, estimate: &Usage, bounded: bool) -> bool {
    usage.cached_input_tokens <= usage.input_tokens
        && (!bounded
            || (usage.input_tokens <= estimate.input_tokens
                && usage.output_tokens <= estimate.output_tokens))
}

impl ModelCaller {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        gate: Arc<dyn CallHost>,
        config: Arc<ModelConfig>,
        price: Price,
        limits: Limits,
        created_at: Timestamp,
        run_id: String,
        step_id: String,
        lease: LeaseHeld,
        cancel: Cancel,
        totals: SharedTotals,
    ) -> ModelCaller {
        ModelCaller {
            inner: Arc::new(Inner {
                gate,
                config,
                price,
                limits,
                created_at,
                run_id,
                step_id,
                lease,
                cancel,
                totals,
                reserved: Mutex::new(Reserved::default()),
                attempts: AtomicU32::new(0),
            }),
        }
    }

    /// The model's name.
    pub fn model_name(&self) -> &str {
        self.inner.config.model.name()
    }

    /// The conservative projection of a request: input ≈ its JSON bytes / 3
    /// + 1, output = its cap.
    pub fn estimate(request: &ModelRequest) -> Usage {
        let bytes = serde_json::to_vec(request).map(|b| b.len()).unwrap_or(0) as u64;
        Usage {
            input_tokens: bytes / 3 + 1,
            output_tokens: request.max_output_tokens.unwrap_or(0),
            cached_input_tokens: 0,
        }
    }

    /// Sends `request`, within the run's limits, retrying transient
    /// failures; every attempt is recorded and charged.
    pub async fn generate(&self, mut request: ModelRequest) -> Result<ModelResponse, CallError> {
        let cap = self.inner.limits.max_output_tokens_per_call;
        if cap > 0 {
            request.max_output_tokens = Some(request.max_output_tokens.map_or(cap, |c| c.min(cap)));
        }
        let estimate = ModelCaller::estimate(&request);
        let attempts = 1 + self.inner.config.max_retries;
        let mut last = String::new();
        for attempt in 1..=attempts {
            let reservation = Arc::new(Mutex::new(self.reserve(&request, &estimate).await?));
            let result = self
                .attempt(&request, &estimate, attempt, &reservation)
                .await;
            self.release(&reservation);
            match result? {
                Next::Done(response) => return Ok(response),
                Next::Stop(e) => return Err(e),
                Next::Retry { retry_after } => {
                    last = format!("attempt {attempt} failed");
                    if attempt == attempts {
                        break;
                    }
                    let backoff = self
                        .inner
                        .config
                        .backoff
                        .saturating_mul(1 << (attempt - 1).min(20));
                    let wait = backoff.max(retry_after.unwrap_or_default());
                    if let Some(why) = self.wait_unfit(wait, retry_after).await {
                        return Err(CallError::ModelUnavailable {
                            attempts: attempt,
                            last: why,
                        });
                    }
                    tokio::select! {
                        biased;
                        _ = self.inner.cancel.cancelled() => return Err(CallError::Cancelled),
                        _ = tokio::time::sleep(wait) => {}
                    }
                }
            }
        }
        let recorded = self.last_error().await.unwrap_or(last);
        Err(CallError::ModelUnavailable {
            attempts,
            last: recorded,
        })
    }

    /// Why a wait cannot fit: a `Retry-After` beyond the maximum, or past
    /// the run's elapsed or active time limit.
    async fn wait_unfit(&self, wait: Duration, retry_after: Option<Duration>) -> Option<String> {
        if retry_after.is_some_and(|r| r > self.inner.config.max_retry_after) {
            return Some(format!(
                "the provider asked to wait {} s, beyond the {} s allowed",
                retry_after.unwrap_or_default().as_secs(),
                self.inner.config.max_retry_after.as_secs()
            ));
        }
        let limits = &self.inner.limits;
        let wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
        if limits.max_elapsed_time_ms > 0 {
            let elapsed = self.inner.gate.now().millis_since(&self.inner.created_at);
            if elapsed.saturating_add(wait_ms) >= limits.max_elapsed_time_ms {
                return Some("waiting to retry would pass the run's elapsed-time limit".into());
            }
        }
        if limits.max_active_time_ms > 0
            && let Ok(run) = self.read_run().await
            && run.active_ms.saturating_add(wait_ms) >= limits.max_active_time_ms
        {
            return Some("waiting to retry would pass the run's active-time limit".into());
        }
        None
    }

    /// The run as stored now, read off the executor.
    async fn read_run(&self) -> Result<crate::model::Run, Error> {
        let id = self.inner.run_id.clone();
        self.inner
            .gate
            .store()
            .off_executor(move |store| store.get_run(&id))
            .await
    }

    async fn last_error(&self) -> Option<String> {
        let id = self.inner.run_id.clone();
        let calls = self
            .inner
            .gate
            .store()
            .off_executor(move |store| store.list_model_calls(&id))
            .await
            .ok()?;
        calls
            .into_iter()
            .rev()
            .find(|c| c.step_id == self.inner.step_id && !c.error.is_empty())
            .map(|c| c.error)
    }

    /// Reserves this call's projection against the run's limits: on the
    /// store's writer thread between two batches, so the run's totals read
    /// and the step's reservations are one consistent picture (a settled
    /// call leaves the reservations in the same moment its commit becomes
    /// visible there).
    async fn reserve(
        &self,
        request: &ModelRequest,
        estimate: &Usage,
    ) -> Result<Reserved, CallError> {
        let inner = Arc::clone(&self.inner);
        let uncapped = request.max_output_tokens.is_none();
        let estimate = *estimate;
        let run_id = inner.run_id.clone();
        self.inner
            .gate
            .store()
            .with_run_between_batches(run_id, move |run| {
                Ok(inner.check_and_reserve(run, uncapped, &estimate))
            })
            .await?
    }

    /// Releases what is left of a reservation (all of it when the attempt
    /// stopped before its dispatch row was written).
    fn release(&self, held: &Mutex<Reserved>) {
        let mut reserved = lock(&self.inner.reserved);
        reserved.remove(std::mem::take(&mut *lock(held)));
    }

    /// Runs one write group and, if it recorded what `part` of this call's
    /// reservation stood for, drops that part on the writer thread right
    /// after the commit, before any check between batches can look: a
    /// check sees it reserved or recorded, never both, never neither. The
    /// observer hears the events afterwards.
    async fn write_settling<F>(
        &self,
        held: &Arc<Mutex<Reserved>>,
        part: Reserved,
        f: F,
    ) -> Result<bool, Error>
    where
        F: FnOnce(&mut WriteTx<'_>) -> Result<bool, Error> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        let held = Arc::clone(held);
        let (recorded, events) = self
            .inner
            .gate
            .store()
            .write_then(f, move |recorded: &bool| {
                if *recorded {
                    lock(&inner.reserved).remove(part);
                    lock(&held).remove(part);
                }
            })
            .await?;
        self.inner.gate.deliver(&events);
        Ok(recorded)
    }

    /// One attempt: record the dispatch, call, record the outcome; `held`
    /// is the attempt's reservation, settled as each write records it.
    async fn attempt(
        &self,
        request: &ModelRequest,
        estimate: &Usage,
        attempt: u32,
        held: &Arc<Mutex<Reserved>>,
    ) -> Result<Next, CallError> {
        let inner = &self.inner;
        if !(inner.lease)() {
            return Err(CallError::LeaseLost);
        }
        let model_name = inner.config.model.name().to_owned();
        let call_id = inner.gate.new_id();
        let dispatched_at = inner.gate.now();
        let mut record = ModelCall {
            id: call_id.clone(),
            run_id: inner.run_id.clone(),
            step_id: inner.step_id.clone(),
            attempt,
            status: CallStatus::Dispatched,
            model: model_name.clone(),
            usage: Usage::default(),
            cost_micros: 0,
            latency_ms: 0,
            error: String::new(),
            dispatched_at,
            completed_at: None,
        };
        inner.attempts.fetch_add(1, Ordering::Relaxed);
        let part = lock(held).call();
        let (inner_w, written, name) = (Arc::clone(inner), record.clone(), model_name.clone());
        let sent = self
            .write_settling(held, part, move |tx| {
                let (inner, record, model_name) = (inner_w, written, name);
                let lease_now = inner.gate.lease_now_in(tx)?;
                if !tx.insert_model_call(&record, inner.gate.owner(), &lease_now)? {
                    return Ok(false);
                }
                inner.update_totals(tx, |run| {
                    (
                        run.model_calls.saturating_add(1),
                        run.usage,
                        run.estimated_cost_micros,
                    )
                })?;
                tx.append_event(
                    &inner.run_id,
                    &inner.step_id,
                    &dispatched_at,
                    EventType::ModelDispatched,
                    &crate::payload::model_dispatched(&call_id, attempt, &model_name),
                )?;
                Ok(true)
            })
            .await?;
        if !sent {
            return Err(CallError::LeaseLost);
        }

        // The call, under its timeout and the caller's cancellation.
        let answer = tokio::select! {
            biased;
            r = tokio::time::timeout(inner.config.call_timeout, inner.config.model.generate(request)) => match r {
                Ok(r) => r,
                Err(_) => Err(ModelError::Timeout { message: format!("no reply within {} s", inner.config.call_timeout.as_secs()) }),
            },
            _ = inner.cancel.cancelled() => Err(ModelError::Cancelled),
        };
        let bounded =
            inner.limits.max_total_tokens > 0 || inner.limits.max_estimated_cost_micros > 0;
        let outcome = classify(answer, estimate, bounded);

        // Recorded whatever the caller does now (the write does not watch
        // the cancellation).
        record.status = outcome.status;
        record.usage = outcome.charged;
        record.cost_micros = inner.price.cost(&outcome.charged);
        record.error = outcome.error.clone();
        // Both ends by the run's clock (`Now`), so a replayed run records
        // the same latency as the recorded one.
        let completed = inner.gate.now();
        record.latency_ms = completed.millis_since(&dispatched_at);
        record.completed_at = Some(completed);
        let completed_at = record.completed_at.unwrap_or(dispatched_at);
        let part = lock(held).spend();
        let inner_w = Arc::clone(inner);
        self.write_settling(held, part, move |tx| {
            let inner = inner_w;
            tx.complete_model_call(&record)?;
            inner.update_totals(tx, |run| {
                (
                    run.model_calls,
                    saturating_usage(run.usage, record.usage),
                    run.estimated_cost_micros.saturating_add(record.cost_micros),
                )
            })?;
            let kind = if record.status == CallStatus::Ok {
                EventType::ModelCompleted
            } else {
                EventType::ModelFailed
            };
            tx.append_event(
                &inner.run_id,
                &inner.step_id,
                &completed_at,
                kind,
                &crate::payload::model_ended(&record),
            )?;
            Ok(true)
        })
        .await?;
        Ok(outcome.next)
    }
}

/// The accounting of one attempt's answer.
fn classify(answer: Result<ModelResponse, ModelError>, estimate: &Usage, bounded: bool) -> Outcome {
    let text = |e: &ModelError| e.to_string();
    match answer {
        Ok(response) if usable(&response.usage, estimate, bounded) => Outcome {
            status: CallStatus::Ok,
            charged: response.usage,
            error: String::new(),
            next: Next::Done(response),
        },
        Ok(response) => Outcome {
            status: CallStatus::Error,
            charged: *estimate,
            error: format!(
                "unusable usage: {} input ({} cached), {} output tokens against a projection of {} input, {} output",
                response.usage.input_tokens,
                response.usage.cached_input_tokens,
                response.usage.output_tokens,
                estimate.input_tokens,
                estimate.output_tokens
            ),
            next: Next::Stop(CallError::ModelUnavailable {
                attempts: 1,
                last: "the reply's usage is not a plausible count".into(),
            }),
        },
        Err(e @ ModelError::UnusableUsage { .. }) => Outcome {
            status: CallStatus::Error,
            charged: *estimate,
            error: text(&e),
            next: Next::Stop(CallError::ModelUnavailable {
                attempts: 1,
                last: text(&e),
            }),
        },
        Err(ModelError::Served { message, usage }) => {
            let charged = if usable(&usage, estimate, bounded) {
                usage
            } else {
                *estimate
            };
            Outcome {
                status: CallStatus::Error,
                charged,
                error: format!("served error: {message}"),
                next: Next::Stop(CallError::Failed {
                    message: format!("the model refused the request: {message}"),
                }),
            }
        }
        Err(ModelError::Cancelled) => Outcome {
            status: CallStatus::Ambiguous,
            charged: *estimate,
            error: "cancelled by the caller while in flight".into(),
            next: Next::Stop(CallError::Cancelled),
        },
        Err(e @ (ModelError::Timeout { .. } | ModelError::ConnectionLost { .. })) => Outcome {
            status: CallStatus::Ambiguous,
            charged: *estimate,
            error: text(&e),
            next: Next::Retry { retry_after: None },
        },
        Err(ModelError::Transient {
            message,
            retry_after,
        }) => Outcome {
            status: CallStatus::Error,
            charged: Usage::default(),
            error: format!("transient: {message}"),
            next: Next::Retry { retry_after },
        },
        Err(e) => Outcome {
            status: CallStatus::Error,
            charged: Usage::default(),
            error: text(&e),
            next: Next::Stop(CallError::Failed { message: text(&e) }),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call's reservation is released in two parts: the call when its
    /// dispatch row is written, its tokens and cost when its outcome is.
    /// Releasing the call twice would free another call's reservation.
    #[test]
    fn a_settled_call_releases_its_own_parts_and_never_another_calls() {
        let one = Reserved {
            calls: 1,
            tokens: 10,
            cost: 100,
        };
        let mut in_flight = Reserved::default();
        for _ in 0..2 {
            in_flight.calls += one.calls;
            in_flight.tokens += one.tokens;
            in_flight.cost += one.cost;
        }
        in_flight.remove(one.call());
        in_flight.remove(one.spend());
        assert_eq!(
            (in_flight.calls, in_flight.tokens, in_flight.cost),
            (1, 10, 100),
            "the second call's reservation is intact"
        );
        assert_eq!(one.spend().calls, 0);
        assert_eq!((one.call().tokens, one.call().cost), (0, 0));
    }
}
