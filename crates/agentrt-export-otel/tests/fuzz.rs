//! Property tests over the exporter's parser of outside input (`cargo
//! xtask fuzz` runs this target with many more cases): the `OTEL_*`
//! variables it takes from its environment, read through a lookup
//! function (no process-wide `set_var`).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::time::Duration;

use agentrt_export_otel::environment::{
    ENDPOINT, EnvironmentError, HEADERS, OtelEnvironment, PROTOCOL, RESOURCE_ATTRIBUTES,
    SERVICE_NAME, TIMEOUT, TRACES_COMPRESSION, TRACES_ENDPOINT, TRACES_HEADERS, TRACES_TIMEOUT,
    VARIABLES,
};
use http::{HeaderName, HeaderValue, Uri};
use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, RngSeed};

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

/// What every generated value holds somewhere: an error must never show it.
const SECRET: &str = "s3cr3t";

#[cfg(unix)]
fn os(bytes: Vec<u8>) -> OsString {
    use std::os::unix::ffi::OsStringExt;
    OsString::from_vec(bytes)
}

#[cfg(not(unix))]
fn os(bytes: Vec<u8>) -> OsString {
    OsString::from(String::from_utf8_lossy(&bytes).into_owned())
}

fn read(vars: &BTreeMap<&'static str, OsString>) -> Result<OtelEnvironment, EnvironmentError> {
    OtelEnvironment::from_lookup(|name| vars.get(name).cloned())
}

fn read_str(vars: &[(&'static str, String)]) -> Result<OtelEnvironment, EnvironmentError> {
    read(
        &vars
            .iter()
            .map(|(k, v)| (*k, OsString::from(v.clone())))
            .collect(),
    )
}

/// What holds of any environment the parser accepts: a usable endpoint,
/// valid headers, a positive timeout, a service name, no stray
/// `service.name` among the other attributes.
fn usable(e: &OtelEnvironment) -> Result<(), TestCaseError> {
    let uri: Uri = e
        .endpoint
        .parse()
        .map_err(|_| TestCaseError::fail(format!("endpoint {:?} does not parse", e.endpoint)))?;
    prop_assert!(matches!(uri.scheme_str(), Some("http" | "https")));
    prop_assert!(uri.host().is_some_and(|h| !h.is_empty()));
    for (name, value) in &e.headers {
        prop_assert!(HeaderName::from_bytes(name.as_bytes()).is_ok(), "{}", name);
        prop_assert!(!value.is_empty() && HeaderValue::from_str(value).is_ok());
    }
    prop_assert!(e.timeout > Duration::ZERO);
    prop_assert!(!e.service_name.is_empty());
    let mut keys: Vec<&str> = e.resource.iter().map(|(k, _)| k.as_str()).collect();
    prop_assert!(keys.iter().all(|k| !k.is_empty() && *k != "service.name"));
    keys.sort_unstable();
    keys.dedup();
    prop_assert_eq!(keys.len(), e.resource.len(), "one value per key");
    Ok(())
}

/// A refusal names a variable it read and shows no value.
fn refused(e: &EnvironmentError) -> Result<(), TestCaseError> {
    let variable = match e {
        EnvironmentError::NotUnicode { variable }
        | EnvironmentError::Endpoint { variable }
        | EnvironmentError::Header { variable, .. }
        | EnvironmentError::ResourceAttribute { variable, .. }
        | EnvironmentError::Timeout { variable }
        | EnvironmentError::Protocol { variable }
        | EnvironmentError::Compression { variable } => *variable,
    };
    prop_assert!(VARIABLES.contains(&variable));
    prop_assert!(!e.to_string().contains(SECRET), "{}", e);
    Ok(())
}

/// Bytes for one variable: arbitrary, or text around the secret with the
/// characters the formats use.
fn value_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..40),
        ("[a-z=,%: /.0-9\t\u{e9}\u{0}-]{0,30}", any::<bool>()).prop_map(|(s, first)| {
            let text = if first {
                format!("{SECRET}{s}")
            } else {
                format!("{s}{SECRET}")
            };
            text.into_bytes()
        }),
    ]
}

