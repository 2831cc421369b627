//! The workspace's packages as `cargo metadata` describes them.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// One dependency of a workspace package, by the depended-on package's
/// name (not a rename).
#[derive(Debug, Clone)]
pub struct Dependency {
    pub name: String,
    /// The version requirement, `*` when only a path is given.
    pub req: String,
    pub dev: bool,
}

/// One workspace package.
#[derive(Debug, Clone)]
pub struct Package {
    pub name: String,
    pub version: String,
    /// False for `publish = false` (or an empty registry list).
    pub publishable: bool,
    pub manifest: PathBuf,
    pub has_lib: bool,
    pub has_bins: bool,
    /// The names of its integration test targets (`tests/*.rs`).
    pub test_targets: Vec<String>,
    pub dependencies: Vec<Dependency>,
    /// The crates.io fields this package leaves empty, of those a user
    /// finds it by (description, license, repository, readme, keywords,
    /// categories).
    pub missing_fields: Vec<&'static str>,
}

impl Package {
    /// The tag a release of this version gets.
    pub fn tag(&self) -> String {
        tag(&self.name, &self.version)
    }
}

/// The tag of a crate's release: `CRATE-vVERSION`.
pub fn tag(name: &str, version: &str) -> String {
    format!("{name}-v{version}")
}

impl Dependency {
    /// A dev-dependency given by path alone: `cargo package` drops it, so
    /// it pins nothing.
    pub fn is_dropped_from_package(&self) -> bool {
        self.dev && self.req == "*"
    }
}

/// `cargo metadata` in `root`, as JSON.
pub fn metadata(root: &Path, extra: &[&str]) -> Result<Value, String> {
    let mut args = vec!["metadata", "--format-version", "1"];
    args.extend(extra);
    let out = crate::capture(crate::cargo_path(), &args, root)?;
    serde_json::from_str(&out).map_err(|e| format!("cargo metadata's output: {e}"))
}

fn text(value: &Value, key: &str) -> Result<String, String> {
    value
        .get(key)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| format!("cargo metadata: no {key:?} in {value}"))
}

fn package(value: &Value) -> Result<Package, String> {
    // `publish` is null for "anywhere" and a list of registries otherwise.
    let publishable = value
        .get("publish")
        .and_then(Value::as_array)
        .is_none_or(|registries| !registries.is_empty());
    let has_kind = |wanted: &str| {
        value["targets"].as_array().is_some_and(|targets| {
            targets.iter().any(|t| {
                t["kind"]
                    .as_array()
                    .is_some_and(|kinds| kinds.iter().any(|k| k.as_str() == Some(wanted)))
            })
        })
    };
    let dependencies = value["dependencies"]
        .as_array()
        .map(|deps| {
            deps.iter()
                .map(|d| {
                    Ok(Dependency {
                        name: text(d, "name")?,
                        req: text(d, "req")?,
                        dev: d["kind"].as_str() == Some("dev"),
                    })
                })
                .collect::<Result<Vec<_>, String>>()
        })
        .transpose()?
        .unwrap_or_default();
    let missing_fields = [
        "description",
        "license",
        "repository",
        "readme",
        "keywords",
        "categories",
    ]
    .into_iter()
    .filter(|field| match &value[*field] {
        Value::String(text) => text.trim().is_empty(),
        Value::Array(items) => items.is_empty(),
        _ => true,
    })
    .collect();
    let test_targets = value["targets"]
        .as_array()
        .map(|targets| {
            targets
                .iter()
                .filter(|t| {
                    t["kind"]
                        .as_array()
                        .is_some_and(|kinds| kinds.iter().any(|k| k.as_str() == Some("test")))
                })
                .filter_map(|t| t["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    Ok(Package {
        name: text(value, "name")?,
        version: text(value, "version")?,
        publishable,
        manifest: PathBuf::from(text(value, "manifest_path")?),
        has_lib: has_kind("lib"),
        has_bins: has_kind("bin"),
        test_targets,
        dependencies,
        missing_fields,
    })
}

/// Every package of the workspace at `root`, sorted by name.
pub fn packages(root: &Path) -> Result<Vec<Package>, String> {
    let meta = metadata(root, &["--no-deps"])?;
    let mut packages = meta["packages"]
        .as_array()
        .ok_or("cargo metadata: no packages")?
        .iter()
        .map(package)
        .collect::<Result<Vec<_>, String>>()?;
    packages.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(packages)
}
