//! The configuration file (design §29): one JSON object, read only when
//! private to its owner, that passes the core's boundary check first (no
//! repeated key, no trailing data), with unknown fields refused at every
//! level. Relative paths resolve against the file's directory; durations
//! are strings in Go's syntax.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use agentrt::{Canonical, Durability, Outcome, SideEffect};
use agentrt_mcp::{Endpoint, Rule, RuleEntry, Server, parse_duration, read_private};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::database::{Database, is_postgres_url};
use crate::error::ProxyError;
use crate::oauth::OAuthConfig;

/// How long a call waits for its approval by default.
pub const DEFAULT_HOLD: Duration = Duration::from_secs(15);
/// The window of the rejected/expired and duplicate rules by default.
pub const DEFAULT_REPEAT_WINDOW: Duration = Duration::from_secs(600);
/// How many approvals a session may have waiting by default.
pub const DEFAULT_MAX_PENDING: u32 = 5;
/// Pending approvals and grants expire after a day by default.
pub const DEFAULT_TTL: Duration = Duration::from_secs(24 * 3600);
/// The status tool's name by default.
pub const DEFAULT_STATUS_TOOL: &str = "gate_status";
/// A run's lease by default (the core's).
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(30);
/// The shortest lease: it is renewed every third of it.
pub const MIN_LEASE_TTL: Duration = Duration::from_secs(3);

/// The proxy's configuration, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The configuration file, as given.
    pub path: PathBuf,
    /// The database: a SQLite file (resolved against the file's
    /// directory), or a `postgres://` URL.
    pub database: Database,
    /// How hard each commit works to survive a crash of the machine
    /// (`"durability": "full"`, the default, or `"normal"`; a SQLite file
    /// only): see [`agentrt::Durability`].
    pub durability: Durability,
    /// The session: the first part of every run id.
    pub session: String,
    /// The upstream servers, in the file's order.
    pub servers: Vec<ServerConfig>,
    /// The outcome of each side-effect class (every class present).
    pub policy: BTreeMap<SideEffect, Outcome>,
    /// A Cedar policy file (`"policy": {"cedar": FILE}`, resolved against
    /// the configuration's directory) that decides every call in place of
    /// the class outcomes.
    pub cedar: Option<PathBuf>,
    /// A Cedar policy file asked beside the policy on every call
    /// (`"policy": {"shadow": FILE}`): its disagreements are recorded,
    /// nothing it says changes an outcome.
    pub shadow: Option<PathBuf>,
    /// Windows over which each call's earlier calls of its tool by the
    /// session are counted for the Cedar policies (`"policy": {"windows":
    /// {"hour": "1h"}}` gives `context.recent.hour`).
    pub windows: BTreeMap<String, Duration>,
    /// How long a call waits for its approval (zero: answers at once).
    pub hold: Duration,
    /// The window of the rejected/expired and duplicate rules (zero: off).
    pub repeat_window: Duration,
    /// Approvals the session may have waiting.
    pub max_pending: u32,
    /// When a pending approval expires (zero: never).
    pub approval_ttl: Duration,
    /// When a granted approval expires unused (zero: never).
    pub grant_ttl: Duration,
    /// The status tool's name.
    pub status_tool: String,
    /// A run's lease.
    pub lease_ttl: Duration,
    /// The OAuth access tokens `serve --http` admits in place of the
    /// bearer token file (`"oauth": {...}`); the caller a token names is
    /// recorded with each call's run.
    pub oauth: Option<OAuthConfig>,
}

/// One upstream server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// How to reach it (the MCP adapter's description).
    pub server: Server,
    /// Its manifest (resolved against the file's directory).
    pub manifest: PathBuf,
    /// The operator's rules, by the server's own tool name.
    pub rules: BTreeMap<String, ProxyRule>,
    /// Skip the reach check of its command's arguments.
    pub skip_path_check: bool,
}

