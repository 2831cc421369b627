//! The policy's identity (design §2, §29): what decides
//! a call, and nothing else, hashed. Two configurations that decide every
//! call alike have the same identity whatever their paths, timeouts or
//! descriptions; a re-check names the policy by it.

use agentrt::json::{hash_hex, write_string};

use crate::config::Config;

/// The prefix of every identity.
pub const POLICY_ID_PREFIX: &str = "agentrt-proxy/blake3:";

/// The canonical JSON the identity hashes:
/// `{"policy": {class: outcome, …every class}, "servers": [{"name",
/// "rules": {tool: {"approvers" (when 2), "fixed" (when any), "outcome" (when set), "rename"
/// (when set), "side_effect"}}}, …by name]}`; with a Cedar policy,
/// `"cedar"` first and `"windows"` (milliseconds by name) last.
pub fn policy_document(config: &Config) -> String {
    policy_document_with(config, None)
}

/// [`policy_document`] with `"cedar"`, the Cedar policy's identity (its
/// policies and the schema made from the offered tools), first when the
/// configuration has one.
fn policy_document_with(config: &Config, cedar: Option<&str>) -> String {
    let mut out = String::from("{");
    if let Some(identity) = cedar {
        out.push_str("\"cedar\":");
        write_string(&mut out, identity);
        out.push(',');
    }
    out.push_str("\"policy\":{");
    // By name: the class order of `SideEffect` is not the key order.
    let mut policy: Vec<_> = config.policy.iter().collect();
    policy.sort_by_key(|(class, _)| class.as_str());
    for (i, (class, outcome)) in policy.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_string(&mut out, class.as_str());
        out.push(':');
        write_string(&mut out, outcome.as_str());
    }
    out.push_str("},\"servers\":[");
    let mut servers: Vec<_> = config.servers.iter().collect();
    servers.sort_by(|a, b| a.server.name.as_bytes().cmp(b.server.name.as_bytes()));
    for (i, server) in servers.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"name\":");
        write_string(&mut out, &server.server.name);
        out.push_str(",\"rules\":{");
        for (j, (tool, rule)) in server.rules.iter().enumerate() {
            if j > 0 {
                out.push(',');
            }
            write_string(&mut out, tool);
            out.push_str(":{");
            // Two approvers decide too (keys in sorted order).
            if rule.approvers > 1 {
                out.push_str(&format!("\"approvers\":{},", rule.approvers));
            }
            if !rule.rule.fixed.is_empty() {
                out.push_str("\"fixed\":{");
                for (k, (param, value)) in rule.rule.fixed.iter().enumerate() {
                    if k > 0 {
                        out.push(',');
                    }
                    write_string(&mut out, param);
                    out.push(':');
                    out.push_str(value.as_str());
                }
                out.push_str("},");
            }
            if let Some(outcome) = rule.outcome {
                out.push_str("\"outcome\":");
                write_string(&mut out, outcome.as_str());
                out.push(',');
            }
            if let Some(rename) = &rule.rule.rename {
                out.push_str("\"rename\":");
                write_string(&mut out, rename);
                out.push(',');
            }
            out.push_str("\"side_effect\":");
            write_string(&mut out, rule.rule.side_effect.as_str());
            out.push('}');
        }
        out.push_str("}}");
    }
    out.push(']');
    // The windows' lengths decide too (their names are in the Cedar
    // schema, so in the Cedar identity).
    if !config.windows.is_empty() {
        out.push_str(",\"windows\":{");
        for (i, (name, window)) in config.windows.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            write_string(&mut out, name);
            out.push_str(&format!(":{}", window.as_millis()));
        }
        out.push('}');
    }
    out.push('}');
    // Keys are written in sorted order (the class map and the rules are
    // ordered maps; a rule's keys by hand) and values in canonical form,
    // so the text is canonical JSON (its test parses it to check).
    out
}

