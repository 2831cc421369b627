//! The workspace's one CHANGELOG.md, a section per crate.
//!
//! Unreleased changes sit under `## Unreleased`, in a `### CRATE` (or
//! `### CRATE VERSION`) section each. Releasing a crate moves its section
//! out of `## Unreleased` into a `## CRATE VERSION (DATE)` section of its
//! own, newest first, right below `## Unreleased`.

/// A heading's level and words, when `line` is a `##` or `###` heading.
fn heading(line: &str) -> Option<(usize, Vec<&str>)> {
    let level = line.bytes().take_while(|b| *b == b'#').count();
    let rest = line.get(level..)?;
    if !(2..=3).contains(&level) || !rest.starts_with(' ') {
        return None;
    }
    Some((level, rest.split_whitespace().collect()))
}

/// The levels of the headings whose first two words are `name version`.
fn section_levels<'a>(
    changelog: &'a str,
    name: &'a str,
    version: &'a str,
) -> impl Iterator<Item = usize> + 'a {
    changelog.lines().filter_map(move |line| {
        heading(line)
            .filter(|(_, words)| words.first() == Some(&name) && words.get(1) == Some(&version))
            .map(|(level, _)| level)
    })
}

/// Whether the changelog has a section for `name` at `version`: a `##` or
/// `###` heading whose first two words are exactly those.
pub fn has_section(changelog: &str, name: &str, version: &str) -> bool {
    section_levels(changelog, name, version).next().is_some()
}

/// The changelog with `name`'s unreleased section released as `version`
/// on `date`.
pub fn release_section(
    changelog: &str,
    name: &str,
    version: &str,
    date: &str,
) -> Result<String, String> {
    if is_released(changelog, name, version) {
        return Err(format!(
            "CHANGELOG.md already has a section for {name} {version}"
        ));
    }
    let lines: Vec<&str> = changelog.lines().collect();
    let unreleased = lines
        .iter()
        .position(|l| {
            heading(l).is_some_and(|(level, words)| level == 2 && words == ["Unreleased"])
        })
        .ok_or("CHANGELOG.md has no `## Unreleased` section")?;
    let block_end = lines[unreleased + 1..]
        .iter()
        .position(|l| heading(l).is_some_and(|(level, _)| level == 2))
        .map_or(lines.len(), |i| unreleased + 1 + i);
    let start = (unreleased + 1..block_end)
        .find(|&i| {
            heading(lines[i])
                .is_some_and(|(level, words)| level == 3 && words.first() == Some(&name))
        })
        .ok_or_else(|| {
            format!(
                "nothing to release: CHANGELOG.md has no `### {name}` section under `## Unreleased`"
            )
        })?;
    let end = (start + 1..block_end)
        .find(|&i| heading(lines[i]).is_some())
        .unwrap_or(block_end);
    let body = trim_blank(&lines[start + 1..end]);
    if body.is_empty() {
        return Err(format!(
            "nothing to release: the `### {name}` section under `## Unreleased` is empty"
        ));
    }
    let mut out: Vec<String> = Vec::with_capacity(lines.len() + 2);
    out.extend(lines[..start].iter().map(|l| l.to_string()));
    out.extend(lines[end..block_end].iter().map(|l| l.to_string()));
    while out.last().is_some_and(|l| l.trim().is_empty()) {
        out.pop();
    }
    out.push(String::new());
    out.push(format!("## {name} {version} ({date})"));
    out.push(String::new());
    out.extend(body.iter().map(|l| l.to_string()));
    if block_end < lines.len() {
        out.push(String::new());
    }
    out.extend(lines[block_end..].iter().map(|l| l.to_string()));
    let mut text = out.join("\n");
    text.push('\n');
    Ok(text)
}

/// Whether `name version` has a released (`##`) section already; an
/// unreleased `### name version` section is what a first release moves.
fn is_released(changelog: &str, name: &str, version: &str) -> bool {
    section_levels(changelog, name, version).any(|level| level == 2)
}

fn trim_blank<'a>(lines: &'a [&'a str]) -> &'a [&'a str] {
    let first = lines
        .iter()
        .position(|l| !l.trim().is_empty())
        .unwrap_or(lines.len());
    let last = lines
        .iter()
        .rposition(|l| !l.trim().is_empty())
        .map_or(first, |i| i + 1);
    &lines[first..last]
}

#[cfg(test)]
mod tests {
    use super::{has_section, release_section};

    const LOG: &str = "# Changelog

Intro.

## Unreleased

### All published crates

- shared line

### core 0.2.0

- core change one
- core change two

### core-cli

- cli change

## core-cli 0.1.0 (2026-11-01)

- first cli
";

    #[test]
    fn a_section_is_found_by_its_exact_name_and_version() {
        assert!(has_section(LOG, "core", "0.2.0"));
        assert!(has_section(LOG, "core-cli", "0.1.0"));
        assert!(!has_section(LOG, "core", "0.1.0"));
        assert!(!has_section(LOG, "core-c", "0.1.0"));
        assert!(!has_section(
            "- core 0.2.0\n#### core 0.2.0\n#core 0.2.0",
            "core",
            "0.2.0"
        ));
    }

    #[test]
    fn releasing_moves_the_crates_section_below_unreleased_with_its_date() {
        let released = release_section(LOG, "core-cli", "0.2.0", "2026-12-02").unwrap();
        assert_eq!(
            released,
            "# Changelog

Intro.

## Unreleased

### All published crates

- shared line

### core 0.2.0

- core change one
- core change two

## core-cli 0.2.0 (2026-12-02)

- cli change

## core-cli 0.1.0 (2026-11-01)

- first cli
"
        );
        // A section already headed with its version keeps it (a first release).
        let released = release_section(LOG, "core", "0.2.0", "2026-12-02").unwrap();
        assert!(released.contains(
            "## Unreleased\n\n### All published crates\n\n- shared line\n\n### core-cli\n"
        ));
        assert!(released.contains("\n## core 0.2.0 (2026-12-02)\n\n- core change one\n- core change two\n\n## core-cli 0.1.0"));
        assert!(has_section(&released, "core", "0.2.0"));
    }

    #[test]
    fn nothing_to_release_or_an_existing_release_is_refused() {
        let none = release_section(LOG, "core-bench", "0.1.0", "2026-12-02").unwrap_err();
        assert!(none.contains("no `### core-bench` section"), "{none}");
        let again = release_section(LOG, "core-cli", "0.1.0", "2026-12-02").unwrap_err();
        assert!(
            again.contains("already has a section for core-cli 0.1.0"),
            "{again}"
        );
        let empty = release_section(
            "## Unreleased\n\n### core\n\n## core 0.1.0 (x)\n",
            "core",
            "0.2.0",
            "d",
        )
        .unwrap_err();
        assert!(empty.contains("is empty"), "{empty}");
        let no_block = release_section("# Changelog\n", "core", "0.2.0", "d").unwrap_err();
        assert!(no_block.contains("no `## Unreleased`"), "{no_block}");
    }
}
