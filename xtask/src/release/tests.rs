//! `release` over a small workspace of its own, in a git repository.

use std::path::Path;
use std::process::Command;

use super::release;

fn write(root: &Path, path: &str, text: &str) {
    let path = root.join(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn git(root: &Path, args: &[&str]) {
    let status = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .current_dir(root)
        .output()
        .unwrap();
    assert!(status.status.success(), "git {args:?}: {status:?}");
}

fn read(root: &Path, path: &str) -> String {
    std::fs::read_to_string(root.join(path)).unwrap()
}

const CHANGELOG: &str = "# Changelog

## Unreleased

### core

- a core change

### core-sat

- a satellite change
";

/// A core, a satellite pinning it through the workspace, a tool pinning it
/// directly, and an unpublished example; committed, lock included.
fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        "Cargo.toml",
        r#"[workspace]
resolver = "3"
members = ["crates/*"]

[workspace.dependencies]
core = { path = "crates/core", version = "=0.1.0" }
"#,
    );
    write(
        root,
        "crates/core/Cargo.toml",
        "[package]\nname = \"core\"\nversion = \"0.1.0\"\nedition = \"2024\"\n",
    );
    write(
        root,
        "crates/core-sat/Cargo.toml",
        "[package]\nname = \"core-sat\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n[dependencies]\ncore.workspace = true\n",
    );
    write(
        root,
        "crates/core-tool/Cargo.toml",
        "[package]\nname = \"core-tool\"\nversion = \"0.3.0\"\nedition = \"2024\"\n\n[dependencies]\ncore = { path = \"../core\", version = \"=0.1.0\" }  # exact\n",
    );
    write(
        root,
        "crates/example/Cargo.toml",
        "[package]\nname = \"example\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n",
    );
    for krate in ["core", "core-sat", "core-tool", "example"] {
        write(root, &format!("crates/{krate}/src/lib.rs"), "");
    }
    write(root, "CHANGELOG.md", CHANGELOG);
    write(root, ".gitignore", "target/\n");
    let generated = Command::new(crate::cargo_path())
        .args(["generate-lockfile", "--offline"])
        .current_dir(root)
        .status()
        .unwrap();
    assert!(generated.success());
    git(root, &["init", "-q"]);
    git(root, &["add", "."]);
    git(root, &["commit", "-q", "-m", "start"]);
    dir
}

#[test]
fn a_release_bumps_the_crate_its_pins_its_changelog_section_and_the_lock() {
    let dir = workspace();
    let root = dir.path();
    release(root, "core", "0.2.0", "2026-12-02").unwrap();
    assert!(read(root, "crates/core/Cargo.toml").contains("version = \"0.2.0\""));
    assert!(
        read(root, "Cargo.toml")
            .contains("core = { path = \"crates/core\", version = \"=0.2.0\" }")
    );
    assert!(
        read(root, "crates/core-tool/Cargo.toml")
            .contains("core = { path = \"../core\", version = \"=0.2.0\" }  # exact")
    );
    assert!(read(root, "crates/core-tool/Cargo.toml").contains("version = \"0.3.0\""));
    assert_eq!(
        read(root, "CHANGELOG.md"),
        "# Changelog

## Unreleased

### core-sat

- a satellite change

## core 0.2.0 (2026-12-02)

- a core change
"
    );
    let lock = read(root, "Cargo.lock");
    assert!(
        lock.contains("name = \"core\"\nversion = \"0.2.0\""),
        "{lock}"
    );
    // The tree the release left is one a satellite can release from next.
    git(root, &["commit", "-q", "-am", "core 0.2.0"]);
    git(root, &["tag", "core-v0.2.0"]);
    let again = release(root, "core", "0.2.0", "2026-12-02").unwrap_err();
    assert!(again.contains("already tagged"), "{again}");
}

#[test]
fn a_first_release_keeps_the_version_and_a_tagged_one_needs_a_newer() {
    let dir = workspace();
    let root = dir.path();
    release(root, "core-sat", "0.1.0", "2026-12-02").unwrap();
    assert!(
        read(root, "CHANGELOG.md")
            .contains("\n## core-sat 0.1.0 (2026-12-02)\n\n- a satellite change\n")
    );
    assert!(read(root, "crates/core-sat/Cargo.toml").contains("version = \"0.1.0\""));
    git(root, &["commit", "-q", "-am", "core-sat 0.1.0"]);
    git(root, &["tag", "core-sat-v0.1.0"]);
    let refused = release(root, "core-sat", "0.1.0", "2026-12-03").unwrap_err();
    assert!(refused.contains("already tagged"), "{refused}");
    let refused = release(root, "core-sat", "0.0.9", "2026-12-03").unwrap_err();
    assert!(refused.contains("needs a newer version"), "{refused}");
    let more = read(root, "CHANGELOG.md").replacen(
        "## Unreleased\n\n",
        "## Unreleased\n\n### core-sat\n\n- more\n\n",
        1,
    );
    write(root, "CHANGELOG.md", &more);
    git(root, &["commit", "-q", "-am", "more"]);
    release(root, "core-sat", "0.1.1", "2026-12-03").unwrap();
    let log = read(root, "CHANGELOG.md");
    assert!(
        log.contains(
            "\n## core-sat 0.1.1 (2026-12-03)\n\n- more\n\n## core-sat 0.1.0 (2026-12-02)\n"
        ),
        "{log}"
    );
}

#[test]
fn a_dirty_tree_a_bad_version_or_an_unpublished_crate_is_refused_and_nothing_changes() {
    let dir = workspace();
    let root = dir.path();
    write(root, "crates/core/src/lib.rs", "// uncommitted\n");
    let dirty = release(root, "core", "0.2.0", "2026-12-02").unwrap_err();
    assert!(dirty.contains("uncommitted changes"), "{dirty}");
    git(root, &["checkout", "-q", "--", "."]);
    for bad in ["0.2", "1.2.3.4", "01.2.3", "1.x.3", "1.2.3-", "1.2.3-a..b"] {
        let refused = release(root, "core", bad, "d").unwrap_err();
        assert!(refused.contains("not a version"), "{bad}: {refused}");
    }
    let build = release(root, "core", "0.2.0+b", "d").unwrap_err();
    assert!(build.contains("build metadata"), "{build}");
    assert!(
        release(root, "example", "0.1.0", "d")
            .unwrap_err()
            .contains("not published")
    );
    assert!(
        release(root, "nope", "0.1.0", "d")
            .unwrap_err()
            .contains("no package")
    );
    let nothing = release(root, "core-tool", "0.4.0", "d").unwrap_err();
    assert!(nothing.contains("no `### core-tool` section"), "{nothing}");
    let status = Command::new("git")
        .args(["status", "--porcelain"])
        .current_dir(root)
        .output()
        .unwrap();
    assert!(
        status.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&status.stdout)
    );
}
