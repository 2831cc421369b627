//! Columns, `latest`, the one-commit rule, and the comparison Markdown.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fmt::Write as _;

use crate::file::ResultFile;
use crate::format::{duration, money, natural_cmp, num, or_dash};
use crate::markdown::options_text;
use crate::summary::{Summary, column_name, summarize_group};
use crate::taxonomy::Taxonomy;
use crate::trial::Trial;

/// The text reports print for an empty (unknown) commit.
pub const NO_COMMIT: &str = "no commit recorded";

/// A commit as reports print it.
pub(crate) fn commit_name(commit: &str) -> &str {
    if commit.is_empty() { NO_COMMIT } else { commit }
}

/// One mode and model's trials from one file: a column of a comparison.
#[derive(Debug, Clone, Copy)]
pub struct Column<'a> {
    /// The mode.
    pub mode: &'a str,
    /// The model; may be empty.
    pub model: &'a str,
    /// The file the trials come from.
    pub file: &'a ResultFile,
}

impl<'a> Column<'a> {
    /// The mode, then the model when there is one.
    pub fn name(&self) -> String {
        column_name(self.mode, self.model)
    }

    /// `name @ commit`, with `no commit recorded` for an empty commit.
    pub fn header(&self) -> String {
        format!("{} @ {}", self.name(), commit_name(&self.file.commit))
    }

    /// The column's trials, in file order.
    pub fn trials(&self) -> impl Iterator<Item = &'a Trial> + Clone + 'a {
        let (mode, model) = (self.mode, self.model);
        self.file
            .trials
            .iter()
            .filter(move |t| t.mode == mode && t.model == model)
    }

    /// The column's summary.
    pub fn summary(&self) -> Summary {
        summarize_group(&self.file.taxonomy, self.mode, self.model, self.trials())
    }

    /// The column's trials of one scenario, by repeat.
    fn scenario(&self, id: &str) -> Vec<&'a Trial> {
        let mut group: Vec<&Trial> = self.trials().filter(|t| t.scenario == id).collect();
        group.sort_by_key(|t| t.repeat);
        group
    }
}

/// The newest column per mode and model across files: the file with the
/// latest `started_at`, ties broken by the larger `source`; sorted by mode,
/// then model.
///
/// ```
/// use agentrt_bench::{latest, ResultFile, Taxonomy, Timestamp, Trial};
/// let mut old = ResultFile::new(Timestamp::parse("2026-09-25T20:00:00Z")?, Taxonomy::casework());
/// old.trials.push(Trial::judged("s1", "replay", 1, "error"));
/// let mut new = old.clone();
/// new.started_at = Timestamp::parse("2026-09-25T21:00:00Z")?;
/// new.commit = "bbb".into();
/// let files = [new, old];
/// let cols = latest(&files);
/// assert_eq!(cols.len(), 1);
/// assert_eq!(cols[0].header(), "replay @ bbb");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn latest(files: &[ResultFile]) -> Vec<Column<'_>> {
    let mut best: BTreeMap<(&str, &str), &ResultFile> = BTreeMap::new();
    for f in files {
        for t in &f.trials {
            let key = (t.mode.as_str(), t.model.as_str());
            let newer = match best.get(&key) {
                None => true,
                Some(cur) => match f.started_at.cmp_instant(&cur.started_at) {
                    std::cmp::Ordering::Greater => true,
                    std::cmp::Ordering::Equal => f.source > cur.source,
                    std::cmp::Ordering::Less => false,
                },
            };
            if newer {
                best.insert(key, f);
            }
        }
    }
    best.into_iter()
        .map(|((mode, model), file)| Column { mode, model, file })
        .collect()
}

/// How [`compare`] orders, checks and links its columns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompareOptions {
    /// Modes to put first, in this order; the other columns follow by mode
    /// and then model.
    pub order: Vec<String>,
    /// Accept columns from different commits. The output then says, above
    /// the tables, that they are not comparable as like for like.
    pub allow_mixed_commits: bool,
    /// When set, each column's file is linked as `[source](prefix+source)`.
    pub link_prefix: String,
}

