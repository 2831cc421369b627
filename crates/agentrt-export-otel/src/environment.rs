//! The `OTEL_*` variables the exporter takes from its environment, read
//! through a lookup function (the process's environment in the binary, a
//! map in tests) and checked whole before anything is built.
//!
//! Read here: the traces endpoint, headers, timeout, protocol and
//! compression (each `OTEL_EXPORTER_OTLP_TRACES_*` first, then
//! `OTEL_EXPORTER_OTLP_*`), `OTEL_SERVICE_NAME` and
//! `OTEL_RESOURCE_ATTRIBUTES`. The exporter is then built from these
//! values, so the OpenTelemetry crates read none of them, with two
//! exceptions they insist on: `opentelemetry-otlp` reads the headers
//! variable again and adds what it finds (for any text accepted here it
//! finds the same pairs), and reads the compression variable when none is
//! configured (accepted here only unset or `none`, which it reads the
//! same way). Nothing else in `OTEL_*` is read (no certificate or insecure
//! settings: the HTTP client's defaults apply).
//!
//! Every error names the variable and, for lists, the entry, never the
//! value: a header may hold a token, an endpoint a password.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::time::Duration;

use http::{HeaderName, HeaderValue, Uri};

/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`: the traces endpoint, used as given.
pub const TRACES_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
/// `OTEL_EXPORTER_OTLP_ENDPOINT`: the collector's base URL (`/v1/traces`
/// is added).
pub const ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// `OTEL_EXPORTER_OTLP_TRACES_HEADERS`: `name=value,…`, values
/// percent-encoded.
pub const TRACES_HEADERS: &str = "OTEL_EXPORTER_OTLP_TRACES_HEADERS";
/// `OTEL_EXPORTER_OTLP_HEADERS`: as [`TRACES_HEADERS`], when that is unset.
pub const HEADERS: &str = "OTEL_EXPORTER_OTLP_HEADERS";
/// `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`: milliseconds per export.
pub const TRACES_TIMEOUT: &str = "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT";
/// `OTEL_EXPORTER_OTLP_TIMEOUT`: as [`TRACES_TIMEOUT`], when that is unset.
pub const TIMEOUT: &str = "OTEL_EXPORTER_OTLP_TIMEOUT";
/// `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`: `http/protobuf` only.
pub const TRACES_PROTOCOL: &str = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL";
/// `OTEL_EXPORTER_OTLP_PROTOCOL`: as [`TRACES_PROTOCOL`], when that is unset.
pub const PROTOCOL: &str = "OTEL_EXPORTER_OTLP_PROTOCOL";
/// `OTEL_EXPORTER_OTLP_TRACES_COMPRESSION`: `none` only.
pub const TRACES_COMPRESSION: &str = "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION";
/// `OTEL_EXPORTER_OTLP_COMPRESSION`: as [`TRACES_COMPRESSION`], when that
/// is unset.
pub const COMPRESSION: &str = "OTEL_EXPORTER_OTLP_COMPRESSION";
/// `OTEL_SERVICE_NAME`: the resource's `service.name`.
pub const SERVICE_NAME: &str = "OTEL_SERVICE_NAME";
/// `OTEL_RESOURCE_ATTRIBUTES`: `key=value,…` on the resource.
pub const RESOURCE_ATTRIBUTES: &str = "OTEL_RESOURCE_ATTRIBUTES";

/// Every variable read, in the order they are checked.
pub const VARIABLES: [&str; 12] = [
    TRACES_ENDPOINT,
    ENDPOINT,
    TRACES_HEADERS,
    HEADERS,
    TRACES_TIMEOUT,
    TIMEOUT,
    TRACES_PROTOCOL,
    PROTOCOL,
    TRACES_COMPRESSION,
    COMPRESSION,
    SERVICE_NAME,
    RESOURCE_ATTRIBUTES,
];

/// The endpoint without any variable (OTLP/HTTP's default).
pub const DEFAULT_ENDPOINT: &str = "http://localhost:4318/v1/traces";
/// The path added to [`ENDPOINT`].
const TRACES_PATH: &str = "/v1/traces";
/// The export timeout without any variable (OTLP's default).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// The service name without any variable.
pub const DEFAULT_SERVICE_NAME: &str = "agentrt";

/// Why the environment cannot configure the exporter. Values are never
/// part of it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvironmentError {
    /// The value is not valid UTF-8.
    #[error("{variable} is not valid UTF-8")]
    NotUnicode {
        /// The variable.
        variable: &'static str,
    },
    /// The endpoint is not an `http://` or `https://` URL with a host (and
    /// a port up to 65535).
    #[error("{variable} is not an http:// or https:// URL with a host")]
    Endpoint {
        /// The variable.
        variable: &'static str,
    },
    /// A header entry is not `name=value` with a valid header name and a
    /// non-empty, validly percent-encoded value.
    #[error(
        "{variable}: entry {entry} is not name=value with a valid header name and a non-empty \
         value (percent-encoded UTF-8)"
    )]
    Header {
        /// The variable.
        variable: &'static str,
        /// Which entry, from 1.
        entry: usize,
    },
    /// A resource attribute entry is not `key=value` with a key.
    #[error("{variable}: entry {entry} is not key=value with a key")]
    ResourceAttribute {
        /// The variable.
        variable: &'static str,
        /// Which entry, from 1.
        entry: usize,
    },
    /// The timeout is not a whole number of milliseconds above zero.
    #[error("{variable} is not a whole number of milliseconds above zero")]
    Timeout {
        /// The variable.
        variable: &'static str,
    },
    /// A protocol other than `http/protobuf`.
    #[error("{variable}: this exporter sends http/protobuf only (unset it or set http/protobuf)")]
    Protocol {
        /// The variable.
        variable: &'static str,
    },
    /// A compression other than `none`.
    #[error("{variable}: this exporter does not compress (unset it or set none)")]
    Compression {
        /// The variable.
        variable: &'static str,
    },
}

