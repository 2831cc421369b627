//! The console: every run's record for a person signed in with a console
//! link (`agentrt-approver login-link --console`). It reads; its only
//! writes are the decision forms, which post to a run's decision route and
//! apply only to the hash shown. A run's link opens no console (403).
//!
//! - `GET /ui/console?status=…&label=k=v&page=N`: the runs, newest first,
//!   [`RUNS_PER_PAGE`] a page;
//! - `GET /ui/console/runs/{run}?from=N`: a run's timeline: its steps (the
//!   first [`STEPS_SHOWN`]), its pending approvals with their forms, and
//!   [`EVENTS_PER_PAGE`] of its events from the `N`th;
//! - `GET /ui/console/runs/{run}/chain`: `verify` over the run's range of
//!   the chain, from its first event to its last;
//! - `GET /ui/console/pending`: the runs that wait for a decision (the
//!   newest [`PENDING_RUNS`]) with their pending approvals.
//!
//! Every read runs on the blocking pool and is capped, so a page costs the
//! same whatever the database holds.

use std::sync::Arc;

use agentrt::store::RunFilter;
use agentrt::{Labels, RunStatus, Store};
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;

use super::console_html::{self, RunsAsked, Timeline};
use super::login::{Scope, Session};
use super::{PageState, form_fields, html, internal, notice, session, signed_out};
use crate::ApproverError;

/// Runs a page of the console shows.
pub const RUNS_PER_PAGE: u64 = 50;
/// Steps a run's timeline shows.
pub const STEPS_SHOWN: u64 = 200;
/// Events a page of a run's timeline shows.
pub const EVENTS_PER_PAGE: u64 = 200;
/// Waiting runs the pending page shows, and approvals for each.
pub const PENDING_RUNS: u64 = 50;
const PENDING_PER_RUN: u64 = 20;
/// The most labels a filter takes.
const MAX_LABELS: usize = 8;

/// The console's session and store, or the answer that refuses the
/// request: 401 signed out, 403 for a run's session, 404 without a
/// console.
fn console_session(
    state: &PageState,
    headers: &HeaderMap,
) -> Result<(Session, Store), Box<Response>> {
    let Some(store) = state.config.console.clone() else {
        return Err(Box::new(notice(
            StatusCode::NOT_FOUND,
            "No console",
            "This server has no console.",
        )));
    };
    let Some(session) = session(state, headers) else {
        return Err(Box::new(signed_out()));
    };
    match &session.scope {
        Scope::Console => Ok((session, store)),
        Scope::Run(run) => Err(Box::new(notice(
            StatusCode::FORBIDDEN,
            "Refused",
            &format!(
                "You are signed in for run {run} only. The console needs a console link (agentrt-approver login-link --console)."
            ),
        ))),
    }
}

/// Runs `read` on the blocking pool: its value, or the answer for a run
/// that does not exist or a store that failed.
async fn read<T: Send + 'static>(
    place: &str,
    read: impl FnOnce() -> Result<T, ApproverError> + Send + 'static,
) -> Result<T, Response> {
    match tokio::task::spawn_blocking(read).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(ApproverError::Core(agentrt::Error::NotFound { what, id }))) => Err(notice(
            StatusCode::NOT_FOUND,
            "Not found",
            &format!("There is no {what} {id}."),
        )),
        Ok(Err(e)) => Err(internal(place, &e)),
        Err(e) => Err(internal(place, &e)),
    }
}

fn bad_request(text: &str) -> Response {
    notice(StatusCode::BAD_REQUEST, "Not understood", text)
}

/// The runs page's query: status, labels, page.
struct RunsQuery {
    status: Option<RunStatus>,
    labels: Vec<String>,
    page: u64,
}

impl RunsQuery {
    fn parse(query: &str) -> Result<RunsQuery, String> {
        let mut asked = RunsQuery {
            status: None,
            labels: Vec::new(),
            page: 0,
        };
        for (key, value) in form_fields(query.as_bytes()) {
            match key.as_str() {
                "status" if value.is_empty() => {}
                "status" => {
                    asked.status = Some(
                        RunStatus::parse(&value)
                            .ok_or_else(|| format!("{value:?} is not a run status."))?,
                    );
                }
                // A label field may hold several, space-separated.
                "label" => asked
                    .labels
                    .extend(value.split_whitespace().map(str::to_owned)),
                "page" => {
                    asked.page = value
                        .parse()
                        .map_err(|_| format!("{value:?} is not a page number."))?;
                }
                _ => {}
            }
        }
        if asked.labels.len() > MAX_LABELS {
            return Err(format!("At most {MAX_LABELS} labels."));
        }
        Ok(asked)
    }
}