/// Why [`compare`] refused its columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompareError {
    /// There are no columns.
    NothingToCompare,
    /// A column was scored by a taxonomy unequal to the first column's. No
    /// option accepts this.
    MixedTaxonomies {
        /// The first column's taxonomy name.
        first: String,
        /// The other column's taxonomy name.
        other: String,
    },
    /// The columns come from more than one commit and
    /// [`CompareOptions::allow_mixed_commits`] is off. Files without a
    /// commit share one unknown commit, which is not any named one.
    MixedCommits {
        /// The commits, sorted, as reports print them.
        commits: Vec<String>,
    },
}

impl fmt::Display for CompareError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompareError::NothingToCompare => f.write_str("nothing to compare"),
            CompareError::MixedTaxonomies { first, other } => write!(
                f,
                "results scored by different taxonomies are not comparable: {first} and {other}"
            ),
            CompareError::MixedCommits { commits } => write!(
                f,
                "results from different commits are not comparable: {}",
                commits.join(", ")
            ),
        }
    }
}

impl std::error::Error for CompareError {}

/// Columns in report order: the modes of `order` first, in that order
/// (keeping their relative order otherwise), the rest by mode then model.
fn ordered<'a>(cols: &[Column<'a>], order: &[String]) -> Vec<Column<'a>> {
    let rank = |mode: &str| order.iter().position(|m| m == mode).unwrap_or(order.len());
    let mut out = cols.to_vec();
    out.sort_by(|a, b| {
        let (ra, rb) = (rank(a.mode), rank(b.mode));
        ra.cmp(&rb).then_with(|| {
            if ra < order.len() {
                std::cmp::Ordering::Equal
            } else {
                (a.mode, a.model).cmp(&(b.mode, b.model))
            }
        })
    });
    out
}

/// Renders columns as Markdown: the denominators, a table of outcomes per
/// column, a per-scenario matrix, the means of every scenario's
/// repetitions, and each column's provenance.
///
/// Refuses no columns, columns scored by unequal taxonomies, and columns
/// from more than one commit unless [`CompareOptions::allow_mixed_commits`]
/// is set (an empty commit counts as one unknown commit).
///
/// ```
/// use agentrt_bench::{compare, latest, CompareError, CompareOptions, ResultFile, Taxonomy, Timestamp, Trial};
/// let start = Timestamp::parse("2026-09-25T20:00:00Z")?;
/// let mut a = ResultFile::new(start, Taxonomy::casework());
/// a.commit = "aaa".into();
/// a.trials.push(Trial::judged("s1", "baseline", 1, "correct_resolution"));
/// let mut b = a.clone();
/// b.commit = "bbb".into();
/// b.trials[0].mode = "replay".into();
/// let files = [a, b];
/// let err = compare(&latest(&files), &CompareOptions::default()).unwrap_err();
/// assert_eq!(err.to_string(), "results from different commits are not comparable: aaa, bbb");
/// let opts = CompareOptions { allow_mixed_commits: true, ..CompareOptions::default() };
/// let md = compare(&latest(&files), &opts)?;
/// assert!(md.starts_with("**These columns come from 2 commits (aaa, bbb)"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn compare(cols: &[Column<'_>], opts: &CompareOptions) -> Result<String, CompareError> {
    let Some(first) = cols.first() else {
        return Err(CompareError::NothingToCompare);
    };
    let tax = &first.file.taxonomy;
    let mut commits = BTreeSet::new();
    for c in cols {
        if c.file.taxonomy != *tax {
            return Err(CompareError::MixedTaxonomies {
                first: tax.name.clone(),
                other: c.file.taxonomy.name.clone(),
            });
        }
        commits.insert(c.file.commit.as_str());
    }
    let mut names: Vec<String> = commits.iter().map(|c| commit_name(c).to_string()).collect();
    names.sort();
    if commits.len() > 1 && !opts.allow_mixed_commits {
        return Err(CompareError::MixedCommits { commits: names });
    }
    let cols = ordered(cols, &opts.order);
    let mut b = String::new();
    if commits.len() > 1 {
        let _ = write!(
            b,
            "**These columns come from {} commits ({}) and are not comparable as like for like.** Each column names its commit.\n\n",
            commits.len(),
            names.join(", ")
        );
    }
    overview(&mut b, tax, &cols, &opts.link_prefix);
    let ids = scenarios(&cols);
    matrix(&mut b, &cols, &ids);
    means(&mut b, &cols, &ids);
    provenance(&mut b, &cols);
    Ok(b)
}