/// What the environment says about where and how spans are sent.
#[derive(Clone, PartialEq, Eq)]
pub struct OtelEnvironment {
    /// The traces endpoint: [`TRACES_ENDPOINT`] as given, else
    /// [`ENDPOINT`] with `/v1/traces` added, else [`DEFAULT_ENDPOINT`].
    pub endpoint: String,
    /// Request headers: name as given, value percent-decoded.
    pub headers: BTreeMap<String, String>,
    /// How long one export may take.
    pub timeout: Duration,
    /// The resource's `service.name`: [`SERVICE_NAME`], else the one in
    /// [`RESOURCE_ATTRIBUTES`], else [`DEFAULT_SERVICE_NAME`].
    pub service_name: String,
    /// The other resource attributes, in their order (a key given twice
    /// keeps its last value).
    pub resource: Vec<(String, String)>,
}

impl std::fmt::Debug for OtelEnvironment {
    // Header values and the endpoint's user part may be secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let endpoint = self
            .endpoint
            .parse::<Uri>()
            .ok()
            .and_then(|uri| {
                let host = uri.host()?.to_owned();
                let port = uri.port_u16().map(|p| format!(":{p}")).unwrap_or_default();
                Some(format!(
                    "{}://{host}{port}{}",
                    uri.scheme_str()?,
                    uri.path()
                ))
            })
            .unwrap_or_default();
        f.debug_struct("OtelEnvironment")
            .field("endpoint", &endpoint)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("timeout", &self.timeout)
            .field("service_name", &self.service_name)
            .field("resource", &self.resource)
            .finish()
    }
}

impl OtelEnvironment {
    /// Reads the process's environment (values that are not UTF-8 are
    /// refused, never guessed at).
    pub fn from_process() -> Result<OtelEnvironment, EnvironmentError> {
        OtelEnvironment::from_lookup(|name| std::env::var_os(name))
    }