pub(super) async fn runs(
    State(state): State<Arc<PageState>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let (session, store) = match console_session(&state, &headers) {
        Ok(signed_in) => signed_in,
        Err(refused) => return *refused,
    };
    let asked = match RunsQuery::parse(query.as_deref().unwrap_or_default()) {
        Ok(asked) => asked,
        Err(problem) => return bad_request(&problem),
    };
    let labels = match Labels::parse(asked.labels.iter().map(String::as_str)) {
        Ok(labels) => labels,
        Err(e) => return bad_request(&format!("{e}")),
    };
    let mut filter = RunFilter::labelled(labels);
    filter.status = asked.status;
    let offset = asked.page.saturating_mul(RUNS_PER_PAGE);
    let page = match read("console: listing runs", move || {
        Ok(store.runs_page_capped_filtered(RUNS_PER_PAGE, offset, &filter)?)
    })
    .await
    {
        Ok(page) => page,
        Err(refused) => return refused,
    };
    let shown = RunsAsked {
        status: asked.status,
        labels: &asked.labels,
        page: asked.page,
        per_page: RUNS_PER_PAGE,
    };
    html(
        StatusCode::OK,
        console_html::runs_page(&session.by, &shown, &page),
    )
}

pub(super) async fn run(
    State(state): State<Arc<PageState>>,
    Path(run): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let (session, store) = match console_session(&state, &headers) {
        Ok(signed_in) => signed_in,
        Err(refused) => return *refused,
    };
    let mut from = 0u64;
    for (key, value) in form_fields(query.as_deref().unwrap_or_default().as_bytes()) {
        if key == "from" {
            match value.parse() {
                Ok(n) => from = n,
                Err(_) => return bad_request(&format!("{value:?} is not an event number.")),
            }
        }
    }
    let (id, approver) = (run.clone(), Arc::clone(&state.config.approver));
    let record = read("console: reading a run", move || {
        let run = store.get_run_capped(&id)?;
        let steps = store.steps_page_capped(&id, STEPS_SHOWN, 0)?;
        let events = store.events_page_capped(&id, EVENTS_PER_PAGE, from)?;
        let pending = approver.pending(&id, PENDING_PER_RUN)?;
        Ok((run, steps, events, pending))
    })
    .await;
    let (run_row, steps, events, pending) = match record {
        Ok(record) => record,
        Err(refused) => return refused,
    };
    let timeline = Timeline {
        run: &run_row,
        steps: &steps,
        events: &events,
        event_offset: from,
        events_per_page: EVENTS_PER_PAGE,
        pending: &pending,
        csrf: &session.csrf,
    };
    html(
        StatusCode::OK,
        console_html::run_page(&session.by, &timeline),
    )
}

pub(super) async fn pending(State(state): State<Arc<PageState>>, headers: HeaderMap) -> Response {
    let (session, store) = match console_session(&state, &headers) {
        Ok(signed_in) => signed_in,
        Err(refused) => return *refused,
    };
    let approver = Arc::clone(&state.config.approver);
    let found = read("console: reading pending approvals", move || {
        let waiting = RunFilter::default().with_status(RunStatus::WaitingForApproval);
        let runs = store.runs_page_capped_filtered(PENDING_RUNS, 0, &waiting)?;
        let with_pending = runs
            .items
            .into_iter()
            .map(|run| {
                let pending = approver.pending(&run.id, PENDING_PER_RUN)?;
                Ok((run, pending))
            })
            .collect::<Result<Vec<_>, ApproverError>>()?;
        Ok((with_pending, runs.total))
    })
    .await;
    let (waiting, total) = match found {
        Ok(found) => found,
        Err(refused) => return refused,
    };
    html(
        StatusCode::OK,
        console_html::pending_page(&session.by, &waiting, total, &session.csrf),
    )
}

pub(super) async fn chain(
    State(state): State<Arc<PageState>>,
    Path(run): Path<String>,
    headers: HeaderMap,
) -> Response {
    let (session, store) = match console_session(&state, &headers) {
        Ok(signed_in) => signed_in,
        Err(refused) => return *refused,
    };
    let id = run.clone();
    let checked = read("console: checking a run's chain", move || {
        store.get_run_capped(&id)?;
        let first = store.events_page_capped(&id, 1, 0)?;
        let Some(head) = first.items.first() else {
            return Ok(None);
        };
        let last = store.events_page_capped(&id, 1, first.total.saturating_sub(1))?;
        let to = last.items.first().map_or(head.seq, |e| e.seq);
        let report = agentrt::verify::verify_events(&store, head.seq, to)?;
        Ok(Some(((head.seq, to), report)))
    })
    .await;
    let checked = match checked {
        Ok(checked) => checked,
        Err(refused) => return refused,
    };
    let (range, report) = match &checked {
        Some((range, report)) => (Some(*range), Some(report)),
        None => (None, None),
    };
    html(
        StatusCode::OK,
        console_html::chain_page(&session.by, &run, range, report),
    )
}