/// A header name, a value with anything but control characters, and how
/// it is written: each byte outside `A-Za-z0-9._~-` percent-encoded.
fn header() -> impl Strategy<Value = (String, String)> {
    ("[a-z0-9-]{1,16}", "[^\\p{Cc}]{1,20}")
}

fn percent_encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'.' | b'_' | b'~' | b'-' => {
                char::from(b).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

fn header_text(headers: &[(String, String)]) -> String {
    let mut text: String = headers
        .iter()
        .map(|(k, v)| format!(" {k} = {} ", percent_encode(v)))
        .collect::<Vec<_>>()
        .join(",");
    text.push_str(", ,");
    text
}

/// One change to a text: a character inserted, replaced or removed.
fn mutate(text: &str, at: usize, with: char, how: u8) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    let i = if chars.is_empty() {
        0
    } else {
        at % chars.len()
    };
    match how % 3 {
        0 => chars.insert(i, with),
        1 if !chars.is_empty() => chars[i] = with,
        _ if !chars.is_empty() => {
            chars.remove(i);
        }
        _ => chars.push(with),
    }
    chars.into_iter().collect()
}

fn special() -> impl Strategy<Value = char> {
    prop_oneof![
        prop::sample::select(vec![
            ',', '=', '%', ' ', '\t', '\0', '\n', 'é', 'G', '7', '/', ':', '@'
        ]),
        any::<char>(),
    ]
}