    /// Reads the variables through `lookup` (an empty value counts as
    /// unset, as in OpenTelemetry's SDKs). Every variable in
    /// [`VARIABLES`] is checked, also the one another overrides.
    pub fn from_lookup(
        lookup: impl Fn(&str) -> Option<OsString>,
    ) -> Result<OtelEnvironment, EnvironmentError> {
        let mut values: BTreeMap<&'static str, String> = BTreeMap::new();
        for variable in VARIABLES {
            let Some(value) = lookup(variable) else {
                continue;
            };
            let value = value
                .into_string()
                .map_err(|_| EnvironmentError::NotUnicode { variable })?;
            if !value.is_empty() {
                values.insert(variable, value);
            }
        }
        let get = |name: &str| values.get(name).map(String::as_str);
        // Both of each pair are checked; the signal's own one wins.
        let traces_endpoint = get(TRACES_ENDPOINT)
            .map(|v| endpoint(TRACES_ENDPOINT, v.to_owned()))
            .transpose()?;
        let base_endpoint = get(ENDPOINT)
            .map(|v| endpoint(ENDPOINT, join(v, TRACES_PATH)))
            .transpose()?;
        let traces_headers = get(TRACES_HEADERS)
            .map(|v| headers(TRACES_HEADERS, v))
            .transpose()?;
        let base_headers = get(HEADERS).map(|v| headers(HEADERS, v)).transpose()?;
        let traces_timeout = get(TRACES_TIMEOUT)
            .map(|v| timeout(TRACES_TIMEOUT, v))
            .transpose()?;
        let base_timeout = get(TIMEOUT).map(|v| timeout(TIMEOUT, v)).transpose()?;
        for variable in [TRACES_PROTOCOL, PROTOCOL] {
            if get(variable).is_some_and(|v| !v.eq_ignore_ascii_case("http/protobuf")) {
                return Err(EnvironmentError::Protocol { variable });
            }
        }
        for variable in [TRACES_COMPRESSION, COMPRESSION] {
            if get(variable).is_some_and(|v| !v.eq_ignore_ascii_case("none")) {
                return Err(EnvironmentError::Compression { variable });
            }
        }
        let mut resource = get(RESOURCE_ATTRIBUTES)
            .map(|v| resource_attributes(RESOURCE_ATTRIBUTES, v))
            .transpose()?
            .unwrap_or_default();
        let named = resource
            .iter()
            .position(|(key, _)| key == "service.name")
            .map(|i| resource.remove(i).1)
            .filter(|name| !name.is_empty());
        Ok(OtelEnvironment {
            endpoint: traces_endpoint
                .or(base_endpoint)
                .unwrap_or_else(|| DEFAULT_ENDPOINT.to_owned()),
            headers: traces_headers.or(base_headers).unwrap_or_default(),
            timeout: traces_timeout.or(base_timeout).unwrap_or(DEFAULT_TIMEOUT),
            service_name: get(SERVICE_NAME)
                .map(str::to_owned)
                .or(named)
                .unwrap_or_else(|| DEFAULT_SERVICE_NAME.to_owned()),
            resource,
        })
    }
}

/// `base` and `path` with one slash between them.
fn join(base: &str, path: &str) -> String {
    format!("{}{path}", base.strip_suffix('/').unwrap_or(base))
}

/// `url`, if it is an `http://` or `https://` URL with a host (and a
/// port that fits in 16 bits).
fn endpoint(variable: &'static str, url: String) -> Result<String, EnvironmentError> {
    let uri: Uri = url
        .parse()
        .map_err(|_| EnvironmentError::Endpoint { variable })?;
    let web = matches!(uri.scheme_str(), Some("http" | "https"));
    let port_fits = uri.port().is_none() || uri.port_u16().is_some();
    if !web || !port_fits || uri.host().is_none_or(str::is_empty) {
        return Err(EnvironmentError::Endpoint { variable });
    }
    Ok(url)
}

