//! `cargo xtask release-check` and `cargo xtask release CRATE VERSION`.
//!
//! Each published crate is released on its own, tagged `CRATE-vVERSION`;
//! a satellite pins the crates it depends on exactly (`=x.y.z`).

mod changelog;
mod check;
mod manifest;
pub(crate) mod workspace;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use semver::Version;
use workspace::{Package, tag};

use crate::capture;

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

fn existing_tags(root: &Path) -> Result<BTreeSet<String>, String> {
    Ok(capture("git", &["tag", "--list"], root)?
        .lines()
        .map(str::to_owned)
        .collect())
}

fn cargo(dir: &Path, args: &[&str], env: Option<(&str, &Path)>) -> Result<(), String> {
    if crate::cargo_in(
        dir,
        args,
        &env.map(|(name, value)| (name, value.as_os_str()))
            .into_iter()
            .collect::<Vec<_>>(),
    ) {
        Ok(())
    } else {
        Err(format!("cargo {} failed", args.join(" ")))
    }
}

/// The root manifest and the `rust-version` it gives the workspace.
fn root_manifest(root: &Path) -> Result<(toml_edit::DocumentMut, String), String> {
    let manifest: toml_edit::DocumentMut = read(&root.join("Cargo.toml"))?
        .parse()
        .map_err(|e| format!("Cargo.toml: {e}"))?;
    let rust_version = manifest
        .get("workspace")
        .and_then(|w| w.get("package"))
        .and_then(|p| p.get("rust-version"))
        .and_then(toml_edit::Item::as_str)
        .map(str::to_owned)
        .ok_or("Cargo.toml has no [workspace.package] rust-version")?;
    Ok((manifest, rust_version))
}

/// Everything `cargo xtask release-check` checks, in order; every problem
/// of the cheap checks is listed before the packages are built.
pub fn release_check(root: &Path, allow_dirty: bool) -> Result<(), String> {
    let root = &root
        .canonicalize()
        .map_err(|e| format!("{}: {e}", root.display()))?;
    let (manifest, rust_version) = root_manifest(root)?;
    let packages = workspace::packages(root)?;
    let published: Vec<&Package> = packages.iter().filter(|p| p.publishable).collect();
    if published.is_empty() {
        return Err("no publishable package in the workspace".into());
    }
    let mut problems = check::metadata_problems(&packages);
    problems.extend(check::pin_problems(&packages));
    problems.extend(check::changelog_problems(
        &read(&root.join("CHANGELOG.md"))?,
        &packages,
    ));
    problems.extend(msrv_problems(root, &rust_version)?);
    if !problems.is_empty() {
        return Err(format!("release check:\n  {}", problems.join("\n  ")));
    }
    for package in &published {
        let pinned = check::pinned_by(&packages, &package.name);
        if !pinned.is_empty() {
            eprintln!(
                "{} {} is pinned exactly by {}",
                package.name,
                package.version,
                pinned.join(", ")
            );
        }
    }
    build_from_packages(root, &manifest, &published, allow_dirty)?;
    msrv_build(root, &rust_version)?;
    let tags = existing_tags(root)?;
    println!("release check passed; the tags a release of each crate at its version gets:");
    for package in &published {
        let tag = package.tag();
        let state = if tags.contains(&tag) {
            "exists"
        } else {
            "would be created"
        };
        println!("  {tag}  ({state})");
    }
    Ok(())
}