/// A rule as the proxy reads it: the MCP adapter's rule, the tool's own
/// outcome in place of its class's, and its own repeat window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyRule {
    /// The adapter's rule.
    pub rule: Rule,
    /// This tool's outcome, in place of the policy's for its class.
    pub outcome: Option<Outcome>,
    /// This tool's repeat window, in place of the session's.
    pub repeat_window: Option<Duration>,
    /// How many distinct people must approve a call of this tool that
    /// needs approval (1, or 2: design §46).
    pub approvers: u8,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile<'a> {
    database: String,
    durability: Option<String>,
    session: String,
    #[serde(borrow)]
    servers: Vec<ServerFile<'a>>,
    #[serde(default, borrow)]
    policy: BTreeMap<String, &'a RawValue>,
    hold: Option<String>,
    repeat_window: Option<String>,
    max_pending: Option<i64>,
    approval_ttl: Option<String>,
    grant_ttl: Option<String>,
    status_tool: Option<String>,
    lease_ttl: Option<String>,
    #[serde(borrow)]
    oauth: Option<&'a RawValue>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerFile<'a> {
    name: String,
    command: Option<Vec<String>>,
    endpoint: Option<String>,
    #[serde(default)]
    env: Vec<String>,
    #[serde(default)]
    inherit_env: Vec<String>,
    connect_timeout: Option<String>,
    default_timeout: Option<String>,
    manifest: String,
    #[serde(default, borrow)]
    rules: BTreeMap<String, RuleFile<'a>>,
    #[serde(default)]
    skip_path_check: bool,
}

/// The adapter's rule fields (see [`RuleEntry`]) and the proxy's own.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile<'a> {
    side_effect: String,
    timeout: Option<String>,
    #[serde(default)]
    terminal: bool,
    description: Option<String>,
    #[serde(default)]
    deny: Vec<String>,
    #[serde(default, borrow)]
    fixed: BTreeMap<String, &'a RawValue>,
    rename: Option<String>,
    #[serde(default)]
    allow_hint_mismatch: bool,
    outcome: Option<String>,
    repeat_window: Option<String>,
    approvers: Option<i64>,
}

/// Reads the configuration file at `path` (private to its owner).
pub fn read_config(path: &Path) -> Result<Config, ProxyError> {
    let bytes = read_private(path)?;
    parse_config(&bytes, path)
}

/// Parses a configuration file's bytes; `path` names the file in errors
/// and is where relative paths resolve from.
///
/// ```
/// use std::path::Path;
/// use agentrt::{Outcome, SideEffect};
/// use agentrt_proxy::parse_config;
///
/// let config = parse_config(br#"{
///   "database": "proxy.db",
///   "session": "laptop",
///   "policy": {"local_mutation": "require_approval"},
///   "servers": [{"name": "fs", "command": ["node", "server.js", "/srv"],
///                "manifest": "fs.manifest.json",
///                "rules": {"read_file": {"side_effect": "read_only", "timeout": "5s"}}}]
/// }"#, Path::new("/etc/agentrt/proxy.json"))?;
/// assert_eq!(config.database.file(), Some(Path::new("/etc/agentrt/proxy.db")));
/// assert_eq!(config.policy[&SideEffect::LocalMutation], Outcome::RequireApproval);
/// assert_eq!(config.policy[&SideEffect::Destructive], Outcome::Deny);
/// # Ok::<(), agentrt_proxy::ProxyError>(())
/// ```
pub fn parse_config(bytes: &[u8], path: &Path) -> Result<Config, ProxyError> {
    let bad = |detail: String| ProxyError::Config {
        path: path.to_owned(),
        detail,
    };
    let canonical = Canonical::parse(bytes).map_err(|e| bad(e.to_string()))?;
    if !canonical.is_object() {
        return Err(bad("the file must hold one JSON object".into()));
    }
    let file: ConfigFile<'_> =
        serde_json::from_str(canonical.as_str()).map_err(|e| bad(e.to_string()))?;
    let base = path.parent().unwrap_or(Path::new(""));
    config_from(file, path, base).map_err(bad)
}

fn duration(field: &str, text: Option<&str>, default: Duration) -> Result<Duration, String> {
    match text {
        None => Ok(default),
        Some(t) => parse_duration(t).map_err(|e| format!("{field}: {e}")),
    }
}

/// Whether `name` is 1 to 64 of `[A-Za-z0-9_-]`.
fn is_plain_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The outcomes the proxy's policy may give (`abort` ends a run, which
/// one call per run makes meaningless).
fn outcome(text: &str) -> Result<Outcome, String> {
    match Outcome::parse(text) {
        Some(o @ (Outcome::Allow | Outcome::RequireApproval | Outcome::Deny)) => Ok(o),
        _ => Err(format!(
            "outcome {text:?} is not one of allow, require_approval, deny"
        )),
    }
}

fn class(text: &str) -> Result<SideEffect, String> {
    SideEffect::parse(text).ok_or_else(|| {
        format!(
            "class {text:?} is not one of read_only, local_mutation, remote_mutation, destructive"
        )
    })
}