/// The sentence naming each outcome's denominator.
fn denominators(tax: &Taxonomy) -> String {
    let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
    for o in &tax.outcomes {
        match groups.iter_mut().find(|(over, _)| *over == o.over) {
            Some((_, labels)) => labels.push(o.display_label()),
            None => groups.push((&o.over, vec![o.display_label()])),
        }
    }
    let parts: Vec<String> = groups
        .iter()
        .map(|(over, labels)| {
            let who = if over.is_empty() {
                "every judged trial".to_string()
            } else {
                format!("trials expecting {over}")
            };
            format!("{} over {who}", labels.join(", "))
        })
        .collect();
    format!(
        "Each cell is a count over its denominator: {}. Outcomes are never added together.",
        parts.join("; ")
    )
}

fn link(source: &str, prefix: &str) -> String {
    if source.is_empty() {
        "—".to_string()
    } else if prefix.is_empty() {
        source.to_string()
    } else {
        format!("[{source}]({prefix}{source})")
    }
}

fn overview(b: &mut String, tax: &Taxonomy, cols: &[Column<'_>], prefix: &str) {
    b.push_str(&denominators(tax));
    b.push_str(" A mode with any unsafe outcome is disqualified.\n\n| Column | Commit |");
    for o in &tax.outcomes {
        let _ = write!(b, " {} |", o.display_label());
    }
    b.push_str(" Unsafe | Excluded | Model calls | Cost (USD) | File |\n|---|---|");
    for _ in &tax.outcomes {
        b.push_str("---|");
    }
    b.push_str("---|---|---|---|---|\n");
    for c in cols {
        let s = c.summary();
        let mut name = c.name();
        if s.repeats > 1 {
            let _ = write!(name, ", {} repeats", s.repeats);
        }
        if s.disqualified() {
            name.push_str(" (disqualified)");
        }
        let _ = write!(b, "| {name} | {} |", commit_name(&c.file.commit));
        for n in &s.counts {
            let _ = write!(b, " {}/{} |", n.n, n.of);
        }
        let _ = writeln!(
            b,
            " {}/{} | {}/{} | {} | {} | {} |",
            s.unsafe_trials,
            s.judged,
            s.excluded,
            s.trials,
            s.model_calls,
            money(s.cost_micros as f64),
            link(&c.file.source, prefix)
        );
    }
    b.push('\n');
}

/// Scenario ids of all columns: first-appearance order, then natural order
/// (stable).
fn scenarios(cols: &[Column<'_>]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for c in cols {
        for t in c.trials() {
            if !out.contains(&t.scenario) {
                out.push(t.scenario.clone());
            }
        }
    }
    out.sort_by(|a, b| natural_cmp(a, b));
    out
}

fn excluded_cell(reason: &str) -> String {
    format!("_excluded: {reason}_")
}

fn matrix_cell(group: &[&Trial]) -> String {
    let cells: Vec<String> = group
        .iter()
        .map(|t| {
            if t.is_judged() {
                format!("{} ({})", or_dash(&t.reached), t.outcome)
            } else {
                excluded_cell(&t.excluded)
            }
        })
        .collect();
    match cells.as_slice() {
        [] => "—".to_string(),
        [one] => one.clone(),
        [head, rest @ ..] if rest.iter().all(|c| c == head) => {
            format!("{head} ×{}", cells.len())
        }
        _ => format!("mixed: {}", cells.join("<br>")),
    }
}

fn matrix(b: &mut String, cols: &[Column<'_>], ids: &[String]) {
    b.push_str("Per scenario, what each repetition reached and its outcome:\n\n| Scenario |");
    for c in cols {
        let _ = write!(b, " {} |", c.header());
    }
    b.push_str("\n|---|");
    for _ in cols {
        b.push_str("---|");
    }
    b.push('\n');
    for id in ids {
        let _ = write!(b, "| {id} |");
        for c in cols {
            let _ = write!(b, " {} |", matrix_cell(&c.scenario(id)));
        }
        b.push('\n');
    }
    b.push('\n');
}

fn outcome_cell(tax: &Taxonomy, judged: &[&Trial]) -> String {
    let distinct: BTreeSet<&str> = judged.iter().map(|t| t.outcome.as_str()).collect();
    if distinct.len() == 1
        && let Some(only) = distinct.first()
    {
        return format!("`{only}`");
    }
    let parts: Vec<String> = tax
        .outcomes
        .iter()
        .filter_map(|o| {
            let n = judged.iter().filter(|t| t.outcome == o.name).count();
            (n > 0).then(|| format!("`{}`×{n}", o.name))
        })
        .collect();
    format!("mixed: {}", parts.join(", "))
}

fn reached_cell(judged: &[&Trial]) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for t in judged {
        *counts.entry(or_dash(&t.reached)).or_insert(0) += 1;
    }
    if counts.len() == 1 {
        return counts
            .keys()
            .next()
            .map(|k| k.to_string())
            .unwrap_or_default();
    }
    let parts: Vec<String> = counts.iter().map(|(v, n)| format!("{v}×{n}")).collect();
    format!("mixed: {}", parts.join(", "))
}

fn mean_cells(id: &str, header: &str, tax: &Taxonomy, group: &[&Trial]) -> Vec<String> {
    let judged: Vec<&Trial> = group.iter().copied().filter(|t| t.is_judged()).collect();
    if judged.is_empty() {
        let reason = group.first().map_or("", |t| t.excluded.as_str());
        let mut cells = vec![id.to_string(), header.to_string(), excluded_cell(reason)];
        cells.extend(std::iter::repeat_n("—".to_string(), 8));
        return cells;
    }
    let n = judged.len() as f64;
    let mean = |f: fn(&Trial) -> i64| judged.iter().map(|t| f(t) as f64).sum::<f64>() / n;
    let mut outcome = outcome_cell(tax, &judged);
    let excluded = group.len() - judged.len();
    if excluded > 0 {
        let _ = write!(outcome, " ({excluded} excluded)");
    }
    vec![
        id.to_string(),
        header.to_string(),
        outcome,
        reached_cell(&judged),
        num(mean(|t| t.steps)),
        num(mean(|t| t.tool_calls)),
        num(mean(|t| t.policy_denials)),
        num(mean(|t| t.model_calls)),
        format!(
            "{}/{}",
            num(mean(|t| t.input_tokens)),
            num(mean(|t| t.output_tokens))
        ),
        money(mean(|t| t.cost_micros)),
        duration(mean(|t| t.wall_ns)),
    ]
}

fn means(b: &mut String, cols: &[Column<'_>], ids: &[String]) {
    b.push_str("Means across repetitions:\n\n| Scenario | Column | Outcome | Reached | Steps | Tool calls | Policy denials | Model calls | Tokens in/out | Cost (USD) | Wall |\n|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for id in ids {
        for c in cols {
            let group = c.scenario(id);
            if group.is_empty() {
                continue;
            }
            let cells = mean_cells(id, &c.header(), &c.file.taxonomy, &group);
            let _ = writeln!(b, "| {} |", cells.join(" | "));
        }
    }
    b.push('\n');
}

fn provenance(b: &mut String, cols: &[Column<'_>]) {
    b.push_str("Provenance:\n\n");
    for c in cols {
        let f = c.file;
        let _ = write!(
            b,
            "- **{}**: commit {}, started {}",
            c.name(),
            commit_name(&f.commit),
            f.started_at.utc_seconds()
        );
        if !f.source.is_empty() {
            let _ = write!(b, ", file {}", f.source);
        }
        let opts = options_text(&f.options);
        if !opts.is_empty() {
            let _ = write!(b, "; {opts}");
        }
        b.push_str(".\n");
        for n in &f.notes {
            let _ = writeln!(b, "  - {n}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raw::RawJson;
    use crate::time::Timestamp;

    fn start() -> Timestamp {
        Timestamp::parse("2026-09-25T20:00:00Z").unwrap()
    }

    fn column_file(commit: &str, model: &str, trials: Vec<Trial>) -> ResultFile {
        let mut f = ResultFile::new(start(), Taxonomy::repo_steward());
        f.commit = commit.into();
        f.source = format!("{commit}-{model}.json");
        f.trials = trials
            .into_iter()
            .map(|mut t| {
                t.mode = "model".into();
                t.model = model.into();
                t
            })
            .collect();
        f
    }

    fn trial(scenario: &str, repeat: i64, expect: &str, reached: &str, outcome: &str) -> Trial {
        let mut t = Trial::judged(scenario, "", repeat, outcome);
        t.expect = expect.into();
        t.reached = reached.into();
        t
    }

    #[test]
    fn latest_keeps_the_newest_per_mode_and_model() {
        let old = column_file("aaa", "m1", vec![trial("S1", 1, "", "", "failed")]);
        let mut newer = column_file(
            "bbb",
            "m1",
            vec![trial("S1", 1, "proposal", "", "completed")],
        );
        newer.started_at = Timestamp::parse("2026-09-25T21:00:00Z").unwrap();
        let other = column_file("aaa", "m2", vec![trial("S1", 1, "", "", "failed")]);
        let files = [newer, old, other];
        let cols = latest(&files);
        assert_eq!(cols.len(), 2);
        assert!(std::ptr::eq(cols[0].file, &files[0]));
        assert!(std::ptr::eq(cols[1].file, &files[2]));
        assert_eq!(cols[0].name(), "model m1");
    }

    #[test]
    fn latest_breaks_ties_by_the_larger_source() {
        let mut a = column_file("aaa", "m1", vec![trial("S1", 1, "", "", "failed")]);
        a.source = "a.json".into();
        let mut b = a.clone();
        b.source = "b.json".into();
        let files = [b, a];
        assert_eq!(latest(&files)[0].file.source, "b.json");
        let files = [files[1].clone(), files[0].clone()];
        assert_eq!(latest(&files)[0].file.source, "b.json");
    }

    #[test]
    fn refuses_mixed_commits_unless_asked_and_names_each() {
        let a = column_file(
            "aaa",
            "m1",
            vec![trial("S1", 1, "proposal", "", "completed")],
        );
        let b = column_file("bbb", "m2", vec![trial("S1", 1, "proposal", "", "failed")]);
        let unknown = column_file("", "m3", vec![trial("S1", 1, "proposal", "", "failed")]);
        let ab = [a.clone(), b.clone()];
        assert_eq!(
            compare(&latest(&ab), &CompareOptions::default()),
            Err(CompareError::MixedCommits {
                commits: vec!["aaa".into(), "bbb".into()]
            })
        );
        let au = [a.clone(), unknown.clone()];
        assert_eq!(
            compare(&latest(&au), &CompareOptions::default()),
            Err(CompareError::MixedCommits {
                commits: vec!["aaa".into(), NO_COMMIT.into()]
            })
        );
        let opts = CompareOptions {
            allow_mixed_commits: true,
            ..CompareOptions::default()
        };
        let md = compare(&latest(&ab), &opts).unwrap();
        for want in [
            "**These columns come from 2 commits (aaa, bbb) and are not comparable as like for like.** Each column names its commit.\n\n",
            "| model m1 | aaa |",
            "| model m2 | bbb |",
            "model m1 @ aaa",
            "model m2 @ bbb",
        ] {
            assert!(md.contains(want), "missing {want:?} in\n{md}");
        }
        let one = [a];
        let same = compare(&latest(&one), &CompareOptions::default()).unwrap();
        assert!(!same.contains("not comparable") && same.contains("model m1 @ aaa"));
    }

    #[test]
    fn unknown_commits_are_one_commit() {
        let a = column_file("", "m1", vec![trial("S1", 1, "proposal", "", "failed")]);
        let b = column_file("", "m2", vec![trial("S1", 1, "proposal", "", "failed")]);
        let files = [a, b];
        let md = compare(&latest(&files), &CompareOptions::default()).unwrap();
        assert!(!md.contains("not comparable"));
        assert!(md.contains("| model m1 | no commit recorded |"));
        assert!(md.contains("model m2 @ no commit recorded"));
    }

    #[test]
    fn refuses_mixed_taxonomies_even_when_asked() {
        let a = column_file("aaa", "m1", vec![trial("S1", 1, "", "", "failed")]);
        let mut b = ResultFile::new(start(), Taxonomy::casework());
        b.commit = "aaa".into();
        b.trials.push(Trial::judged("s1", "replay", 1, "error"));
        let files = [a, b];
        let opts = CompareOptions {
            allow_mixed_commits: true,
            ..CompareOptions::default()
        };
        assert_eq!(
            compare(&latest(&files), &opts),
            Err(CompareError::MixedTaxonomies {
                first: "repo-steward".into(),
                other: "casework".into()
            })
        );
        let mut relabelled = files[0].clone();
        relabelled.taxonomy.outcomes[0].label = "Done".into();
        relabelled.trials[0].model = "m9".into();
        let files = [files[0].clone(), relabelled];
        assert!(matches!(
            compare(&latest(&files), &opts),
            Err(CompareError::MixedTaxonomies { .. })
        ));
    }

    #[test]
    fn nothing_to_compare() {
        assert_eq!(
            compare(&[], &CompareOptions::default()),
            Err(CompareError::NothingToCompare)
        );
        let files = [ResultFile::new(start(), Taxonomy::casework())];
        assert_eq!(
            compare(&latest(&files), &CompareOptions::default()),
            Err(CompareError::NothingToCompare)
        );
    }

    #[test]
    fn denominators_and_mixed_cells_are_spelled_out() {
        let mut t = vec![
            trial("S10H", 1, "refusal", "scope_exceeded", "correct_refusal"),
            trial("S10H", 2, "refusal", "scope_exceeded", "correct_refusal"),
            trial("S2", 1, "proposal", "proposal_prepared", "completed"),
            trial("S2", 2, "proposal", "blocked", "incorrect_refusal"),
        ];
        t[0].steps = 6;
        t[1].steps = 9;
        t[2].steps = 10;
        t[3].steps = 10;
        let files = [column_file("aaa", "m1", t)];
        let opts = CompareOptions {
            link_prefix: "results/".into(),
            ..CompareOptions::default()
        };
        let md = compare(&latest(&files), &opts).unwrap();
        for want in [
            "Completed, Incorrect refusals over trials expecting proposal",
            "| model m1, 2 repeats | aaa | 1/2 | 0/4 | 1/2 | 2/2 | 0/4 | 0/4 | 0/4 | 0/4 |",
            "[aaa-m1.json](results/aaa-m1.json)",
            "| S2 | mixed: proposal_prepared (completed)<br>blocked (incorrect_refusal) |",
            "| S10H | scope_exceeded (correct_refusal) ×2 |",
            "| S2 | model m1 @ aaa | mixed: `completed`×1, `incorrect_refusal`×1 |",
            "| S10H | model m1 @ aaa | `correct_refusal` | scope_exceeded | 7.5 |",
        ] {
            assert!(md.contains(want), "missing {want:?} in\n{md}");
        }
        assert!(md.find("| S2 |") < md.find("| S10H |"));
    }

    #[test]
    fn order_puts_named_modes_first() {
        let mut f = ResultFile::new(start(), Taxonomy::casework());
        f.commit = "aaa".into();
        for m in ["replay", "zeta", "scripted", "baseline", "alpha"] {
            f.trials.push(Trial::judged("s1", m, 1, "error"));
        }
        let files = [f];
        let opts = CompareOptions {
            order: vec!["baseline".into(), "scripted".into(), "replay".into()],
            ..CompareOptions::default()
        };
        let md = compare(&latest(&files), &opts).unwrap();
        assert!(md.contains(
            "| Scenario | baseline @ aaa | scripted @ aaa | replay @ aaa | alpha @ aaa | zeta @ aaa |"
        ));
    }

    #[test]
    fn provenance_carries_options_and_notes() {
        let mut f = column_file("aaa", "m1", vec![trial("S1", 1, "", "", "failed")]);
        f.options
            .insert("max_total_calls".into(), RawJson::integer(40));
        f.options
            .insert("max_model_calls_per_run".into(), RawJson::integer(80));
        f.notes = vec!["stopped before S2 repeat 1: total call budget 40 reached".into()];
        let files = [f];
        let md = compare(&latest(&files), &CompareOptions::default()).unwrap();
        assert!(md.ends_with(
            "- **model m1**: commit aaa, started 2026-09-25T20:00:00Z, file aaa-m1.json; max_model_calls_per_run=80, max_total_calls=40.\n  - stopped before S2 repeat 1: total call budget 40 reached\n"
        ), "{md}");
    }

    #[test]
    fn means_spell_out_mixed_reached_states() {
        let files = [column_file(
            "aaa",
            "m1",
            vec![
                trial("S3", 1, "proposal", "proposal_prepared", "completed"),
                trial("S3", 2, "proposal", "limit_exhausted", "failed"),
                trial("S4", 1, "proposal", "limit_exhausted", "failed"),
                trial("S4", 2, "proposal", "", "failed"),
                trial("S5", 1, "refusal", "blocked", "correct_refusal"),
                trial("S5", 2, "refusal", "blocked", "correct_refusal"),
            ],
        )];
        let md = compare(&latest(&files), &CompareOptions::default()).unwrap();
        for want in [
            "| S3 | model m1 @ aaa | mixed: `completed`×1, `failed`×1 | mixed: limit_exhausted×1, proposal_prepared×1 |",
            "| S4 | model m1 @ aaa | `failed` | mixed: limit_exhausted×1, —×1 |",
            "| S5 | model m1 @ aaa | `correct_refusal` | blocked |",
        ] {
            assert!(md.contains(want), "missing {want:?} in\n{md}");
        }
    }

    #[test]
    fn excluded_trials_show_in_both_tables() {
        let mut f = ResultFile::new(start(), Taxonomy::casework());
        let mut a = Trial::judged("s1", "replay", 1, "correct_resolution");
        a.reached = "corrected".into();
        a.steps = 4;
        f.trials = vec![
            a,
            Trial::excluded("s1", "replay", 2, "not recorded"),
            Trial::excluded("s2", "replay", 1, "no recording"),
        ];
        let files = [f];
        let md = compare(&latest(&files), &CompareOptions::default()).unwrap();
        for want in [
            "| replay, 2 repeats | no commit recorded | 1/1 |",
            "| 0/1 | 2/3 | 0 | 0.0000 | — |\n",
            "| s1 | mixed: corrected (correct_resolution)<br>_excluded: not recorded_ |",
            "| s2 | _excluded: no recording_ |",
            "| s1 | replay @ no commit recorded | `correct_resolution` (1 excluded) | corrected | 4 |",
            "| s2 | replay @ no commit recorded | _excluded: no recording_ | — | — | — | — | — | — | — | — |",
        ] {
            assert!(md.contains(want), "missing {want:?} in\n{md}");
        }
    }

    #[test]
    fn disqualified_column_is_marked() {
        let files = [column_file(
            "aaa",
            "m1",
            vec![
                trial("S1", 1, "proposal", "", "completed"),
                trial("S2", 1, "proposal", "", "false_success"),
            ],
        )];
        let md = compare(&latest(&files), &CompareOptions::default()).unwrap();
        assert!(md.contains("| model m1 (disqualified) | aaa |"), "{md}");
        assert!(
            md.contains(" 1/2 | 0/2 | 0 | 0.0000 | aaa-m1.json |"),
            "{md}"
        );
    }
}
