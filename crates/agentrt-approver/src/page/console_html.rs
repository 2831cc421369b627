//! The console's HTML: the runs, a run's timeline, the pending approvals
//! across runs and a run's chain. Every value from the database is escaped
//! (through [`escape`]) and clipped; nothing is markup but the console's
//! own, and there is no script.

use std::fmt::Write;

use agentrt::model::{Event, Step};
use agentrt::store::Page;
use agentrt::verify::VerifyReport;
use agentrt::{Run, RunStatus};

use super::html::{self, escape};
use crate::Pending;

/// The most bytes of a goal, argument or payload shown in a table cell.
const CELL: usize = 300;

/// The console's navigation, on every console page.
fn nav(by: &str) -> String {
    format!(
        "<nav><a href=\"/ui/console\" id=\"nav-runs\">Runs</a> · \
<a href=\"/ui/console/pending\" id=\"nav-pending\">Waiting for a decision</a> · \
signed in to the console as <b>{}</b></nav>\n",
        escape(by)
    )
}

fn cell(text: &str) -> String {
    escape(&agentrt::text::clip(text, CELL))
}

fn run_link(id: &str) -> String {
    format!(
        "<a href=\"/ui/console/runs/{}\">{}</a>",
        super::percent(id),
        escape(id)
    )
}

/// What the runs page was asked for: kept in its filter form and its
/// paging links.
pub(super) struct RunsAsked<'a> {
    pub status: Option<RunStatus>,
    pub labels: &'a [String],
    pub page: u64,
    pub per_page: u64,
}

impl RunsAsked<'_> {
    /// The query of the same filter at page `page`.
    fn query(&self, page: u64) -> String {
        let mut pairs = Vec::new();
        if let Some(status) = self.status {
            pairs.push(format!("status={}", super::percent(status.as_str())));
        }
        for label in self.labels {
            pairs.push(format!("label={}", super::percent(label)));
        }
        pairs.push(format!("page={page}"));
        pairs.join("&amp;")
    }
}

/// The runs, newest first, a page at a time, with the filter form.
pub(super) fn runs_page(by: &str, asked: &RunsAsked<'_>, runs: &Page<Run>) -> String {
    let mut body = nav(by);
    body.push_str("<h1>Runs</h1>\n");
    body.push_str("<form method=\"get\" action=\"/ui/console\" class=\"filter\">");
    body.push_str("<label>status <select name=\"status\" id=\"filter-status\"><option value=\"\">any</option>");
    for status in RunStatus::ALL {
        let selected = if asked.status == Some(*status) {
            " selected"
        } else {
            ""
        };
        let _ = write!(
            body,
            "<option value=\"{0}\"{selected}>{0}</option>",
            status.as_str()
        );
    }
    body.push_str("</select></label> ");
    let labels = asked.labels.join(" ");
    let _ = writeln!(
        body,
        "<label>labels <input name=\"label\" id=\"filter-label\" value=\"{}\" placeholder=\"key=value\"></label> \
<button type=\"submit\" id=\"filter\">Show</button></form>",
        escape(&labels)
    );
    let first = asked.page * asked.per_page;
    let _ = writeln!(
        body,
        "<p id=\"count\">{} run(s){}.</p>",
        runs.total,
        if runs.items.is_empty() {
            String::new()
        } else {
            format!(
                ", {} to {} shown",
                first + 1,
                first + runs.items.len() as u64
            )
        }
    );
    body.push_str("<table id=\"runs\"><tr><th>run</th><th>status</th><th>goal</th><th>labels</th><th>steps</th><th>created</th></tr>\n");
    for run in &runs.items {
        let reason = run
            .reason
            .map(|r| format!(" ({})", r.as_str()))
            .unwrap_or_default();
        let labels: Vec<String> = run.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(
            body,
            "<tr><td>{}</td><td>{}{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            run_link(&run.id),
            run.status.as_str(),
            escape(&reason),
            cell(&run.goal),
            cell(&labels.join(" ")),
            run.step_count,
            escape(&run.created_at.to_string()),
        );
    }
    body.push_str("</table>\n<p>");
    if asked.page > 0 {
        let _ = write!(
            body,
            "<a id=\"newer\" href=\"/ui/console?{}\">newer</a> ",
            asked.query(asked.page - 1)
        );
    }
    if first + (runs.items.len() as u64) < runs.total {
        let _ = write!(
            body,
            "<a id=\"older\" href=\"/ui/console?{}\">older</a>",
            asked.query(asked.page + 1)
        );
    }
    body.push_str("</p>\n");
    html::page("Runs", &body)
}

/// What a run's timeline shows.
pub(super) struct Timeline<'a> {
    pub run: &'a Run,
    pub steps: &'a Page<Step>,
    pub events: &'a Page<Event>,
    pub event_offset: u64,
    pub events_per_page: u64,
    pub pending: &'a [Pending],
    pub csrf: &'a str,
}