/// `cargo package` of every published crate, then each one built and its
/// unit tests (library and binaries) run from the unpacked package alone:
/// a throwaway workspace of the packages in `target/release-check`, where
/// a crate's dependency on another of ours resolves to that crate's
/// package, never to the checkout. Each crate is tested on its own, so its
/// dependencies get only the features it asks for.
fn build_from_packages(
    root: &Path,
    root_manifest: &toml_edit::DocumentMut,
    published: &[&Package],
    allow_dirty: bool,
) -> Result<(), String> {
    let mut args = vec!["package", "--no-verify"];
    if allow_dirty {
        args.push("--allow-dirty");
    }
    for package in published {
        args.extend(["-p", package.name.as_str()]);
    }
    cargo(root, &args, None)?;
    let target = root.join("target");
    let staging = target.join("release-check");
    if staging.exists() {
        std::fs::remove_dir_all(&staging).map_err(|e| format!("{}: {e}", staging.display()))?;
    }
    std::fs::create_dir_all(&staging).map_err(|e| format!("{}: {e}", staging.display()))?;
    let mut members = toml_edit::Array::new();
    let mut patches = toml_edit::Table::new();
    for package in published {
        let dir = format!("{}-{}", package.name, package.version);
        let crate_file = target.join("package").join(format!("{dir}.crate"));
        let crate_arg = crate_file.to_string_lossy().into_owned();
        // `m`: the files get the time of extraction, not the package's
        // fixed one, so cargo rebuilds what an earlier check built from
        // other sources of the same version.
        capture("tar", &["xzmf", &crate_arg], &staging)?;
        let mut patch = toml_edit::InlineTable::new();
        patch.insert("path", dir.as_str().into());
        patches.insert(&package.name, toml_edit::value(patch));
        members.push(dir);
    }
    let mut ws = toml_edit::DocumentMut::new();
    let mut workspace = toml_edit::Table::new();
    workspace.insert("resolver", toml_edit::value("3"));
    workspace.insert("members", toml_edit::value(members));
    ws.insert("workspace", toml_edit::Item::Table(workspace));
    let mut patch = toml_edit::Table::new();
    patch.set_implicit(true);
    patch.insert("crates-io", toml_edit::Item::Table(patches));
    ws.insert("patch", toml_edit::Item::Table(patch));
    // The checkout's profiles, so dependencies built for the workspace are
    // reused from the shared target directory.
    if let Some(profile) = root_manifest.get("profile") {
        ws.insert("profile", profile.clone());
    }
    write(&staging.join("Cargo.toml"), &ws.to_string())?;
    // The checkout's lock: the packages build with the versions CI tested.
    std::fs::copy(root.join("Cargo.lock"), staging.join("Cargo.lock"))
        .map_err(|e| format!("Cargo.lock: {e}"))?;
    let mut failed = Vec::new();
    for package in published {
        let mut args = vec!["test", "-p", package.name.as_str()];
        if package.has_lib {
            args.push("--lib");
        }
        if package.has_bins {
            args.push("--bins");
        }
        if cargo(&staging, &args, Some(("CARGO_TARGET_DIR", &target))).is_err() {
            failed.push(package.name.as_str());
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "built from its package, the unit tests of {} failed (target/release-check holds the packages)",
            failed.join(", ")
        ))
    }
}

/// Dependencies (on this platform) that need a newer Rust than ours.
fn msrv_problems(root: &Path, ours: &str) -> Result<Vec<String>, String> {
    let host = capture("rustc", &["-vV"], root)?
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_owned))
        .ok_or("rustc -vV names no host")?;
    let meta = workspace::metadata(root, &["--filter-platform", &host])?;
    let members: BTreeSet<&str> = meta["workspace_members"]
        .as_array()
        .map(|m| m.iter().filter_map(|id| id.as_str()).collect())
        .unwrap_or_default();
    let dependencies: Vec<(String, String, String)> = meta["packages"]
        .as_array()
        .ok_or("cargo metadata: no packages")?
        .iter()
        .filter(|p| !p["id"].as_str().is_some_and(|id| members.contains(id)))
        .filter_map(|p| {
            Some((
                p["name"].as_str()?.to_owned(),
                p["version"].as_str()?.to_owned(),
                p["rust_version"].as_str()?.to_owned(),
            ))
        })
        .collect();
    Ok(check::newer_rust(ours, &dependencies)?
        .into_iter()
        .map(|(name, version, theirs)| {
            format!("{name} {version} needs Rust {theirs}, newer than our rust-version {ours}")
        })
        .collect())
}

/// `cargo check` of the workspace with the toolchain our `rust-version`
/// names, when rustup has it; otherwise says what was checked instead.
fn msrv_build(root: &Path, ours: &str) -> Result<(), String> {
    let toolchains = capture("rustup", &["toolchain", "list"], root).unwrap_or_default();
    let installed = toolchains.lines().find_map(|line| {
        let name = line.split_whitespace().next()?;
        let version = name.split('-').next()?;
        (version == ours || version == format!("{ours}.0")).then(|| name.to_owned())
    });
    match installed {
        Some(toolchain) => {
            let target = root.join("target/msrv");
            eprintln!(
                "$ CARGO_TARGET_DIR={} rustup run {toolchain} cargo check --workspace --all-targets",
                target.display()
            );
            let ok = Command::new("rustup")
                .args([
                    "run",
                    &toolchain,
                    "cargo",
                    "check",
                    "--workspace",
                    "--all-targets",
                ])
                .current_dir(root)
                .env("CARGO_TARGET_DIR", &target)
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                return Err(format!(
                    "the workspace does not build with Rust {ours}, its rust-version"
                ));
            }
            eprintln!("MSRV: the workspace builds with Rust {ours} ({toolchain})");
        }
        None => eprintln!(
            "MSRV: no Rust {ours} toolchain here (`rustup toolchain install {ours}` to build with it); \
             checked instead: no dependency declares a newer rust-version, and clippy's \
             incompatible_msrv lint holds our use of the standard library to {ours}"
        ),
    }
    Ok(())
}

