//! The proxy's configuration file parser (`parse_config`, what
//! `read_config` runs on the file's bytes; design §29), fuzzed with
//! arbitrary bytes and with near-valid configurations: every field given
//! or left out, then one field broken (a wrong type, a refused value, a
//! duration such as `-1s` or `1e999s`, an unknown or repeated field).
//! Valid files are read exactly; every refusal is `ProxyError::Config`
//! naming the file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use agentrt::json::write_string;
use agentrt::{Canonical, Outcome, SideEffect};
use agentrt_mcp::{Rule, Server};
use agentrt_proxy::{
    Config, DEFAULT_HOLD, DEFAULT_LEASE_TTL, DEFAULT_MAX_PENDING, DEFAULT_REPEAT_WINDOW,
    DEFAULT_STATUS_TOOL, DEFAULT_TTL, Database, ProxyError, ProxyRule, ServerConfig,
    default_policy, parse_config,
};
use proptest::prelude::*;
use proptest::strategy::{NewTree, ValueTree};
use proptest::test_runner::{Config as ProptestConfig, RngSeed, TestRunner};

/// At least 10 000 cases (more when `PROPTEST_CASES` asks, as `cargo
/// xtask fuzz` does), a fixed seed unless `PROPTEST_RNG_SEED` names one,
/// and no regression files written.
fn fuzz_config() -> ProptestConfig {
    let base = ProptestConfig::default();
    let rng_seed = match base.rng_seed {
        RngSeed::Random => RngSeed::Fixed(0x0a9e_47e7),
        given => given,
    };
    ProptestConfig {
        cases: base.cases.max(10_000),
        rng_seed,
        failure_persistence: None,
        ..base
    }
}

/// One of weighted strategies, generated alone. proptest's `prop_oneof!`
/// seeds a new random generator for each arm it did not pick (to shrink
/// into later), which is most of the time of a debug build's 10 000
/// cases; this never shrinks across arms.
#[derive(Debug)]
struct Pick<T: std::fmt::Debug>(Vec<(u32, BoxedStrategy<T>)>);

impl<T: std::fmt::Debug> Strategy for Pick<T> {
    type Tree = Box<dyn ValueTree<Value = T>>;
    type Value = T;

    fn new_tree(&self, runner: &mut TestRunner) -> NewTree<Self> {
        let total: u32 = self.0.iter().map(|(w, _)| w).sum();
        let mut at = runner.rng().next_u32() % total.max(1);
        for (weight, strategy) in &self.0 {
            if at < *weight {
                return strategy.new_tree(runner);
            }
            at -= weight;
        }
        Err("no strategy to pick".into())
    }
}

/// [`Pick`] of `weight => strategy` arms.
macro_rules! pick {
    ($($weight:expr => $strategy:expr),+ $(,)?) => {
        Pick(vec![$(($weight, $strategy.boxed())),+])
    };
}

/// Strings matching `pattern`, the regex compiled once (a `&str`
/// strategy compiles it for every value).
fn re(pattern: &str) -> proptest::string::RegexGeneratorStrategy<String> {
    proptest::string::string_regex(pattern).expect("a valid regex")
}

/// `None` or a value of `strategy`, as [`Pick`] picks.
fn maybe<S>(strategy: S) -> Pick<Option<S::Value>>
where
    S: Strategy + 'static,
    S::Value: Clone + std::fmt::Debug,
{
    pick![1 => Just(None), 2 => strategy.prop_map(Some)]
}

/// Where the configuration file is said to be.
const FILE: &str = "/etc/agentrt/proxy.json";

/// `s` as a JSON string literal.
fn enc(s: &str) -> String {
    let mut out = String::new();
    write_string(&mut out, s);
    out
}

/// `{"k":v,…}` from members already written.
fn object(members: &[(String, String)]) -> String {
    let inner: Vec<String> = members
        .iter()
        .map(|(k, v)| format!("{}:{v}", enc(k)))
        .collect();
    format!("{{{}}}", inner.join(","))
}

/// `[…]` of strings.
fn list(items: &[String]) -> String {
    let inner: Vec<String> = items.iter().map(|i| enc(i)).collect();
    format!("[{}]", inner.join(","))
}