/// `agentrt-proxy/blake3:` and the BLAKE3 hex of [`policy_document`].
///
/// ```
/// use std::path::Path;
/// use agentrt_proxy::{parse_config, policy_id};
///
/// let config = |session: &str, timeout: &str| parse_config(format!(r#"{{
///   "database": "p.db", "session": "{session}",
///   "servers": [{{"name": "fs", "command": ["x"], "manifest": "m.json",
///     "rules": {{"read": {{"side_effect": "read_only", "timeout": "{timeout}"}}}}}}]
/// }}"#).as_bytes(), Path::new("proxy.json"));
/// let a = policy_id(&config("one", "5s")?);
/// assert!(a.starts_with("agentrt-proxy/blake3:"));
/// assert_eq!(a, policy_id(&config("two", "9s")?), "neither decides a call");
/// # Ok::<(), agentrt_proxy::ProxyError>(())
/// ```
pub fn policy_id(config: &Config) -> String {
    policy_id_with(config, None)
}

/// [`policy_id`] of a configuration with a Cedar policy of identity
/// `cedar` ([`agentrt_cedar::CedarPolicy::identity`]): a change of its
/// policies, or a re-pin that changes a tool's schema, changes it.
pub fn policy_id_with(config: &Config, cedar: Option<&str>) -> String {
    format!(
        "{POLICY_ID_PREFIX}{}",
        hash_hex(policy_document_with(config, cedar).as_bytes())
    )
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use agentrt::Canonical;

    use super::*;
    use crate::config::parse_config;

    fn config(text: &str) -> Config {
        parse_config(text.as_bytes(), Path::new("/c/proxy.json")).expect("config")
    }

    #[test]
    fn the_document_holds_what_decides_a_call_and_is_canonical() {
        let c = config(
            r#"{"database": "p.db", "session": "s", "policy": {"local_mutation": "require_approval"},
                "servers": [
                  {"name": "web", "endpoint": "http://127.0.0.1:1/mcp", "manifest": "w.json",
                   "rules": {"fetch": {"side_effect": "read_only", "timeout": "5s"}}},
                  {"name": "fs", "command": ["x"], "manifest": "f.json",
                   "rules": {"write": {"side_effect": "local_mutation", "timeout": "5s",
                              "fixed": {"mode": 1.50, "b": "x"}, "outcome": "deny",
                              "rename": "w", "description": "ignored", "deny": ["force"]}}}]}"#,
        );
        let doc = policy_document(&c);
        assert_eq!(
            doc,
            r#"{"policy":{"destructive":"deny","local_mutation":"require_approval","read_only":"allow","remote_mutation":"require_approval"},"servers":[{"name":"fs","rules":{"write":{"fixed":{"b":"x","mode":1.50},"outcome":"deny","rename":"w","side_effect":"local_mutation"}}},{"name":"web","rules":{"fetch":{"side_effect":"read_only"}}}]}"#
        );
        assert_eq!(
            Canonical::parse_str(&doc).expect("parses").as_str(),
            doc,
            "the written text is already canonical"
        );
    }

    #[test]
    fn what_decides_a_call_changes_the_identity() {
        let base = r#"{"database": "p.db", "session": "s", POLICY
            "servers": [{"name": "fs", "command": ["x"], "manifest": "f.json",
              "rules": {"write": {"side_effect": "local_mutation", "timeout": "5s" RULE}}}]}"#;
        let id = |policy: &str, rule: &str| {
            policy_id(&config(
                &base.replace("POLICY", policy).replace("RULE", rule),
            ))
        };
        let plain = id("", "");
        assert_eq!(
            plain,
            id(r#""policy": {"read_only": "allow"},"#, ""),
            "a default written out"
        );
        for (policy, rule) in [
            (r#""policy": {"read_only": "deny"},"#, ""),
            ("", r#", "outcome": "allow""#),
            ("", r#", "fixed": {"mode": 1}"#),
            ("", r#", "fixed": {"mode": 1.0}"#),
            ("", r#", "rename": "w""#),
        ] {
            assert_ne!(plain, id(policy, rule), "{policy} {rule}");
        }
        assert_eq!(
            plain,
            id("", r#", "description": "D.", "deny": ["f"]"#),
            "descriptions and denied parameters do not decide"
        );
    }
}