/// Today's date (UTC) as YYYY-MM-DD.
pub fn today() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%d").to_string()
}

/// `cargo xtask release CRATE VERSION`: the crate's version, the exact pins
/// other manifests hold on it, its changelog section and the lock file, in
/// a clean working tree; nothing is committed or tagged.
pub fn release(root: &Path, name: &str, version: &str, date: &str) -> Result<(), String> {
    let new = Version::parse(version)
        .map_err(|e| format!("{version:?} is not a version (MAJOR.MINOR.PATCH[-PRE]): {e}"))?;
    if !new.build.is_empty() {
        return Err(format!(
            "{version:?}: build metadata is not allowed (crates.io ignores it when comparing)"
        ));
    }
    let packages = workspace::packages(root)?;
    let package = packages
        .iter()
        .find(|p| p.name == name)
        .ok_or_else(|| format!("no package {name:?} in the workspace"))?;
    if !package.publishable {
        return Err(format!("{name} is not published (publish = false)"));
    }
    let dirty = capture("git", &["status", "--porcelain"], root)?;
    if !dirty.trim().is_empty() {
        return Err(format!(
            "the working tree has uncommitted changes; commit or stash them first:\n{dirty}"
        ));
    }
    let current = Version::parse(&package.version).map_err(|e| format!("{name}'s version: {e}"))?;
    let tags = existing_tags(root)?;
    let current_released = tags.contains(&package.tag());
    let new_text = new.to_string();
    let new_tag = tag(name, &new_text);
    if tags.contains(&new_tag) {
        return Err(format!("{new_tag} is already tagged"));
    }
    if new < current || (new == current && current_released) {
        return Err(format!(
            "{name} is at {current}{}; a release needs a newer version than {version}",
            if current_released { " (released)" } else { "" }
        ));
    }
    let changelog_path = root.join("CHANGELOG.md");
    let changelog_text =
        changelog::release_section(&read(&changelog_path)?, name, &new_text, date)?;
    // Every edit is made in memory first: a refusal leaves the tree as it was.
    let mut manifests = vec![root.join("Cargo.toml")];
    for package in &packages {
        if !manifests.contains(&package.manifest) {
            manifests.push(package.manifest.clone());
        }
    }
    let mut edits = Vec::new();
    let mut moved = 0;
    for path in manifests {
        let before = read(&path)?;
        let edited = |text: &str| -> Result<(String, usize), String> {
            let text = if path == package.manifest {
                manifest::set_package_version(text, &new_text)?
            } else {
                text.to_owned()
            };
            manifest::repin(&text, name, &new_text)
        };
        let (after, count) = edited(&before).map_err(|e| format!("{}: {e}", path.display()))?;
        moved += count;
        if after != before {
            edits.push((path, after));
        }
    }
    for (path, text) in &edits {
        write(path, text)?;
    }
    write(&changelog_path, &changelog_text)?;
    if new != current {
        // The lock names each workspace package's version.
        cargo(root, &["update", "--workspace", "--offline"], None)?;
    }
    println!(
        "{name} {current} -> {new}: {moved} exact pin(s) moved, CHANGELOG.md section `## {name} {new} ({date})`"
    );
    let dependents = check::pinned_by(&packages, name);
    if !dependents.is_empty() {
        println!(
            "now pinned at ={new} by {}: each needs a release of its own to ship against it",
            dependents.join(", ")
        );
    }
    println!(
        "next: review `git diff`, commit, `cargo xtask release-check`, then\n  git tag {new_tag} && cargo publish -p {name}"
    );
    Ok(())
}

#[cfg(test)]
mod tests;