/// The core's default policy as a class map.
pub fn default_policy() -> BTreeMap<SideEffect, Outcome> {
    BTreeMap::from([
        (SideEffect::ReadOnly, Outcome::Allow),
        (SideEffect::LocalMutation, Outcome::Allow),
        (SideEffect::RemoteMutation, Outcome::RequireApproval),
        (SideEffect::Destructive, Outcome::Deny),
    ])
}

fn resolve(base: &Path, text: &str) -> PathBuf {
    let path = Path::new(text);
    if path.is_absolute() {
        path.to_owned()
    } else {
        base.join(path)
    }
}

/// What the configuration's `"policy"` object says.
struct PolicyFile {
    policy: BTreeMap<SideEffect, Outcome>,
    cedar: Option<PathBuf>,
    shadow: Option<PathBuf>,
    windows: BTreeMap<String, Duration>,
}

/// Reads `"policy"`: the class outcomes, or a Cedar file (with no outcome
/// beside it, in the object or a rule), a shadow file and windows.
fn policy_from(
    entries: &BTreeMap<String, &RawValue>,
    servers: &[ServerFile<'_>],
    base: &Path,
) -> Result<PolicyFile, String> {
    let mut policy = default_policy();
    let (mut cedar, mut shadow, mut windows) = (None, None, BTreeMap::new());
    let mut classes = Vec::new();
    for (name, raw) in entries {
        if name == "windows" {
            let given: BTreeMap<String, String> =
                serde_json::from_str(raw.get()).map_err(|_| {
                    "policy: windows: an object of window names and durations".to_owned()
                })?;
            if given.is_empty() {
                return Err("policy: windows: name at least one".into());
            }
            for (window, text) in given {
                let d = duration(
                    &format!("policy: windows: {window}"),
                    Some(&text),
                    Duration::ZERO,
                )?;
                if d.is_zero() {
                    return Err(format!("policy: windows: {window}: longer than 0s"));
                }
                windows.insert(window, d);
            }
            continue;
        }
        let text: String =
            serde_json::from_str(raw.get()).map_err(|_| format!("policy: {name}: a string"))?;
        if name == "cedar" || name == "shadow" {
            if text.is_empty() {
                return Err(format!("policy: {name}: empty"));
            }
            let path = Some(resolve(base, &text));
            if name == "cedar" {
                cedar = path;
            } else {
                shadow = path;
            }
            continue;
        }
        classes.push(name.clone());
        let class = class(name).map_err(|e| format!("policy: {e}"))?;
        policy.insert(class, outcome(&text).map_err(|e| format!("policy: {e}"))?);
    }
    if !windows.is_empty() && cedar.is_none() && shadow.is_none() {
        return Err(
            "policy: windows count calls for a Cedar policy: give \"cedar\" or \"shadow\"".into(),
        );
    }
    // A Cedar file decides every call: an outcome written beside it would
    // look as if it counted.
    if cedar.is_some() {
        if let Some(name) = classes.first() {
            return Err(format!(
                "policy: {name:?} beside \"cedar\": the Cedar policy decides every call; \
                 write the class's outcome as a Cedar policy"
            ));
        }
        for server in servers {
            if let Some((tool, _)) = server.rules.iter().find(|(_, r)| r.approvers.is_some()) {
                return Err(format!(
                    "server {:?}: rule {tool:?}: approvers beside a Cedar policy, which decides \
                     every call; write it as @approvers(\"2\") on the policy that asks",
                    server.name
                ));
            }
            if let Some((tool, _)) = server.rules.iter().find(|(_, r)| r.outcome.is_some()) {
                return Err(format!(
                    "server {:?}: rule {tool:?}: outcome beside a Cedar policy, which decides \
                     every call; write it as a Cedar policy",
                    server.name
                ));
            }
        }
    }
    Ok(PolicyFile {
        policy,
        cedar,
        shadow,
        windows,
    })
}

fn config_from(file: ConfigFile<'_>, path: &Path, base: &Path) -> Result<Config, String> {
    if file.database.is_empty() {
        return Err("database: empty".into());
    }
    if !is_plain_name(&file.session) {
        return Err(format!(
            "session {:?}: 1 to 64 letters, digits, '_' or '-'",
            file.session
        ));
    }
    let PolicyFile {
        policy,
        cedar,
        shadow,
        windows,
    } = policy_from(&file.policy, &file.servers, base)?;
    let durability = match file.durability.as_deref() {
        None | Some("full") => Durability::Full,
        Some("normal") if is_postgres_url(&file.database) => {
            return Err(
                "durability \"normal\": a SQLite file's setting; PostgreSQL's own \
                        synchronous_commit decides how its commits survive"
                    .into(),
            );
        }
        Some("normal") => Durability::Normal,
        Some(other) => return Err(format!("durability {other:?}: \"full\" or \"normal\"")),
    };
    let max_pending = match file.max_pending {
        None => DEFAULT_MAX_PENDING,
        Some(n) => u32::try_from(n).map_err(|_| format!("max_pending {n}: out of range"))?,
    };
    let status_tool = file
        .status_tool
        .unwrap_or_else(|| DEFAULT_STATUS_TOOL.to_owned());
    if !is_plain_name(&status_tool) {
        return Err(format!(
            "status_tool {status_tool:?}: 1 to 64 letters, digits, '_' or '-'"
        ));
    }
    let lease_ttl = duration("lease_ttl", file.lease_ttl.as_deref(), DEFAULT_LEASE_TTL)?;
    if lease_ttl < MIN_LEASE_TTL {
        return Err(format!(
            "lease_ttl {}: at least 3s (it is renewed every third)",
            file.lease_ttl.as_deref().unwrap_or_default()
        ));
    }
    if file.servers.is_empty() {
        return Err("servers: at least one".into());
    }
    let mut names = BTreeSet::new();
    let mut servers = Vec::with_capacity(file.servers.len());
    for entry in file.servers {
        let name = entry.name.clone();
        if !names.insert(name.clone()) {
            return Err(format!("server {name:?} is named twice"));
        }
        servers.push(server_from(entry, base).map_err(|e| format!("server {name:?}: {e}"))?);
    }
    Ok(Config {
        path: path.to_owned(),
        database: if is_postgres_url(&file.database) {
            Database::Postgres(file.database)
        } else {
            Database::File(resolve(base, &file.database))
        },
        durability,
        session: file.session,
        servers,
        policy,
        cedar,
        shadow,
        windows,
        hold: duration("hold", file.hold.as_deref(), DEFAULT_HOLD)?,
        repeat_window: duration(
            "repeat_window",
            file.repeat_window.as_deref(),
            DEFAULT_REPEAT_WINDOW,
        )?,
        max_pending,
        approval_ttl: duration("approval_ttl", file.approval_ttl.as_deref(), DEFAULT_TTL)?,
        grant_ttl: duration("grant_ttl", file.grant_ttl.as_deref(), DEFAULT_TTL)?,
        status_tool,
        lease_ttl,
        oauth: file
            .oauth
            .map(|raw| OAuthConfig::parse(raw.get().as_bytes()))
            .transpose()?,
    })
}

fn server_from(entry: ServerFile<'_>, base: &Path) -> Result<ServerConfig, String> {
    let endpoint = match (entry.command, entry.endpoint) {
        (Some(argv), None) => Endpoint::Command(argv),
        (None, Some(url)) => Endpoint::Url(url),
        _ => return Err("give exactly one of command and endpoint".into()),
    };
    if entry.manifest.is_empty() {
        return Err("manifest: empty".into());
    }
    let mut server = match endpoint {
        Endpoint::Command(argv) => {
            let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
            Server::command(&entry.name, &argv)
        }
        Endpoint::Url(url) => Server::url(&entry.name, &url),
    };
    server.env = entry.env;
    server.inherit_env = entry.inherit_env;
    server.connect_timeout = entry
        .connect_timeout
        .as_deref()
        .map(|t| duration("connect_timeout", Some(t), Duration::ZERO))
        .transpose()?;
    server.default_timeout = entry
        .default_timeout
        .as_deref()
        .map(|t| duration("default_timeout", Some(t), Duration::ZERO))
        .transpose()?;
    server.validate().map_err(|e| e.to_string())?;
    let mut rules = BTreeMap::new();
    for (tool, rule) in entry.rules {
        let rule = rule_from(rule).map_err(|e| format!("rule {tool:?}: {e}"))?;
        rules.insert(tool, rule);
    }
    Ok(ServerConfig {
        server,
        manifest: resolve(base, &entry.manifest),
        rules,
        skip_path_check: entry.skip_path_check,
    })
}

fn rule_from(file: RuleFile<'_>) -> Result<ProxyRule, String> {
    let outcome = file.outcome.as_deref().map(outcome).transpose()?;
    let repeat_window = file
        .repeat_window
        .as_deref()
        .map(|t| duration("repeat_window", Some(t), Duration::ZERO))
        .transpose()?;
    let rule = RuleEntry {
        side_effect: file.side_effect,
        timeout: file.timeout,
        terminal: file.terminal,
        description: file.description,
        deny: file.deny,
        fixed: file.fixed,
        rename: file.rename,
        allow_hint_mismatch: file.allow_hint_mismatch,
    }
    .into_rule()?;
    let approvers = match file.approvers {
        None => 1,
        Some(n) => u8::try_from(n)
            .ok()
            .filter(|n| (1..=agentrt::MAX_APPROVERS).contains(n))
            .ok_or_else(|| {
                format!(
                    "approvers {n}: 1 to {} distinct people",
                    agentrt::MAX_APPROVERS
                )
            })?,
    };
    Ok(ProxyRule {
        rule,
        outcome,
        repeat_window,
        approvers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ProxyError> {
        parse_config(text.as_bytes(), Path::new("/cfg/proxy.json"))
    }

    const MINIMAL: &str = r#"{"database": "p.db", "session": "s1",
        "servers": [{"name": "fs", "command": ["fs-server"], "manifest": "fs.json"}]}"#;

    #[test]
    fn defaults_fill_what_the_file_leaves_out() {
        let c = parse(MINIMAL).expect("minimal");
        assert_eq!(c.database.file(), Some(Path::new("/cfg/p.db")));
        assert_eq!(c.servers[0].manifest, Path::new("/cfg/fs.json"));
        assert_eq!(c.policy, default_policy());
        assert_eq!(c.hold, Duration::from_secs(15));
        assert_eq!(c.repeat_window, Duration::from_secs(600));
        assert_eq!(c.max_pending, 5);
        assert_eq!(c.approval_ttl, Duration::from_secs(86400));
        assert_eq!(c.grant_ttl, Duration::from_secs(86400));
        assert_eq!(c.status_tool, "gate_status");
        assert_eq!(c.lease_ttl, Duration::from_secs(30));
        assert_eq!(c.durability, Durability::Full);
        assert!(!c.servers[0].skip_path_check);
    }

    #[test]
    fn every_field_is_read() {
        let c = parse(
            r#"{"database": "/var/p.db", "session": "a_b-9",
                "policy": {"read_only": "deny", "destructive": "require_approval"},
                "hold": "0s", "repeat_window": "1m", "max_pending": 0,
                "approval_ttl": "0s", "grant_ttl": "2h", "status_tool": "status",
                "lease_ttl": "3s", "durability": "normal",
                "servers": [{"name": "fs", "endpoint": "http://127.0.0.1:9/mcp",
                             "env": ["A=1"], "inherit_env": ["LANG"],
                             "connect_timeout": "5s", "default_timeout": "2s",
                             "manifest": "/m.json", "skip_path_check": true,
                             "rules": {"write": {"side_effect": "local_mutation",
                                       "timeout": "9s", "terminal": true,
                                       "fixed": {"mode": 1.50}, "deny": ["force"],
                                       "rename": "w", "description": "W.",
                                       "allow_hint_mismatch": true,
                                       "outcome": "require_approval",
                                       "repeat_window": "0s"}}}]}"#,
        )
        .expect("full");
        assert_eq!(c.database.file(), Some(Path::new("/var/p.db")));
        assert_eq!(c.policy[&SideEffect::ReadOnly], Outcome::Deny);
        assert_eq!(c.policy[&SideEffect::LocalMutation], Outcome::Allow);
        assert_eq!(c.policy[&SideEffect::Destructive], Outcome::RequireApproval);
        assert_eq!(
            (c.hold, c.repeat_window, c.max_pending),
            (Duration::ZERO, Duration::from_secs(60), 0)
        );
        assert_eq!(c.approval_ttl, Duration::ZERO);
        assert_eq!(c.grant_ttl, Duration::from_secs(7200));
        assert_eq!(
            (c.status_tool.as_str(), c.lease_ttl),
            ("status", Duration::from_secs(3))
        );
        assert_eq!(c.durability, Durability::Normal);
        let s = &c.servers[0];
        assert_eq!(
            s.server.endpoint,
            Endpoint::Url("http://127.0.0.1:9/mcp".into())
        );
        assert_eq!(
            (s.server.env.as_slice(), s.server.inherit_env.as_slice()),
            (&["A=1".to_owned()][..], &["LANG".to_owned()][..])
        );
        assert_eq!(s.server.connect_timeout, Some(Duration::from_secs(5)));
        assert_eq!(s.server.default_timeout, Some(Duration::from_secs(2)));
        assert!(s.skip_path_check);
        let w = &s.rules["write"];
        assert_eq!(w.outcome, Some(Outcome::RequireApproval));
        assert_eq!(w.repeat_window, Some(Duration::ZERO));
        assert_eq!(
            w.rule.fixed["mode"].as_str(),
            "1.50",
            "a fixed value keeps its literal"
        );
        assert_eq!(w.rule.deny, ["force"]);
        assert_eq!(w.rule.rename.as_deref(), Some("w"));
        assert!(w.rule.terminal && w.rule.allow_hint_mismatch);
    }

    #[test]
    fn a_broken_file_is_refused_naming_the_problem() {
        let server = r#"{"name": "fs", "command": ["x"], "manifest": "m.json"}"#;
        let with = |extra: &str| {
            format!(r#"{{"database": "p.db", "session": "s", "servers": [{server}]{extra}}}"#)
        };
        let with_server =
            |s: &str| format!(r#"{{"database": "p.db", "session": "s", "servers": [{s}]}}"#);
        let with_rule = |r: &str| {
            with_server(&format!(
                r#"{{"name": "fs", "command": ["x"], "manifest": "m.json", "rules": {{"t": {r}}}}}"#
            ))
        };
        let cases: Vec<(String, &str)> = vec![
            ("[]".into(), "one JSON object"),
            (
                format!("{} {{}}", with("")),
                "unexpected data after the JSON value",
            ),
            (with(r#", "hold": "1s", "hold": "2s""#), "repeats the key"),
            (with(r#", "extra": 1"#), "unknown field `extra`"),
            (
                r#"{"session": "s", "servers": []}"#.into(),
                "missing field `database`",
            ),
            (
                with_server(server).replace(r#""s""#, r#""a.b""#),
                "session \"a.b\"",
            ),
            (
                r#"{"database": "p.db", "session": "s", "servers": []}"#.into(),
                "servers: at least one",
            ),
            (with(r#", "policy": {"risky": "allow"}"#), "class \"risky\""),
            (
                with(r#", "policy": {"read_only": "abort"}"#),
                "outcome \"abort\"",
            ),
            (with(r#", "hold": "-1s""#), "hold"),
            (with(r#", "hold": "15""#), "hold"),
            (with(r#", "max_pending": -1"#), "max_pending -1"),
            (with(r#", "lease_ttl": "2s""#), "at least 3s"),
            (with(r#", "status_tool": "gate status""#), "status_tool"),
            (with(r#", "durability": "off""#), "durability \"off\""),
            (
                with(r#", "durability": "normal""#).replace("p.db", "postgres://h/db"),
                "synchronous_commit",
            ),
            (with_server(&format!("{server}, {server}")), "named twice"),
            (
                with_server(r#"{"name": "fs", "manifest": "m.json"}"#),
                "exactly one of command and endpoint",
            ),
            (
                with_server(
                    r#"{"name": "fs", "command": ["x"], "endpoint": "http://h", "manifest": "m.json"}"#,
                ),
                "exactly one of command and endpoint",
            ),
            (
                with_server(r#"{"name": "fs", "command": ["x"]}"#),
                "missing field `manifest`",
            ),
            (
                with_server(r#"{"name": "fs", "endpoint": "ftp://h", "manifest": "m"}"#),
                "not an http(s) URL",
            ),
            (
                with_server(r#"{"name": "fs", "command": ["x"], "manifest": "m", "env": ["=1"]}"#),
                "env",
            ),
            (
                with_server(r#"{"name": "fs", "command": ["x"], "manifest": "m", "nope": 1}"#),
                "unknown field `nope`",
            ),
            (with_rule(r#"{"side_effect": "sideways"}"#), "rule \"t\""),
            (
                with_rule(r#"{"side_effect": "read_only", "outcome": "maybe"}"#),
                "outcome \"maybe\"",
            ),
            (
                with_rule(r#"{"side_effect": "read_only", "repeat_window": "-1m"}"#),
                "repeat_window",
            ),
            (
                with_rule(r#"{"side_effect": "read_only", "what": 1}"#),
                "unknown field `what`",
            ),
        ];
        for (text, want) in cases {
            let e = parse(&text).expect_err(&text);
            assert!(matches!(e, ProxyError::Config { .. }), "{text}: {e}");
            assert!(
                e.to_string().contains(want),
                "{text}\n  gave: {e}\n  want: {want}"
            );
        }
    }
}