/// A run's timeline: the run, its steps (decision, policy, outcome), its
/// pending approvals with their forms, and a page of its events.
pub(super) fn run_page(by: &str, t: &Timeline<'_>) -> String {
    let run = t.run;
    let mut body = nav(by);
    let _ = writeln!(body, "<h1>Run <code>{}</code></h1>", escape(&run.id));
    let reason = run
        .reason
        .map(|r| format!(" ({}: {})", r.as_str(), run.reason_detail))
        .unwrap_or_default();
    let _ = writeln!(
        body,
        "<p id=\"status\">{}{}</p>\n<p>goal: <span id=\"goal\">{}</span></p>",
        run.status.as_str(),
        cell(&reason),
        cell(&run.goal)
    );
    let _ = writeln!(
        body,
        "<p><a id=\"chain\" href=\"/ui/console/runs/{}/chain\">Check this run's part of the chain</a></p>",
        super::percent(&run.id)
    );
    if !t.pending.is_empty() {
        body.push_str("<h2>Waiting for a decision</h2>\n");
        for shown in t.pending {
            body.push_str(&html::approval_section(&run.id, shown, t.csrf));
        }
    }
    let _ = writeln!(
        body,
        "<h2>Steps</h2>\n<p>{} step(s){}.</p>",
        t.steps.total,
        if (t.steps.items.len() as u64) < t.steps.total {
            format!(", the first {} shown", t.steps.items.len())
        } else {
            String::new()
        }
    );
    body.push_str("<table id=\"steps\"><tr><th>#</th><th>status</th><th>decision</th><th>arguments</th><th>policy</th><th>outcome</th></tr>\n");
    for step in &t.steps.items {
        let (decision, args) = match &step.decision {
            Some(d) if !d.tool.is_empty() => (d.tool.clone(), d.args_or_empty().into_string()),
            Some(d) => (d.kind.as_str().to_owned(), String::new()),
            None => (String::new(), String::new()),
        };
        let policy = step
            .policy
            .as_ref()
            .map(|p| format!("{}: {}", p.outcome.as_str(), p.reason))
            .unwrap_or_default();
        let outcome = step
            .observation
            .as_ref()
            .map(|o| {
                let edited = if o.operator_edit.is_some() {
                    " [edited by an operator]"
                } else {
                    ""
                };
                format!("{}{edited}: {}", o.kind.as_str(), o.summary)
            })
            .unwrap_or_default();
        let _ = writeln!(
            body,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
            step.index,
            step.status.as_str(),
            cell(&decision),
            cell(&args),
            cell(&policy),
            cell(&outcome),
        );
    }
    body.push_str("</table>\n");
    let first = t.event_offset;
    let _ = writeln!(
        body,
        "<h2>Events</h2>\n<p id=\"events-count\">{} event(s){}.</p>",
        t.events.total,
        if t.events.items.is_empty() {
            String::new()
        } else {
            format!(
                ", {} to {} shown",
                first + 1,
                first + t.events.items.len() as u64
            )
        }
    );
    body.push_str(
        "<table id=\"events\"><tr><th>seq</th><th>at</th><th>type</th><th>payload</th></tr>\n",
    );
    for event in &t.events.items {
        let _ = writeln!(
            body,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td></tr>",
            event.seq,
            escape(&event.at),
            cell(event.event_type.as_str()),
            cell(&event.payload),
        );
    }
    body.push_str("</table>\n<p>");
    let link = |id: &str, offset: u64, text: &str| {
        format!(
            "<a id=\"{id}\" href=\"/ui/console/runs/{}?from={offset}\">{text}</a> ",
            super::percent(&run.id)
        )
    };
    if first > 0 {
        body.push_str(&link(
            "earlier",
            first.saturating_sub(t.events_per_page),
            "earlier events",
        ));
    }
    if first + (t.events.items.len() as u64) < t.events.total {
        body.push_str(&link("later", first + t.events_per_page, "later events"));
    }
    body.push_str("</p>\n");
    html::page(&format!("Run {}", run.id), &body)
}

/// Every run that waits for a decision (newest first, capped) with its
/// pending approvals and their forms.
pub(super) fn pending_page(
    by: &str,
    waiting: &[(Run, Vec<Pending>)],
    total: u64,
    csrf: &str,
) -> String {
    let mut body = nav(by);
    body.push_str("<h1>Waiting for a decision</h1>\n");
    let _ = writeln!(
        body,
        "<p id=\"count\">{total} run(s) wait{}.</p>",
        if (waiting.len() as u64) < total {
            format!("; the newest {} shown", waiting.len())
        } else {
            String::new()
        }
    );
    for (run, pending) in waiting {
        let _ = writeln!(
            body,
            "<section class=\"run\"><h2>Run {}</h2>\n<p>goal: {}</p>",
            run_link(&run.id),
            cell(&run.goal)
        );
        for shown in pending {
            body.push_str(&html::approval_section(&run.id, shown, csrf));
        }
        body.push_str("</section>\n");
    }
    html::page("Waiting for a decision", &body)
}

/// A run's part of the chain: intact from its first event to its last, or
/// the first break.
pub(super) fn chain_page(
    by: &str,
    run: &str,
    range: Option<(i64, i64)>,
    report: Option<&VerifyReport>,
) -> String {
    let mut body = nav(by);
    let _ = writeln!(body, "<h1>The chain for run {}</h1>", run_link(run));
    match (range, report) {
        (None, _) | (_, None) => {
            body.push_str("<p id=\"chain-state\">The run has no events.</p>\n")
        }
        (Some((from, to)), Some(report)) => match &report.broken {
            None => {
                let _ = writeln!(
                    body,
                    "<p id=\"chain-state\">intact: {} event(s), seq {from} to {to} (every run's events in that range), and the rows they list.</p>\n<p>last link <code class=\"hash\">{}</code></p>",
                    report.checked,
                    escape(&report.hash)
                );
            }
            Some(broken) => {
                let _ = writeln!(
                    body,
                    "<p id=\"chain-state\">broken at seq {}: {}</p>\n<p>expected <code class=\"hash\">{}</code>, found <code class=\"hash\">{}</code></p>",
                    broken.seq,
                    cell(&broken.detail),
                    escape(&broken.expected),
                    escape(&broken.found)
                );
            }
        },
    }
    html::page(&format!("The chain for run {run}"), &body)
}