/// Text with multi-byte and control characters, quotes and backslashes.
fn text() -> impl Strategy<Value = String> {
    pick![
        3 => prop::collection::vec(any::<char>(), 0..10).prop_map(String::from_iter),
        3 => re("[a-zé€😀\"\\\\\n\t\u{1} =:/.~-]{0,14}"),
        1 => Just(String::new()),
    ]
}

/// Any JSON value as text, canonical-acceptable.
fn json_value() -> impl Strategy<Value = String> {
    let leaf = pick![
        3 => prop::sample::select(
            &["null", "true", "false", "0", "-0", "1.50", "1e2", "1e400", "9007199254740993", "\"\""][..]
        )
        .prop_map(str::to_owned),
        1 => any::<i64>().prop_map(|n| n.to_string()),
        2 => text().prop_map(|s| enc(&s)),
    ];
    leaf.prop_recursive(3, 10, 3, |inner| {
        pick![
            1 => prop::collection::vec(inner.clone(), 0..3).prop_map(|v| format!("[{}]", v.join(","))),
            1 => prop::collection::btree_map(re("[a-z]{0,4}"), inner, 0..3)
                .prop_map(|m| object(&m.into_iter().collect::<Vec<_>>())),
        ]
    })
}

// ---------------------------------------------------------------------
// Durations

