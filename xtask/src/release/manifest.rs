//! Edits of Cargo.toml files that keep their layout and comments: a
//! crate's own version, and the exact pins (`=x.y.z`) other manifests
//! hold on it.

use toml_edit::{DocumentMut, Item, TableLike, Value};

fn parse(manifest: &str) -> Result<DocumentMut, String> {
    manifest.parse::<DocumentMut>().map_err(|e| e.to_string())
}

/// Replaces a string value, keeping the spaces and comments around it.
fn replace_string(value: &mut Value, text: String) {
    let decor = value.decor().clone();
    *value = Value::from(text);
    *value.decor_mut() = decor;
}

/// The manifest with `[package] version` set to `version`.
pub fn set_package_version(manifest: &str, version: &str) -> Result<String, String> {
    let mut doc = parse(manifest)?;
    let package = doc
        .get_mut("package")
        .and_then(Item::as_table_like_mut)
        .ok_or("no [package] table")?;
    let current = package
        .get_mut("version")
        .and_then(Item::as_value_mut)
        .filter(|v| v.is_str())
        .ok_or("[package] has no version string of its own (a workspace-inherited version is not supported)")?;
    replace_string(current, version.to_owned());
    Ok(doc.to_string())
}

const KINDS: [&str; 3] = ["dependencies", "dev-dependencies", "build-dependencies"];

/// Sets every exact pin on `name` in one dependency table to `=version`.
fn repin_table(table: &mut dyn TableLike, name: &str, version: &str) -> usize {
    let mut changed = 0;
    for (key, entry) in table.iter_mut() {
        let Some(entry) = entry.as_table_like_mut() else {
            continue;
        };
        let package = entry
            .get("package")
            .and_then(Item::as_str)
            .unwrap_or(key.get());
        if package != name {
            continue;
        }
        let Some(pin) = entry.get_mut("version").and_then(Item::as_value_mut) else {
            continue;
        };
        if pin.as_str().is_some_and(|p| p.starts_with('=')) {
            replace_string(pin, format!("={version}"));
            changed += 1;
        }
    }
    changed
}

/// The manifest with every exact pin on `name` (in `[dependencies]` and
/// its dev, build, target and workspace forms) moved to `=version`, and
/// how many pins moved.
pub fn repin(manifest: &str, name: &str, version: &str) -> Result<(String, usize), String> {
    let mut doc = parse(manifest)?;
    let mut changed = 0;
    for kind in KINDS {
        if let Some(table) = doc.get_mut(kind).and_then(Item::as_table_like_mut) {
            changed += repin_table(table, name, version);
        }
    }
    if let Some(table) = doc
        .get_mut("workspace")
        .and_then(Item::as_table_like_mut)
        .and_then(|w| w.get_mut("dependencies"))
        .and_then(Item::as_table_like_mut)
    {
        changed += repin_table(table, name, version);
    }
    if let Some(targets) = doc.get_mut("target").and_then(Item::as_table_like_mut) {
        for (_, target) in targets.iter_mut() {
            let Some(target) = target.as_table_like_mut() else {
                continue;
            };
            for kind in KINDS {
                if let Some(table) = target.get_mut(kind).and_then(Item::as_table_like_mut) {
                    changed += repin_table(table, name, version);
                }
            }
        }
    }
    Ok((doc.to_string(), changed))
}

#[cfg(test)]
mod tests {
    use super::{repin, set_package_version};

    #[test]
    fn the_package_version_changes_and_nothing_else() {
        let manifest = "[package]\nname = \"core\"\nversion = \"0.1.0\"  # ours\n\n[dependencies]\nserde = \"1\"\n";
        let bumped = set_package_version(manifest, "0.2.0").unwrap();
        assert_eq!(bumped, manifest.replace("\"0.1.0\"", "\"0.2.0\""));
        let inherited = "[package]\nname = \"core\"\nversion.workspace = true\n";
        assert!(
            set_package_version(inherited, "0.2.0")
                .unwrap_err()
                .contains("version string")
        );
        assert!(
            set_package_version("[lib]\n", "0.2.0")
                .unwrap_err()
                .contains("[package]")
        );
    }

    #[test]
    fn exact_pins_move_wherever_they_are_and_other_requirements_stay() {
        let manifest = r#"[workspace.dependencies]
core = { path = "crates/core", version = "=0.1.0" }
core-cli = { path = "crates/core-cli", version = "=0.1.0" }

[dependencies]
core = { path = "../core", version = "=0.1.0" }
renamed = { package = "core", version = "=0.1.0" }
loose = { package = "core", version = "0.1" }

[dev-dependencies]
core = { path = "../core" }

[target.'cfg(unix)'.dependencies.core]
version = "=0.1.0"
"#;
        let (moved, count) = repin(manifest, "core", "0.2.0").unwrap();
        assert_eq!(count, 4);
        assert_eq!(
            moved,
            manifest
                .replace(
                    "version = \"=0.1.0\" }\ncore-cli",
                    "version = \"=0.2.0\" }\ncore-cli"
                )
                .replace(
                    "\"../core\", version = \"=0.1.0\"",
                    "\"../core\", version = \"=0.2.0\""
                )
                .replace(
                    "\"core\", version = \"=0.1.0\"",
                    "\"core\", version = \"=0.2.0\""
                )
                .replace(
                    "dependencies.core]\nversion = \"=0.1.0\"",
                    "dependencies.core]\nversion = \"=0.2.0\""
                )
        );
        assert!(moved.contains("core-cli = { path = \"crates/core-cli\", version = \"=0.1.0\" }"));
        assert!(moved.contains("loose = { package = \"core\", version = \"0.1\" }"));
    }
}