proptest! {
    #![proptest_config(fuzz_config())]

    /// Any bytes in any of the variables (not UTF-8 included): read, and
    /// then usable, or refused by the variable's name without its value.
    #[test]
    fn any_otel_environment_is_read_or_refused_by_name(
        values in prop::collection::vec(prop::option::of(value_bytes()), VARIABLES.len()),
    ) {
        let vars: BTreeMap<&'static str, OsString> = VARIABLES
            .iter()
            .zip(values)
            .filter_map(|(k, v)| Some((*k, os(v?))))
            .collect();
        match read(&vars) {
            Ok(e) => usable(&e)?,
            Err(e) => refused(&e)?,
        }
    }

    /// Headers written as the format says (percent-encoded values, spaces
    /// around, blank entries) read back as they were; the signal's own
    /// variable wins over the base one.
    #[test]
    fn headers_written_percent_encoded_read_back_the_same(
        headers in prop::collection::vec(header(), 0..6),
        base in prop::collection::vec(header(), 0..3),
        traces in any::<bool>(),
    ) {
        let mut vars = vec![(HEADERS, header_text(&base))];
        if traces {
            vars.push((TRACES_HEADERS, header_text(&headers)));
        }
        let e = read_str(&vars).expect("valid headers are accepted");
        usable(&e)?;
        let written = if traces { &headers } else { &base };
        let expected: BTreeMap<String, String> = written.iter().cloned().collect();
        prop_assert_eq!(e.headers, expected);
    }

    /// A valid header list changed once: read and usable, or refused at an
    /// entry that exists.
    #[test]
    fn a_header_list_changed_once_is_read_or_refused_at_an_entry(
        headers in prop::collection::vec(header(), 1..5),
        at in any::<usize>(),
        with in special(),
        how in any::<u8>(),
    ) {
        let mut headers = headers;
        headers.push(("x-key".to_owned(), SECRET.to_owned()));
        let text = mutate(&header_text(&headers), at, with, how);
        match read_str(&[(HEADERS, text.clone())]) {
            Ok(e) => usable(&e)?,
            Err(e @ EnvironmentError::Header { variable, entry }) => {
                refused(&e)?;
                prop_assert_eq!(variable, HEADERS);
                prop_assert!(entry >= 1 && entry <= text.matches(',').count() + 1);
            }
            Err(other) => return Err(TestCaseError::fail(format!("{other:?}"))),
        }
    }

    /// Endpoints from parts, well-formed or not: a well-formed one is
    /// accepted (the base one with `/v1/traces` added), anything accepted
    /// is usable, anything refused is refused by name.
    #[test]
    fn an_endpoint_is_a_web_url_with_a_host_or_refused(
        scheme in prop::sample::select(vec!["http", "https", "HTTP", "ftp", "", "http:"]),
        user in prop::option::of("[a-z]{1,5}(:[a-z0-9]{0,6})?"),
        host in prop_oneof!["[a-z0-9-]{1,12}(\\.[a-z0-9-]{1,8}){0,2}", Just("[::1]".to_owned()), "[^/]{0,10}"],
        port in prop::option::of(0u32..100_000),
        path in "(/[a-zA-Z0-9%._~-]{0,8}){0,3}/?",
        base in any::<bool>(),
        change in prop::option::of((any::<usize>(), special(), any::<u8>())),
    ) {
        let user = user.map(|u| format!("{u}@")).unwrap_or_default();
        let port = port.map(|p| format!(":{p}")).unwrap_or_default();
        let mut url = format!("{scheme}://{user}{host}{port}{path}");
        if let Some((at, with, how)) = change {
            url = mutate(&url, at, with, how);
        }
        let variable = if base { ENDPOINT } else { TRACES_ENDPOINT };
        let well_formed = change.is_none()
            && ["http", "https"].contains(&scheme)
            && user.is_empty()
            && (host == "[::1]" || regex_like_host(&host))
            && port.trim_start_matches(':').parse::<u32>().ok().is_none_or(|p| p <= 65_535)
            && !path.contains('%');
        match read_str(&[(variable, url.clone())]) {
            Ok(e) => {
                usable(&e)?;
                if base {
                    prop_assert!(e.endpoint.ends_with("/v1/traces"), "{}", e.endpoint);
                } else {
                    prop_assert_eq!(&e.endpoint, &url);
                }
            }
            Err(e) => {
                prop_assert!(!well_formed, "{} refused: {}", url, e);
                prop_assert_eq!(e, EnvironmentError::Endpoint { variable });
            }
        }
    }

    /// A timeout is accepted exactly when it is ASCII digits (spaces
    /// around allowed) naming 1 to `u64::MAX` milliseconds.
    #[test]
    fn a_timeout_is_positive_whole_milliseconds(
        text in prop_oneof![
            "[0-9]{1,25}",
            "[ +-]?[0-9]{0,22}[ ]?",
            "[0-9\u{660}-\u{669}\u{ff10}-\u{ff19}.e]{1,8}",
            any::<String>(),
        ],
        traces in any::<bool>(),
    ) {
        let variable = if traces { TRACES_TIMEOUT } else { TIMEOUT };
        let trimmed = text.trim();
        let expected = if trimmed.is_empty() {
            None
        } else if trimmed.bytes().all(|b| b.is_ascii_digit()) {
            trimmed.parse::<u64>().ok().filter(|ms| *ms > 0)
        } else {
            None
        };
        match read_str(&[(variable, text.clone())]) {
            Ok(e) => match expected {
                Some(ms) => prop_assert_eq!(e.timeout, Duration::from_millis(ms)),
                // Empty means unset.
                None => prop_assert!(text.is_empty(), "{:?} accepted", text),
            },
            Err(e) => {
                prop_assert!(expected.is_none(), "{:?} refused", text);
                prop_assert_eq!(e, EnvironmentError::Timeout { variable });
            }
        }
    }

    /// Resource attributes read back in order, a key given twice keeping
    /// its last value; `service.name` among them names the service unless
    /// `OTEL_SERVICE_NAME` does.
    #[test]
    fn resource_attributes_read_back_and_name_the_service(
        pairs in prop::collection::vec(
            (prop_oneof!["[a-z][a-z0-9._]{0,10}", Just("service.name".to_owned())], "[a-zA-Z0-9._/:-]{0,12}"),
            0..6,
        ),
        service in prop::option::of("[a-z]{1,8}"),
    ) {
        let text = pairs
            .iter()
            .map(|(k, v)| format!(" {k} = {v} "))
            .collect::<Vec<_>>()
            .join(",");
        let mut vars = vec![(RESOURCE_ATTRIBUTES, text)];
        if let Some(service) = &service {
            vars.push((SERVICE_NAME, service.clone()));
        }
        let e = read_str(&vars).expect("valid attributes are accepted");
        usable(&e)?;
        let mut expected: Vec<(String, String)> = Vec::new();
        for (k, v) in &pairs {
            match expected.iter_mut().find(|(key, _)| key == k) {
                Some(kept) => kept.1 = v.clone(),
                None => expected.push((k.clone(), v.clone())),
            }
        }
        let named = expected
            .iter()
            .position(|(k, _)| k == "service.name")
            .map(|i| expected.remove(i).1)
            .filter(|v| !v.is_empty());
        prop_assert_eq!(&e.resource, &expected);
        let service_name = service.or(named).unwrap_or_else(|| "agentrt".to_owned());
        prop_assert_eq!(e.service_name, service_name);
    }

    /// Resource attributes changed once: read and usable, or refused at an
    /// entry that exists.
    #[test]
    fn resource_attributes_changed_once_are_read_or_refused_at_an_entry(
        pairs in prop::collection::vec(("[a-z][a-z0-9._]{0,10}", "[a-z0-9]{0,8}"), 1..5),
        at in any::<usize>(),
        with in special(),
        how in any::<u8>(),
    ) {
        let text = pairs
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",");
        let text = mutate(&text, at, with, how);
        match read_str(&[(RESOURCE_ATTRIBUTES, text.clone())]) {
            Ok(e) => usable(&e)?,
            Err(EnvironmentError::ResourceAttribute { variable, entry }) => {
                prop_assert_eq!(variable, RESOURCE_ATTRIBUTES);
                prop_assert!(entry >= 1 && entry <= text.matches(',').count() + 1);
            }
            Err(other) => return Err(TestCaseError::fail(format!("{other:?}"))),
        }
    }

    /// The protocol and the compression: accepted exactly as
    /// `http/protobuf` and `none` (any case), or unset.
    #[test]
    fn only_http_protobuf_and_no_compression_are_accepted(
        protocol in prop_oneof![
            prop::sample::select(vec!["http/protobuf", "HTTP/Protobuf", "grpc", "http/json", "", " http/protobuf"]).prop_map(str::to_owned),
            any::<String>(),
        ],
        compression in prop_oneof![
            prop::sample::select(vec!["none", "NONE", "gzip", "zstd", ""]).prop_map(str::to_owned),
            any::<String>(),
        ],
    ) {
        let e = read_str(&[(PROTOCOL, protocol.clone()), (TRACES_COMPRESSION, compression.clone())]);
        let protocol_ok = protocol.is_empty() || protocol.eq_ignore_ascii_case("http/protobuf");
        let compression_ok = compression.is_empty() || compression.eq_ignore_ascii_case("none");
        match e {
            Ok(e) => {
                prop_assert!(protocol_ok && compression_ok);
                usable(&e)?;
            }
            Err(EnvironmentError::Protocol { variable }) => {
                prop_assert!(!protocol_ok);
                prop_assert_eq!(variable, PROTOCOL);
            }
            Err(EnvironmentError::Compression { variable }) => {
                prop_assert!(protocol_ok && !compression_ok);
                prop_assert_eq!(variable, TRACES_COMPRESSION);
            }
            Err(other) => return Err(TestCaseError::fail(format!("{other:?}"))),
        }
    }
}

/// A host of letters, digits, dots and hyphens (what the generator's
/// first branch makes).
fn regex_like_host(host: &str) -> bool {
    !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
}