const UNITS: &[(&str, u64)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// A duration in Go's syntax (one to three parts, fractions of at most
/// nine digits, so exact to the nanosecond) and its value; `0s` and a
/// bare `0` among them.
fn duration() -> impl Strategy<Value = (String, Duration)> {
    let parts = prop::collection::vec((0u64..2000, maybe(re("[0-9]{1,9}")), 0..UNITS.len()), 1..4)
        .prop_map(|parts| {
            let mut text = String::new();
            let mut nanos: u128 = 0;
            for (whole, fraction, unit) in parts {
                let (name, scale) = UNITS[unit];
                let scale = u128::from(scale);
                nanos += u128::from(whole) * scale;
                match fraction {
                    Some(f) => {
                        let digits: u128 = f.parse().unwrap_or(0);
                        nanos += digits * scale / 10u128.pow(f.len() as u32);
                        text.push_str(&format!("{whole}.{f}{name}"));
                    }
                    None => text.push_str(&format!("{whole}{name}")),
                }
            }
            let nanos = u64::try_from(nanos).unwrap_or(u64::MAX);
            (text, Duration::from_nanos(nanos))
        });
    pick![
        8 => parts,
        1 => Just(("0s".to_owned(), Duration::ZERO)),
        1 => Just(("0".to_owned(), Duration::ZERO)),
        1 => Just(("+15s".to_owned(), Duration::from_secs(15))),
    ]
}

/// A positive duration.
fn positive_duration() -> impl Strategy<Value = (String, Duration)> {
    duration().prop_filter("positive", |(_, d)| !d.is_zero())
}

/// Durations no configuration may hold.
const BAD_DURATIONS: &[&str] = &[
    "-1s", "1e999s", "15", "", "5 s", "1d", "s", "1.2.3s", "--1s", "1s-", ".s", "١s", "1S", "+",
    "-1m30s",
];

/// A duration field written as no duration: a refused string or another
/// type.
fn bad_duration() -> impl Strategy<Value = String> {
    pick![
        4 => prop::sample::select(BAD_DURATIONS).prop_map(enc),
        1 => prop::sample::select(&["15", "-1", "1e999", "true", "[]", "{}"][..]).prop_map(str::to_owned),
        1 => re("[0-9]{25,30}h").prop_map(|d| enc(&d)),
    ]
}

// ---------------------------------------------------------------------
// The configuration, as a model

const CLASSES: [SideEffect; 4] = [
    SideEffect::ReadOnly,
    SideEffect::LocalMutation,
    SideEffect::RemoteMutation,
    SideEffect::Destructive,
];

const OUTCOMES: [Outcome; 3] = [Outcome::Allow, Outcome::RequireApproval, Outcome::Deny];

/// A rule of a server's `rules`.
#[derive(Debug, Clone)]
struct RuleModel {
    side_effect: SideEffect,
    timeout: Option<(String, Duration)>,
    terminal: Option<bool>,
    description: Option<String>,
    deny: Vec<String>,
    fixed: BTreeMap<String, String>,
    rename: Option<String>,
    allow_hint_mismatch: Option<bool>,
    outcome: Option<Outcome>,
    repeat_window: Option<(String, Duration)>,
}

fn rule_model() -> impl Strategy<Value = RuleModel> {
    (
        (
            prop::sample::select(&CLASSES[..]),
            maybe(positive_duration()),
            maybe(any::<bool>()),
            maybe(text()),
            prop::collection::btree_set(re("d[a-zé]{0,4}"), 0..3),
        ),
        (
            prop::collection::btree_map(re("f[a-zé]{0,4}"), json_value(), 0..3),
            maybe(text()),
            maybe(any::<bool>()),
            maybe(prop::sample::select(&OUTCOMES[..])),
            maybe(duration()),
        ),
    )
        .prop_map(
            |(
                (side_effect, timeout, terminal, description, deny),
                (fixed, rename, allow_hint_mismatch, outcome, repeat_window),
            )| RuleModel {
                side_effect,
                timeout,
                terminal,
                description,
                deny: deny.into_iter().collect(),
                fixed,
                rename,
                allow_hint_mismatch,
                outcome,
                repeat_window,
            },
        )
}

impl RuleModel {
    fn members(&self) -> Vec<(String, String)> {
        let mut m = vec![("side_effect".to_owned(), enc(self.side_effect.as_str()))];
        if let Some((t, _)) = &self.timeout {
            m.push(("timeout".into(), enc(t)));
        }
        if let Some(b) = self.terminal {
            m.push(("terminal".into(), b.to_string()));
        }
        if let Some(d) = &self.description {
            m.push(("description".into(), enc(d)));
        }
        if !self.deny.is_empty() {
            m.push(("deny".into(), list(&self.deny)));
        }
        if !self.fixed.is_empty() {
            let fixed: Vec<(String, String)> = self
                .fixed
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            m.push(("fixed".into(), object(&fixed)));
        }
        if let Some(r) = &self.rename {
            m.push(("rename".into(), enc(r)));
        }
        if let Some(b) = self.allow_hint_mismatch {
            m.push(("allow_hint_mismatch".into(), b.to_string()));
        }
        if let Some(o) = self.outcome {
            m.push(("outcome".into(), enc(o.as_str())));
        }
        if let Some((t, _)) = &self.repeat_window {
            m.push(("repeat_window".into(), enc(t)));
        }
        m
    }

    fn expected(&self) -> ProxyRule {
        ProxyRule {
            rule: Rule {
                side_effect: self.side_effect,
                timeout: self.timeout.as_ref().map(|(_, d)| *d),
                terminal: self.terminal.unwrap_or(false),
                description: self.description.clone(),
                deny: self.deny.clone(),
                fixed: self
                    .fixed
                    .iter()
                    .map(|(k, v)| (k.clone(), Canonical::parse_str(v).expect("fixed")))
                    .collect(),
                rename: self.rename.clone(),
                allow_hint_mismatch: self.allow_hint_mismatch.unwrap_or(false),
            },
            outcome: self.outcome,
            repeat_window: self.repeat_window.as_ref().map(|(_, d)| *d),
            // The model writes no "approvers" (tests/two_people.rs).
            approvers: 1,
        }
    }
}

/// Where a server is.
#[derive(Debug, Clone)]
enum Place {
    Command(Vec<String>),
    Endpoint(String),
}

/// One server entry.
#[derive(Debug, Clone)]
struct ServerModel {
    name: String,
    place: Place,
    env: Option<Vec<String>>,
    inherit_env: Option<Vec<String>>,
    connect_timeout: Option<(String, Duration)>,
    default_timeout: Option<(String, Duration)>,
    manifest: String,
    rules: Option<BTreeMap<String, RuleModel>>,
    skip_path_check: Option<bool>,
}

fn server_model() -> impl Strategy<Value = ServerModel> {
    let place = pick![
        2 => (re("[a-z/]{1,10}"), prop::collection::vec(text(), 0..3))
            .prop_map(|(p, args)| Place::Command(std::iter::once(p).chain(args).collect())),
        1 => (prop::sample::select(&["http://", "https://"][..]), re("[a-z0-9.:/é]{0,16}"))
            .prop_map(|(s, rest)| Place::Endpoint(format!("{s}{rest}"))),
    ];
    let env_entry =
        (re("[A-Za-z_][A-Za-z0-9_]{0,6}"), text()).prop_map(|(n, v)| format!("{n}={v}"));
    (
        (
            re("[a-zA-Z0-9é _-]{0,6}"),
            place,
            maybe(prop::collection::vec(env_entry, 0..3)),
            maybe(prop::collection::vec(
                re("[A-Za-z_é][A-Za-z0-9_]{0,6}"),
                0..3,
            )),
            maybe(duration()),
        ),
        (
            maybe(duration()),
            re("[a-zé./~-]{1,12}"),
            maybe(prop::collection::btree_map(text(), rule_model(), 0..3)),
            maybe(any::<bool>()),
        ),
    )
        .prop_map(
            |(
                (name, place, env, inherit_env, connect_timeout),
                (default_timeout, manifest, rules, skip_path_check),
            )| ServerModel {
                name,
                place,
                env,
                inherit_env,
                connect_timeout,
                default_timeout,
                manifest,
                rules,
                skip_path_check,
            },
        )
}

impl ServerModel {
    fn members(&self) -> Vec<(String, String)> {
        let mut m = vec![("name".to_owned(), enc(&self.name))];
        match &self.place {
            Place::Command(argv) => m.push(("command".into(), list(argv))),
            Place::Endpoint(url) => m.push(("endpoint".into(), enc(url))),
        }
        if let Some(env) = &self.env {
            m.push(("env".into(), list(env)));
        }
        if let Some(names) = &self.inherit_env {
            m.push(("inherit_env".into(), list(names)));
        }
        if let Some((t, _)) = &self.connect_timeout {
            m.push(("connect_timeout".into(), enc(t)));
        }
        if let Some((t, _)) = &self.default_timeout {
            m.push(("default_timeout".into(), enc(t)));
        }
        m.push(("manifest".into(), enc(&self.manifest)));
        if let Some(rules) = &self.rules {
            let rules: Vec<(String, String)> = rules
                .iter()
                .map(|(tool, rule)| (tool.clone(), object(&rule.members())))
                .collect();
            m.push(("rules".into(), object(&rules)));
        }
        if let Some(b) = self.skip_path_check {
            m.push(("skip_path_check".into(), b.to_string()));
        }
        m
    }

    fn expected(&self) -> ServerConfig {
        let mut server = match &self.place {
            Place::Command(argv) => {
                let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
                Server::command(&self.name, &argv)
            }
            Place::Endpoint(url) => Server::url(&self.name, url),
        };
        server.env = self.env.clone().unwrap_or_default();
        server.inherit_env = self.inherit_env.clone().unwrap_or_default();
        server.connect_timeout = self.connect_timeout.as_ref().map(|(_, d)| *d);
        server.default_timeout = self.default_timeout.as_ref().map(|(_, d)| *d);
        ServerConfig {
            server,
            manifest: resolve(&self.manifest),
            rules: self
                .rules
                .iter()
                .flatten()
                .map(|(tool, rule)| (tool.clone(), rule.expected()))
                .collect(),
            skip_path_check: self.skip_path_check.unwrap_or(false),
        }
    }
}

/// A path as the configuration resolves it: against the file's
/// directory.
fn resolve(text: &str) -> PathBuf {
    let path = Path::new(text);
    if path.is_absolute() {
        path.to_owned()
    } else {
        Path::new("/etc/agentrt").join(path)
    }
}

/// A whole configuration.
#[derive(Debug, Clone)]
struct ConfigModel {
    database: String,
    session: String,
    servers: Vec<ServerModel>,
    policy: Option<BTreeMap<SideEffect, Outcome>>,
    hold: Option<(String, Duration)>,
    repeat_window: Option<(String, Duration)>,
    max_pending: Option<u32>,
    approval_ttl: Option<(String, Duration)>,
    grant_ttl: Option<(String, Duration)>,
    status_tool: Option<String>,
    lease_ttl: Option<(String, Duration)>,
    /// `"full"` or `"normal"` (a file's only).
    durability: Option<&'static str>,
}

fn config_model() -> impl Strategy<Value = ConfigModel> {
    let database = pick![
        3 => re("[a-zé_./-]{1,12}"),
        1 => re("/[a-z/]{1,12}"),
        1 => re("postgres(ql)?://[a-z:@/]{0,16}"),
    ];
    let max_pending = pick![
        3 => 0u32..20,
        1 => Just(u32::MAX),
    ];
    let lease = pick![
        3 => duration().prop_filter("3s or more", |(_, d)| *d >= Duration::from_secs(3)),
        1 => Just(("3s".to_owned(), Duration::from_secs(3))),
    ];
    (
        (
            database,
            re("[A-Za-z0-9_-]{1,64}"),
            // Server names made distinct by their place in the list.
            prop::collection::vec(server_model(), 1..3).prop_map(|servers| {
                servers
                    .into_iter()
                    .enumerate()
                    .map(|(i, mut s)| {
                        s.name = format!("s{i}{}", s.name);
                        s
                    })
                    .collect()
            }),
            maybe(prop::collection::btree_map(
                prop::sample::select(&CLASSES[..]),
                prop::sample::select(&OUTCOMES[..]),
                0..4,
            )),
            maybe(duration()),
            maybe(duration()),
        ),
        (
            maybe(max_pending),
            maybe(duration()),
            maybe(duration()),
            maybe(re("[a-zA-Z0-9_-]{1,64}")),
            maybe(lease),
            maybe(prop::sample::select(&["full", "normal"][..])),
        ),
    )
        .prop_map(
            |(
                (database, session, servers, policy, hold, repeat_window),
                (max_pending, approval_ttl, grant_ttl, status_tool, lease_ttl, durability),
            )| ConfigModel {
                // PostgreSQL refuses "normal" (config's unit tests).
                durability: durability.map(|d| {
                    if database.starts_with("postgres") {
                        "full"
                    } else {
                        d
                    }
                }),
                database,
                session,
                servers,
                policy,
                hold,
                repeat_window,
                max_pending,
                approval_ttl,
                grant_ttl,
                status_tool,
                lease_ttl,
            },
        )
}

impl ConfigModel {
    fn members(&self) -> Vec<(String, String)> {
        let mut m = vec![
            ("database".to_owned(), enc(&self.database)),
            ("session".to_owned(), enc(&self.session)),
        ];
        let servers: Vec<String> = self.servers.iter().map(|s| object(&s.members())).collect();
        m.push(("servers".into(), format!("[{}]", servers.join(","))));
        if let Some(policy) = &self.policy {
            let policy: Vec<(String, String)> = policy
                .iter()
                .map(|(c, o)| (c.as_str().to_owned(), enc(o.as_str())))
                .collect();
            m.push(("policy".into(), object(&policy)));
        }
        for (field, value) in [
            ("hold", &self.hold),
            ("repeat_window", &self.repeat_window),
            ("approval_ttl", &self.approval_ttl),
            ("grant_ttl", &self.grant_ttl),
            ("lease_ttl", &self.lease_ttl),
        ] {
            if let Some((t, _)) = value {
                m.push((field.to_owned(), enc(t)));
            }
        }
        if let Some(n) = self.max_pending {
            m.push(("max_pending".into(), n.to_string()));
        }
        if let Some(s) = &self.status_tool {
            m.push(("status_tool".into(), enc(s)));
        }
        if let Some(d) = self.durability {
            m.push(("durability".into(), enc(d)));
        }
        m
    }

    fn expected(&self) -> Config {
        let mut policy = default_policy();
        policy.extend(self.policy.iter().flatten().map(|(c, o)| (*c, *o)));
        let or = |d: &Option<(String, Duration)>, default: Duration| {
            d.as_ref().map_or(default, |(_, d)| *d)
        };
        Config {
            path: PathBuf::from(FILE),
            database: if self.database.starts_with("postgres://")
                || self.database.starts_with("postgresql://")
            {
                Database::Postgres(self.database.clone())
            } else {
                Database::File(resolve(&self.database))
            },
            durability: match self.durability {
                Some("normal") => agentrt::Durability::Normal,
                _ => agentrt::Durability::Full,
            },
            session: self.session.clone(),
            servers: self.servers.iter().map(ServerModel::expected).collect(),
            policy,
            // The model writes class outcomes only (a Cedar file has its
            // own tests, tests/cedar.rs).
            cedar: None,
            shadow: None,
            windows: std::collections::BTreeMap::new(),
            hold: or(&self.hold, DEFAULT_HOLD),
            repeat_window: or(&self.repeat_window, DEFAULT_REPEAT_WINDOW),
            max_pending: self.max_pending.unwrap_or(DEFAULT_MAX_PENDING),
            approval_ttl: or(&self.approval_ttl, DEFAULT_TTL),
            grant_ttl: or(&self.grant_ttl, DEFAULT_TTL),
            status_tool: self
                .status_tool
                .clone()
                .unwrap_or_else(|| DEFAULT_STATUS_TOOL.to_owned()),
            lease_ttl: or(&self.lease_ttl, DEFAULT_LEASE_TTL),
            // The model writes no "oauth" (its own tests, tests/oauth.rs).
            oauth: None,
        }
    }
}

// ---------------------------------------------------------------------
// One field broken

/// Where a broken field goes.
#[derive(Debug, Clone, Copy)]
enum Level {
    Top,
    /// The first server.
    Server,
    /// A rule of the first server (one is added when it has none).
    Rule,
}

/// One field broken: set to `value` (or removed), or written twice.
#[derive(Debug, Clone)]
struct Break {
    level: Level,
    field: String,
    /// `None`: the field removed.
    value: Option<String>,
    /// The field written twice instead.
    twice: bool,
}

fn set(level: Level, field: &str, value: &str) -> Break {
    Break {
        level,
        field: field.to_owned(),
        value: Some(value.to_owned()),
        twice: false,
    }
}

fn top_break() -> impl Strategy<Value = Break> {
    let fixed = prop::sample::select(vec![
        set(Level::Top, "database", r#""""#),
        set(Level::Top, "database", "1"),
        set(Level::Top, "database", "null"),
        set(Level::Top, "session", r#""a.b""#),
        set(Level::Top, "session", r#""""#),
        set(Level::Top, "session", r#""sé""#),
        set(Level::Top, "session", &enc(&"s".repeat(65))),
        set(Level::Top, "session", "7"),
        set(Level::Top, "servers", "[]"),
        set(Level::Top, "durability", r#""off""#),
        set(Level::Top, "durability", r#""FULL""#),
        set(Level::Top, "durability", "true"),
        set(Level::Top, "servers", "{}"),
        set(Level::Top, "policy", r#"{"risky":"allow"}"#),
        set(Level::Top, "policy", r#"{"read_only":"abort"}"#),
        set(Level::Top, "policy", r#"{"read_only":"Allow"}"#),
        set(Level::Top, "policy", r#"{"read_only":1}"#),
        set(Level::Top, "policy", "[]"),
        set(Level::Top, "max_pending", "-1"),
        set(Level::Top, "max_pending", "4294967296"),
        set(Level::Top, "max_pending", r#""5""#),
        set(Level::Top, "max_pending", "1.5"),
        set(Level::Top, "max_pending", "1e400"),
        set(Level::Top, "lease_ttl", r#""2s""#),
        set(Level::Top, "lease_ttl", r#""2999ms""#),
        set(Level::Top, "lease_ttl", r#""0s""#),
        set(Level::Top, "status_tool", r#""gate status""#),
        set(Level::Top, "status_tool", r#""""#),
        set(Level::Top, "status_tool", &enc(&"t".repeat(65))),
        set(Level::Top, "extra", "1"),
        set(Level::Top, "Database", r#""p.db""#),
        Break {
            level: Level::Top,
            field: "database".into(),
            value: None,
            twice: false,
        },
        Break {
            level: Level::Top,
            field: "session".into(),
            value: None,
            twice: false,
        },
        Break {
            level: Level::Top,
            field: "servers".into(),
            value: None,
            twice: false,
        },
        Break {
            level: Level::Top,
            field: "session".into(),
            value: None,
            twice: true,
        },
    ]);
    let duration_field = prop::sample::select(
        &[
            "hold",
            "repeat_window",
            "approval_ttl",
            "grant_ttl",
            "lease_ttl",
        ][..],
    );
    pick![
        3 => fixed,
        2 => (duration_field, bad_duration()).prop_map(|(f, v)| set(Level::Top, f, &v)),
    ]
}

/// The field of a [`Break`] that puts an endpoint that is not http(s) in
/// place of the server's command or endpoint.
const NOT_HTTP: &str = "endpoint (not http)";

/// A [`Break`] of the field `endpoint` gives a server both a command and
/// an endpoint.
fn server_break() -> impl Strategy<Value = Break> {
    let fixed = prop::sample::select(vec![
        set(Level::Server, "name", r#""""#),
        set(Level::Server, "name", r#""  ""#),
        set(Level::Server, "name", "1"),
        set(Level::Server, "command", "[]"),
        set(Level::Server, "command", r#"[""]"#),
        set(Level::Server, "command", r#""node""#),
        set(Level::Server, "command", "[1]"),
        set(Level::Server, "endpoint", r#""http://both""#),
        set(Level::Server, "env", r#"["=1"]"#),
        set(Level::Server, "env", r#"["NOEQUALS"]"#),
        set(Level::Server, "env", r#""A=1""#),
        set(Level::Server, "inherit_env", r#"["A=B"]"#),
        set(Level::Server, "inherit_env", r#"[""]"#),
        set(Level::Server, "manifest", r#""""#),
        set(Level::Server, "manifest", "1"),
        set(Level::Server, "rules", "[]"),
        set(Level::Server, "skip_path_check", r#""yes""#),
        set(Level::Server, "nope", "1"),
        Break {
            level: Level::Server,
            field: "manifest".into(),
            value: None,
            twice: false,
        },
        Break {
            level: Level::Server,
            field: "name".into(),
            value: None,
            twice: false,
        },
        Break {
            level: Level::Server,
            field: "manifest".into(),
            value: None,
            twice: true,
        },
    ]);
    let duration_field = prop::sample::select(&["connect_timeout", "default_timeout"][..]);
    pick![
        3 => fixed,
        1 => (duration_field, bad_duration()).prop_map(|(f, v)| set(Level::Server, f, &v)),
        1 => prop::sample::select(&["ftp://h", "h/mcp", "", "HTTP://h"][..])
            .prop_map(|url| set(Level::Server, NOT_HTTP, &enc(url))),
    ]
}

fn rule_break() -> impl Strategy<Value = Break> {
    let fixed = prop::sample::select(vec![
        set(Level::Rule, "side_effect", r#""readonly""#),
        set(Level::Rule, "side_effect", r#""""#),
        set(Level::Rule, "side_effect", "1"),
        set(Level::Rule, "timeout", r#""0s""#),
        set(Level::Rule, "terminal", r#""true""#),
        set(Level::Rule, "description", "1"),
        set(Level::Rule, "deny", r#""d""#),
        set(Level::Rule, "deny", r#"[""]"#),
        set(Level::Rule, "fixed", "[]"),
        set(Level::Rule, "fixed", r#"{"":1}"#),
        set(Level::Rule, "fixed", r#"{"f":"\ud800"}"#),
        set(Level::Rule, "rename", "false"),
        set(Level::Rule, "allow_hint_mismatch", r#""yes""#),
        set(Level::Rule, "outcome", r#""maybe""#),
        set(Level::Rule, "outcome", r#""abort""#),
        set(Level::Rule, "outcome", "1"),
        set(Level::Rule, "what", "1"),
        Break {
            level: Level::Rule,
            field: "side_effect".into(),
            value: None,
            twice: false,
        },
        Break {
            level: Level::Rule,
            field: "side_effect".into(),
            value: None,
            twice: true,
        },
    ]);
    let duration_field = prop::sample::select(&["timeout", "repeat_window"][..]);
    pick![
        3 => fixed,
        1 => (duration_field, bad_duration()).prop_map(|(f, v)| set(Level::Rule, f, &v)),
    ]
}

/// `members` with `b`'s field set, removed or repeated.
fn apply(members: &mut Vec<(String, String)>, b: &Break) {
    if b.twice {
        let again = members
            .iter()
            .find(|(k, _)| *k == b.field)
            .cloned()
            .unwrap_or_else(|| (b.field.clone(), "1".into()));
        members.push(again);
        return;
    }
    if b.field == NOT_HTTP {
        // An endpoint that is not http(s) in place of the command.
        members.retain(|(k, _)| k != "command" && k != "endpoint");
        members.push(("endpoint".into(), b.value.clone().unwrap_or_default()));
        return;
    }
    if b.field == "endpoint" {
        // Both a command and an endpoint.
        members.retain(|(k, _)| k != "endpoint");
        if !members.iter().any(|(k, _)| k == "command") {
            members.push(("command".into(), r#"["x"]"#.into()));
        }
    }
    members.retain(|(k, _)| *k != b.field);
    if let Some(value) = &b.value {
        members.push((b.field.clone(), value.clone()));
    }
}

/// The configuration's text with `b` applied.
fn broken_text(model: &ConfigModel, b: &Break) -> String {
    let mut top = model.members();
    match b.level {
        Level::Top => apply(&mut top, b),
        Level::Server | Level::Rule => {
            let mut servers: Vec<String> = Vec::new();
            for (i, server) in model.servers.iter().enumerate() {
                let mut members = server.members();
                if i == 0 {
                    if let Level::Server = b.level {
                        apply(&mut members, b);
                    } else {
                        // The last rule broken, or a rule added to break.
                        let mut rules: Vec<(String, Vec<(String, String)>)> = server
                            .rules
                            .iter()
                            .flatten()
                            .map(|(tool, rule)| (tool.clone(), rule.members()))
                            .collect();
                        if rules.is_empty() {
                            rules
                                .push(("t".into(), vec![("side_effect".into(), enc("read_only"))]));
                        }
                        if let Some((_, last)) = rules.last_mut() {
                            apply(last, b);
                        }
                        let rules: Vec<(String, String)> =
                            rules.into_iter().map(|(t, m)| (t, object(&m))).collect();
                        members.retain(|(k, _)| k != "rules");
                        members.push(("rules".into(), object(&rules)));
                    }
                }
                servers.push(object(&members));
            }
            top.retain(|(k, _)| k != "servers");
            top.push(("servers".into(), format!("[{}]", servers.join(","))));
        }
    }
    object(&top)
}

/// Bytes that are almost a configuration: any bytes, JSON of any shape,
/// a valid configuration cut short or with trailing data, or not an
/// object.
fn config_like_bytes() -> impl Strategy<Value = Vec<u8>> {
    pick![
        2 => prop::collection::vec(any::<u8>(), 0..200),
        2 => json_value().prop_map(String::into_bytes),
        1 => (config_model(), any::<prop::sample::Index>()).prop_map(|(model, cut)| {
            let text = object(&model.members()).into_bytes();
            let at = cut.index(text.len());
            text[..at].to_vec()
        }),
        1 => config_model().prop_map(|model| format!("{} {{}}", object(&model.members())).into_bytes()),
        1 => config_model().prop_map(|model| format!("[{}]", object(&model.members())).into_bytes()),
    ]
}

/// The refusal `parse_config` must give: `ProxyError::Config` naming the
/// file.
fn is_config_error(e: &ProxyError) -> bool {
    matches!(e, ProxyError::Config { path, .. } if path == Path::new(FILE))
}

proptest! {
    #![proptest_config(fuzz_config())]

    /// Any bytes: a configuration, or `ProxyError::Config` naming the
    /// file.
    #[test]
    fn any_bytes_are_a_configuration_or_a_config_error(bytes in config_like_bytes()) {
        match parse_config(&bytes, Path::new(FILE)) {
            Ok(config) => {
                prop_assert!(Canonical::parse(&bytes).is_ok_and(|c| c.is_object()));
                prop_assert!(!config.servers.is_empty());
                prop_assert!(config.lease_ttl >= Duration::from_secs(3));
            }
            Err(e) => prop_assert!(is_config_error(&e), "{e:?}"),
        }
    }

    /// A valid configuration (every field given or left out, durations in
    /// Go's syntax, unicode where text may be anything, `postgres://`
    /// URLs, absolute and relative paths) is read exactly, defaults filled;
    /// the same configuration with one field broken at the top, in a
    /// server or in a rule is refused as `ProxyError::Config`.
    #[test]
    fn a_configuration_is_read_exactly_and_one_broken_field_refuses_it(
        model in config_model(),
        broken in pick![2 => top_break(), 2 => server_break(), 1 => rule_break()],
    ) {
        let text = object(&model.members());
        let read = parse_config(text.as_bytes(), Path::new(FILE));
        prop_assert!(read.is_ok(), "{}: {:?}", text, read);
        let Ok(read) = read else { unreachable!() };
        prop_assert_eq!(read, model.expected(), "{}", text);

        let text = broken_text(&model, &broken);
        match parse_config(text.as_bytes(), Path::new(FILE)) {
            Err(e) => prop_assert!(is_config_error(&e), "{e:?}"),
            Ok(_) => prop_assert!(false, "accepted: {text}"),
        }
    }
}