/// `name=value,…`: blank entries skipped, names and values trimmed, values
/// percent-decoded (`%` followed by two hex digits only) into UTF-8; each
/// a valid HTTP header. A name given twice keeps its last value.
fn headers(
    variable: &'static str,
    text: &str,
) -> Result<BTreeMap<String, String>, EnvironmentError> {
    let mut out = BTreeMap::new();
    for (i, entry) in text.split(',').enumerate() {
        let entry = entry.trim();
        if entry.is_empty() {
            continue;
        }
        let bad = || EnvironmentError::Header {
            variable,
            entry: i + 1,
        };
        let (name, value) = entry.split_once('=').ok_or_else(bad)?;
        let (name, value) = (name.trim(), value.trim());
        let value = percent_decode(value).ok_or_else(bad)?;
        if value.is_empty()
            || HeaderName::from_bytes(name.as_bytes()).is_err()
            || HeaderValue::from_str(&value).is_err()
        {
            return Err(bad());
        }
        out.insert(name.to_owned(), value);
    }
    Ok(out)
}

/// `text` with each `%XX` replaced by its byte; `None` when a `%` is not
/// followed by two hex digits or the bytes are not UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(text.len());
    let mut rest = text.as_bytes();
    while let Some((&byte, after)) = rest.split_first() {
        if byte == b'%' {
            let (&[high, low], after) = after.split_first_chunk::<2>()?;
            let digit = |b: u8| char::from(b).to_digit(16);
            let value = digit(high)? * 16 + digit(low)?;
            bytes.push(u8::try_from(value).ok()?);
            rest = after;
        } else {
            bytes.push(byte);
            rest = after;
        }
    }
    String::from_utf8(bytes).ok()
}

/// A positive number of milliseconds, in ASCII digits.
fn timeout(variable: &'static str, text: &str) -> Result<Duration, EnvironmentError> {
    let text = text.trim();
    let bad = EnvironmentError::Timeout { variable };
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad);
    }
    match text.parse::<u64>() {
        Ok(0) | Err(_) => Err(bad),
        Ok(ms) => Ok(Duration::from_millis(ms)),
    }
}

