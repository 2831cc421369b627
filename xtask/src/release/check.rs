//! What `cargo xtask release-check` checks that needs no build: the pins
//! between the crates, a changelog section per version, the dependencies'
//! own minimum Rust versions.

use super::changelog;
use super::workspace::Package;

/// Problems with the pins between workspace crates: a published crate's
/// dependency on another workspace crate must be exact (`=x.y.z`, that
/// crate's version), and never on an unpublished one. A dev-dependency
/// given by path alone is dropped from the package, so it may stay loose.
pub fn pin_problems(packages: &[Package]) -> Vec<String> {
    let mut problems = Vec::new();
    for package in packages.iter().filter(|p| p.publishable) {
        for dep in &package.dependencies {
            let Some(target) = packages.iter().find(|p| p.name == dep.name) else {
                continue;
            };
            if dep.is_dropped_from_package() {
                continue;
            }
            if !target.publishable {
                problems.push(format!(
                    "{} depends on {}, which is not published",
                    package.name, target.name
                ));
                continue;
            }
            let wanted = format!("={}", target.version);
            if dep.req != wanted {
                problems.push(format!(
                    "{} requires {} {}, not {wanted} (its version)",
                    package.name, target.name, dep.req
                ));
            }
        }
    }
    problems
}

/// Published crates missing a field crates.io shows.
pub fn metadata_problems(packages: &[Package]) -> Vec<String> {
    packages
        .iter()
        .filter(|p| p.publishable && !p.missing_fields.is_empty())
        .map(|p| {
            format!(
                "{} has no {} in its manifest",
                p.name,
                p.missing_fields.join(", ")
            )
        })
        .collect()
}

/// The names of the published crates that pin `name`.
pub fn pinned_by<'a>(packages: &'a [Package], name: &str) -> Vec<&'a str> {
    packages
        .iter()
        .filter(|p| {
            p.publishable
                && p.dependencies
                    .iter()
                    .any(|d| d.name == name && !d.is_dropped_from_package())
        })
        .map(|p| p.name.as_str())
        .collect()
}

/// Published crates with no changelog section for their version.
pub fn changelog_problems(changelog_text: &str, packages: &[Package]) -> Vec<String> {
    packages
        .iter()
        .filter(|p| p.publishable && !changelog::has_section(changelog_text, &p.name, &p.version))
        .map(|p| {
            format!(
                "CHANGELOG.md has no `### {0} {1}` (or released `## {0} {1}`) section",
                p.name, p.version
            )
        })
        .collect()
}

/// A `rust-version` as numbers (`1.89` is `1.89.0`).
pub fn rust_version(text: &str) -> Option<[u64; 3]> {
    let mut numbers = [0; 3];
    let parts: Vec<&str> = text.split('.').collect();
    if parts.is_empty() || parts.len() > 3 {
        return None;
    }
    for (slot, part) in numbers.iter_mut().zip(&parts) {
        *slot = part.parse().ok()?;
    }
    Some(numbers)
}

/// Dependencies (name, version, rust-version) that declare a newer Rust
/// than `ours`.
pub fn newer_rust<'a>(
    ours: &str,
    dependencies: &'a [(String, String, String)],
) -> Result<Vec<&'a (String, String, String)>, String> {
    let ours_numbers =
        rust_version(ours).ok_or_else(|| format!("rust-version {ours:?} is not a version"))?;
    Ok(dependencies
        .iter()
        .filter(|(_, _, theirs)| rust_version(theirs).is_some_and(|t| t > ours_numbers))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::release::workspace::Dependency;
    use std::path::PathBuf;

    fn package(
        name: &str,
        version: &str,
        publishable: bool,
        deps: &[(&str, &str, bool)],
    ) -> Package {
        Package {
            name: name.into(),
            version: version.into(),
            publishable,
            manifest: PathBuf::new(),
            has_lib: true,
            has_bins: false,
            test_targets: Vec::new(),
            dependencies: deps
                .iter()
                .map(|(n, req, dev)| Dependency {
                    name: (*n).into(),
                    req: (*req).into(),
                    dev: *dev,
                })
                .collect(),
            missing_fields: Vec::new(),
        }
    }

    #[test]
    fn pins_must_be_exact_agree_with_the_version_and_name_only_published_crates() {
        let good = [
            package(
                "core",
                "0.2.0",
                true,
                &[("core", "*", true), ("serde", "^1", false)],
            ),
            package(
                "core-mcp",
                "0.1.1",
                true,
                &[("core", "=0.2.0", false), ("fixture", "*", true)],
            ),
            package(
                "core-proxy",
                "0.1.0",
                true,
                &[("core", "=0.2.0", false), ("core-mcp", "=0.1.1", false)],
            ),
            package("fixture", "0.0.0", false, &[]),
            package("examples", "0.0.0", false, &[("core", "*", false)]),
        ];
        assert_eq!(pin_problems(&good), Vec::<String>::new());
        assert_eq!(pinned_by(&good, "core"), ["core-mcp", "core-proxy"]);

        let bad = [
            package("core", "0.2.0", true, &[]),
            package(
                "core-mcp",
                "0.1.1",
                true,
                &[("core", "=0.1.0", false), ("fixture", "*", false)],
            ),
            package(
                "core-proxy",
                "0.1.0",
                true,
                &[("core", "^0.2.0", false), ("core-mcp", "=0.1.1", true)],
            ),
            package("fixture", "0.0.0", false, &[]),
        ];
        assert_eq!(
            pin_problems(&bad),
            [
                "core-mcp requires core =0.1.0, not =0.2.0 (its version)",
                "core-mcp depends on fixture, which is not published",
                "core-proxy requires core ^0.2.0, not =0.2.0 (its version)",
            ]
        );
    }

    #[test]
    fn a_published_crate_names_what_crates_io_shows() {
        let mut bare = package("core", "0.1.0", true, &[]);
        bare.missing_fields = vec!["keywords", "categories"];
        let mut unpublished = package("fixture", "0.0.0", false, &[]);
        unpublished.missing_fields = vec!["description"];
        let complete = package("core-cli", "0.1.0", true, &[]);
        assert_eq!(
            metadata_problems(&[bare, unpublished, complete]),
            ["core has no keywords, categories in its manifest"]
        );
    }

    #[test]
    fn every_published_crate_needs_a_section_for_its_version() {
        let packages = [
            package("core", "0.2.0", true, &[]),
            package("core-cli", "0.1.0", true, &[]),
            package("examples", "0.0.0", false, &[]),
        ];
        let log = "## Unreleased\n\n### core 0.2.0\n\n- x\n\n## core-cli 0.0.9 (2026-01-01)\n";
        assert_eq!(
            changelog_problems(log, &packages),
            ["CHANGELOG.md has no `### core-cli 0.1.0` (or released `## core-cli 0.1.0`) section"]
        );
    }

    #[test]
    fn a_dependency_needing_a_newer_rust_is_named() {
        let deps = [
            (
                "rusqlite".to_string(),
                "0.43.0".to_string(),
                "1.89.0".to_string(),
            ),
            ("icu".to_string(), "2.4.0".to_string(), "1.88".to_string()),
            (
                "future".to_string(),
                "1.0.0".to_string(),
                "1.91".to_string(),
            ),
        ];
        let newer = newer_rust("1.89", &deps).unwrap();
        assert_eq!(newer.len(), 1);
        assert_eq!(newer[0].0, "future");
        assert!(newer_rust("one", &deps).is_err());
    }
}
