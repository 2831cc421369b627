//! `cargo xtask release-check` and `cargo xtask release CRATE VERSION`.
//!
//! Each published crate is released on its own, tagged `CRATE-vVERSION`;
//! a satellite pins the crates it depends on exactly (`=x.y.z`).

mod changelog;
mod check;
mod manifest;
mod version;
mod workspace;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use version::Version;
use workspace::Package;

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// `program args` in `dir`, its stdout when it succeeds.
fn output(program: &str, args: &[&str], dir: &Path) -> Result<String, String> {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(|e| format!("{program}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{program} {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn existing_tags(root: &Path) -> Result<BTreeSet<String>, String> {
    Ok(output("git", &["tag", "--list"], root)?
        .lines()
        .map(str::to_owned)
        .collect())
}

fn cargo_in(root: &Path, args: &[&str], target_dir: Option<&Path>) -> Result<(), String> {
    eprintln!("$ (cd {}) cargo {}", root.display(), args.join(" "));
    let mut command = Command::new(crate::cargo_path());
    command.args(args).current_dir(root);
    if let Some(target) = target_dir {
        command.env("CARGO_TARGET_DIR", target);
    }
    let ok = command.status().is_ok_and(|s| s.success());
    if ok {
        Ok(())
    } else {
        Err(format!("cargo {} failed", args.join(" ")))
    }
}

/// Everything `cargo xtask release-check` checks, in order; every problem
/// of the cheap checks is listed before the packages are built.
pub fn release_check(root: &Path, allow_dirty: bool) -> Result<(), String> {
    let root = &root
        .canonicalize()
        .map_err(|e| format!("{}: {e}", root.display()))?;
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
    problems.extend(msrv_problems(root)?);
    if !problems.is_empty() {
        return Err(format!("release check:\n  {}", problems.join("\n  ")));
    }
    for package in &published {
        let pinned: Vec<&str> = check::pinned_by(&packages, &package.name)
            .iter()
            .map(|p| p.name.as_str())
            .collect();
        if !pinned.is_empty() {
            eprintln!(
                "{} {} is pinned exactly by {}",
                package.name,
                package.version,
                pinned.join(", ")
            );
        }
    }
    build_from_packages(root, &published, allow_dirty)?;
    msrv_build(root)?;
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
    cargo_in(root, &args, None)?;
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
        output("tar", &["xzf", &crate_arg], &staging)?;
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
    let root_manifest: toml_edit::DocumentMut = read(&root.join("Cargo.toml"))?
        .parse()
        .map_err(|e| format!("Cargo.toml: {e}"))?;
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
        if cargo_in(&staging, &args, Some(&target)).is_err() {
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

/// The workspace's `rust-version`, read from the root manifest.
fn workspace_rust_version(root: &Path) -> Result<String, String> {
    let manifest: toml_edit::DocumentMut = read(&root.join("Cargo.toml"))?
        .parse()
        .map_err(|e| format!("Cargo.toml: {e}"))?;
    manifest
        .get("workspace")
        .and_then(|w| w.get("package"))
        .and_then(|p| p.get("rust-version"))
        .and_then(toml_edit::Item::as_str)
        .map(str::to_owned)
        .ok_or_else(|| "Cargo.toml has no [workspace.package] rust-version".into())
}

/// Dependencies (on this platform) that need a newer Rust than ours.
fn msrv_problems(root: &Path) -> Result<Vec<String>, String> {
    let ours = workspace_rust_version(root)?;
    let host = output("rustc", &["-vV"], root)?
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
    Ok(check::newer_rust(&ours, &dependencies)?
        .into_iter()
        .map(|(name, version, theirs)| {
            format!("{name} {version} needs Rust {theirs}, newer than our rust-version {ours}")
        })
        .collect())
}

/// `cargo check` of the workspace with the toolchain our `rust-version`
/// names, when rustup has it; otherwise says what was checked instead.
fn msrv_build(root: &Path) -> Result<(), String> {
    let ours = workspace_rust_version(root)?;
    let toolchains = output("rustup", &["toolchain", "list"], root).unwrap_or_default();
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

/// Today's date (UTC) as YYYY-MM-DD, from the system clock.
pub fn today() -> String {
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    civil_date(seconds / 86_400)
}

/// A day count since 1970-01-01 as a proleptic Gregorian date.
fn civil_date(days: u64) -> String {
    // Days since 0000-03-01, in 400-year eras of 146 097 days.
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// `cargo xtask release CRATE VERSION`: the crate's version, the exact pins
/// other manifests hold on it, its changelog section and the lock file, in
/// a clean working tree; nothing is committed or tagged.
pub fn release(root: &Path, name: &str, version: &str, date: &str) -> Result<(), String> {
    let new = Version::parse(version)?;
    let packages = workspace::packages(root)?;
    let package = packages
        .iter()
        .find(|p| p.name == name)
        .ok_or_else(|| format!("no package {name:?} in the workspace"))?;
    if !package.publishable {
        return Err(format!("{name} is not published (publish = false)"));
    }
    let dirty = output("git", &["status", "--porcelain"], root)?;
    if !dirty.trim().is_empty() {
        return Err(format!(
            "the working tree has uncommitted changes; commit or stash them first:\n{dirty}"
        ));
    }
    let current = Version::parse(&package.version)?;
    let tags = existing_tags(root)?;
    let current_released = tags.contains(&package.tag());
    let new_tag = format!("{name}-v{new}");
    if tags.contains(&new_tag) {
        return Err(format!("{new_tag} is already tagged"));
    }
    if new < current || (new == current && current_released) {
        return Err(format!(
            "{name} is at {current}{}; a release needs a newer version than {version}",
            if current_released { " (released)" } else { "" }
        ));
    }
    let new_text = new.to_string();
    let changelog_path = root.join("CHANGELOG.md");
    let changelog_text =
        changelog::release_section(&read(&changelog_path)?, name, &new_text, date)?;
    // Every edit is made in memory first: a refusal leaves the tree as it was.
    let mut edits = Vec::new();
    if new != current {
        edits.push((
            package.manifest.clone(),
            manifest::set_package_version(&read(&package.manifest)?, &new_text)
                .map_err(|e| format!("{}: {e}", package.manifest.display()))?,
        ));
    }
    let mut manifests = vec![root.join("Cargo.toml")];
    for package in &packages {
        if !manifests.contains(&package.manifest) {
            manifests.push(package.manifest.clone());
        }
    }
    let mut moved = 0;
    for path in manifests {
        let text = match edits.iter().find(|(p, _)| *p == path) {
            Some((_, text)) => text.clone(),
            None => read(&path)?,
        };
        let (repinned, count) = manifest::repin(&text, name, &new_text)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if count > 0 {
            moved += count;
            edits.retain(|(p, _)| *p != path);
            edits.push((path, repinned));
        }
    }
    for (path, text) in &edits {
        write(path, text)?;
    }
    write(&changelog_path, &changelog_text)?;
    if new != current {
        // The lock names each workspace package's version.
        cargo_in(root, &["update", "--workspace", "--offline"], None)?;
    }
    println!(
        "{name} {current} -> {new}: {moved} exact pin(s) moved, CHANGELOG.md section `## {name} {new} ({date})`"
    );
    let dependents: Vec<&str> = check::pinned_by(&packages, name)
        .iter()
        .map(|p| p.name.as_str())
        .collect();
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