/// `key=value,…`: blank entries skipped, keys and values trimmed (values
/// kept as given, as OpenTelemetry's SDK does). A key given twice keeps
/// its last value, in its first place.
fn resource_attributes(
    variable: &'static str,
    text: &str,
) -> Result<Vec<(String, String)>, EnvironmentError> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (i, entry) in text.split(',').enumerate() {
        let entry = entry.trim();
        if entry.is_empty() {
            continue;
        }
        let bad = EnvironmentError::ResourceAttribute {
            variable,
            entry: i + 1,
        };
        let (key, value) = entry.split_once('=').ok_or(bad.clone())?;
        let (key, value) = (key.trim(), value.trim());
        if key.is_empty() {
            return Err(bad);
        }
        match out.iter_mut().find(|(k, _)| k == key) {
            Some(kept) => kept.1 = value.to_owned(),
            None => out.push((key.to_owned(), value.to_owned())),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Result<OtelEnvironment, EnvironmentError> {
        let map: BTreeMap<String, OsString> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), OsString::from(*v)))
            .collect();
        OtelEnvironment::from_lookup(|name| map.get(name).cloned())
    }

    #[test]
    fn nothing_set_gives_the_otlp_defaults_and_agentrt_as_the_service() {
        let e = env(&[]).unwrap();
        assert_eq!(e.endpoint, DEFAULT_ENDPOINT);
        assert!(e.headers.is_empty());
        assert_eq!(e.timeout, DEFAULT_TIMEOUT);
        assert_eq!(e.service_name, "agentrt");
        assert!(e.resource.is_empty());
    }

    #[test]
    fn the_signals_own_variables_win_and_the_base_endpoint_gets_the_traces_path() {
        let e = env(&[
            (ENDPOINT, "http://collector:4318/"),
            (HEADERS, "a=1"),
            (TIMEOUT, "500"),
        ])
        .unwrap();
        assert_eq!(e.endpoint, "http://collector:4318/v1/traces");
        assert_eq!(e.headers["a"], "1");
        assert_eq!(e.timeout, Duration::from_millis(500));
        let e = env(&[
            (ENDPOINT, "http://collector:4318"),
            (TRACES_ENDPOINT, "https://traces.example/in"),
            (HEADERS, "a=1"),
            (TRACES_HEADERS, "b=%20two%C3%A9"),
            (TIMEOUT, "500"),
            (TRACES_TIMEOUT, "7"),
        ])
        .unwrap();
        assert_eq!(e.endpoint, "https://traces.example/in");
        assert_eq!(e.headers.len(), 1);
        assert_eq!(e.headers["b"], " twoé");
        assert_eq!(e.timeout, Duration::from_millis(7));
    }

    #[test]
    fn a_service_name_in_the_resource_attributes_is_kept_unless_otel_service_name_says_otherwise() {
        let e = env(&[(RESOURCE_ATTRIBUTES, "service.name=billing, region = eu ,")]).unwrap();
        assert_eq!(e.service_name, "billing");
        assert_eq!(e.resource, [("region".to_owned(), "eu".to_owned())]);
        let e = env(&[
            (RESOURCE_ATTRIBUTES, "service.name=billing"),
            (SERVICE_NAME, "agents"),
        ])
        .unwrap();
        assert_eq!(e.service_name, "agents");
    }

    #[test]
    fn each_malformed_variable_is_refused_by_name_without_its_value() {
        for (pairs, expected) in [
            (
                vec![(HEADERS, "authorization=Bearer%20s3cret,broken")],
                EnvironmentError::Header {
                    variable: HEADERS,
                    entry: 2,
                },
            ),
            (
                vec![(TRACES_HEADERS, "x=%zz")],
                EnvironmentError::Header {
                    variable: TRACES_HEADERS,
                    entry: 1,
                },
            ),
            (
                vec![(ENDPOINT, "collector:4318")],
                EnvironmentError::Endpoint { variable: ENDPOINT },
            ),
            (
                vec![(TIMEOUT, "-5")],
                EnvironmentError::Timeout { variable: TIMEOUT },
            ),
            (
                vec![(TIMEOUT, "0")],
                EnvironmentError::Timeout { variable: TIMEOUT },
            ),
            (
                vec![(PROTOCOL, "grpc")],
                EnvironmentError::Protocol { variable: PROTOCOL },
            ),
            (
                vec![(TRACES_COMPRESSION, "gzip")],
                EnvironmentError::Compression {
                    variable: TRACES_COMPRESSION,
                },
            ),
            (
                vec![(RESOURCE_ATTRIBUTES, "a=1,=2")],
                EnvironmentError::ResourceAttribute {
                    variable: RESOURCE_ATTRIBUTES,
                    entry: 2,
                },
            ),
        ] {
            let e = env(&pairs).unwrap_err();
            assert_eq!(e, expected);
            assert!(!e.to_string().contains("s3cret"), "{e}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_value_that_is_not_utf8_is_refused_by_name() {
        use std::os::unix::ffi::OsStringExt;
        for variable in VARIABLES {
            let e = OtelEnvironment::from_lookup(|name| {
                (name == variable).then(|| OsString::from_vec(vec![b'a', 0xff]))
            })
            .unwrap_err();
            assert_eq!(e, EnvironmentError::NotUnicode { variable });
        }
    }

    #[test]
    fn debug_shows_header_names_and_the_endpoints_host_only() {
        let e = env(&[
            (TRACES_ENDPOINT, "http://user:pw@collector:4318/v1/traces"),
            (HEADERS, "authorization=Bearer%20s3cret"),
        ])
        .unwrap();
        let shown = format!("{e:?}");
        assert!(shown.contains("authorization") && shown.contains("collector:4318"));
        assert!(
            !shown.contains("s3cret") && !shown.contains("pw"),
            "{shown}"
        );
    }
}
