//! The page's HTML. Every value that comes from the database (ids, hashes,
//! the approval's text, which holds what a model chose) is escaped; nothing
//! is rendered as markup but the page's own.

use std::fmt::Write;

use crate::Pending;

/// `text` with `&`, `<`, `>`, `"` and `'` escaped.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The page's stylesheet (served from the same origin: the policy allows
/// no inline style).
pub(crate) const STYLE: &str = "body{font-family:sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}\
pre{background:#f4f4f4;padding:1rem;overflow-x:auto;white-space:pre-wrap}\
.hash{word-break:break-all}.message{padding:.5rem 1rem;border:1px solid #888}\
form{display:inline-block;margin-right:1rem}\
table{border-collapse:collapse;width:100%;margin:1rem 0}td,th{border:1px solid #ccc;padding:.25rem .5rem;text-align:left;vertical-align:top;word-break:break-word}\
nav{margin-bottom:1rem}form.filter{display:block}\
form.edit{display:block;margin-top:1rem}form.edit textarea{display:block;width:100%;font-family:monospace}";

/// A whole page: `title` (escaped) and `body` (markup, escaped by its
/// maker).
pub(crate) fn page(title: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<title>{}</title><link rel=\"stylesheet\" href=\"/ui/style.css\"></head>\n<body>\n{body}</body></html>\n",
        escape(title)
    )
}

/// A page that only says something (signed out, refused).
pub(crate) fn notice(title: &str, text: &str) -> String {
    page(
        title,
        &format!("<h1>{}</h1>\n<p>{}</p>\n", escape(title), escape(text)),
    )
}

/// An edit refused with nothing decided: the reason (escaped) and a link
/// back to the run's page.
pub(crate) fn refused_edit(run: &str, why: &str) -> String {
    page(
        "Edit refused",
        &format!(
            "<h1>Edit refused</h1>\n<p id=\"refused\">{}</p>\n<p>Nothing was decided. <a id=\"back\" href=\"/ui/runs/{}\">Back to the run</a></p>\n",
            escape(why),
            super::percent(run)
        ),
    )
}

/// A decision form for one approval: bound to the hash shown.
fn form(run: &str, shown: &Pending, csrf: &str, verb: &str, label: &str) -> String {
    let id = &shown.approval.id;
    format!(
        "<form method=\"post\" action=\"/ui/runs/{run}/approvals/{id}/{verb}\">\
<input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
<input type=\"hidden\" name=\"hash\" value=\"{hash}\">\
<label>note <input name=\"note\" id=\"{verb}-note-{id}\"></label> \
<button type=\"submit\" id=\"{verb}-{id}\">{label}</button></form>\n",
        run = escape(run),
        id = escape(id),
        csrf = escape(csrf),
        hash = escape(&shown.approval.hash),
    )
}

/// The edit form for one approval: its request's arguments in a text
/// area, approved instead of the request's when submitted (bound to the
/// hash shown, like the decision forms).
fn edit_form(run: &str, shown: &Pending, csrf: &str) -> String {
    let id = &shown.approval.id;
    let args = shown
        .approval
        .request
        .get("args")
        .map(|args| agentrt::view::pretty_json(args.as_str()))
        .unwrap_or_else(|| "{}".to_owned());
    format!(
        "<form method=\"post\" class=\"edit\" action=\"/ui/runs/{run}/approvals/{id}/edit\">\
<input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
<input type=\"hidden\" name=\"hash\" value=\"{hash}\">\
<label for=\"edit-args-{id}\">Or approve other arguments (checked against the tool's schema; the policy judges them when the run resumes):</label>\
<textarea name=\"args\" id=\"edit-args-{id}\" rows=\"8\">{args}</textarea>\
<label>note <input name=\"note\" id=\"edit-note-{id}\"></label> \
<button type=\"submit\" id=\"edit-{id}\">Approve with these arguments</button></form>\n",
        run = escape(run),
        id = escape(id),
        csrf = escape(csrf),
        hash = escape(&shown.approval.hash),
        args = escape(&args),
    )
}

/// One pending approval as the CLI shows it, with its full hash, its two
/// decision forms and (but for an interrupted call) its edit form.
pub(crate) fn approval_section(run: &str, shown: &Pending, csrf: &str) -> String {
    let mut body = String::new();
    let id = escape(&shown.approval.id);
    let _ = writeln!(body, "<section class=\"approval\" id=\"approval-{id}\">");
    let _ = writeln!(body, "<h2>Approval <code>{id}</code></h2>");
    let _ = writeln!(
        body,
        "<p>hash <code class=\"hash\" id=\"hash-{id}\">{}</code></p>",
        escape(&shown.approval.hash)
    );
    let _ = writeln!(
        body,
        "<pre id=\"text-{id}\">{}</pre>",
        escape(&super::super::webhook::approval_text(shown))
    );
    body.push_str(&form(run, shown, csrf, "approve", "Approve"));
    body.push_str(&form(run, shown, csrf, "reject", "Reject"));
    if shown.approval.kind != agentrt::model::INTERRUPTED_SIDE_EFFECT {
        body.push_str(&edit_form(run, shown, csrf));
    }
    body.push_str("</section>\n");
    body
}

/// The run's page: who is signed in, a message, and each pending approval
/// as the CLI shows it, with its full hash and its two forms.
pub(crate) fn run_page(
    run: &str,
    by: &str,
    message: Option<&str>,
    pending: &[Pending],
    csrf: &str,
) -> String {
    let mut body = String::new();
    let _ = writeln!(body, "<h1>Run <code>{}</code></h1>", escape(run));
    let _ = writeln!(body, "<p>Signed in as <b>{}</b>.</p>", escape(by));
    if let Some(message) = message {
        let _ = writeln!(
            body,
            "<p class=\"message\" id=\"message\">{}</p>",
            escape(message)
        );
    }
    if pending.is_empty() {
        body.push_str("<p id=\"none\">No approval is waiting.</p>\n");
    }
    for shown in pending {
        body.push_str(&approval_section(run, shown, csrf));
    }
    page(&format!("Approvals of run {run}"), &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_in_text_is_escaped() {
        assert_eq!(
            escape(r#"<script>alert("x&'y")</script>"#),
            "&lt;script&gt;alert(&quot;x&amp;&#39;y&quot;)&lt;/script&gt;"
        );
        let page = notice("<b>", "<i>");
        assert!(page.contains("<h1>&lt;b&gt;</h1>") && page.contains("<p>&lt;i&gt;</p>"));
    }
}
