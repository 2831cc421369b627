//! Every parser of the approver that reads outside input, fuzzed: the
//! webhook's requests (routes from method and path, the signature
//! headers and their check, the query and `Accept` header, decision and
//! cancellation bodies, the observer's lenient read) and the page's
//! (login-link tokens, form bodies, the session cookie, the forwarded
//! protocol header). Each property calls the parser directly, with
//! arbitrary input and with near-valid input made to reach its deep
//! paths, and asserts no panic plus what must hold.

use agentrt_approver::page::{
    Link, LinkRefusal, MAX_TOKEN_BYTES, Scope, SecureCookie, form_fields, login_token, session_id,
};
use agentrt_approver::signature::{SIGNATURE_HEADER, Secret, SignedHeaders, Verifier, sign};
use agentrt_approver::webhook::request::{
    BodyRefusal, asked_by, cancellation_body, cancellation_body_as, decision_body,
    decision_body_as, signature_headers, wants_text,
};
use agentrt_approver::webhook::routes::{Route, route};
use axum::http::{HeaderMap, HeaderName, HeaderValue, header};
use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, RngSeed};
use serde_json::{Value, json};

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

const NOW: i64 = 1_790_000_000;

fn secret() -> Secret {
    Secret::new([7u8; 32]).unwrap()
}

fn verifier() -> Verifier {
    Verifier::new(secret(), std::time::Duration::from_secs(300), 10, 20)
}

/// Text of every kind: ASCII, the separators the parsers split on,
/// controls, and characters outside ASCII.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9]{0,12}",
        "[ -~]{0,40}",
        "[./=&;,%+ \\-_a-f0-9]{0,40}",
        any::<String>(),
        Just("é😀\u{0}\u{202e}".to_owned()),
    ]
}

/// A run or approval id as an operator would have one, or odd.
fn id() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z0-9-]{1,20}",
        1 => "[^/?#]{1,20}",
    ]
}

fn header_map(pairs: &[(&str, Vec<u8>)]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (name, value) in pairs {
        let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_bytes(value),
        ) else {
            continue;
        };
        headers.append(name, value);
    }
    headers
}

/// Header value bytes: printable text mostly, sometimes any byte.
fn header_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => "[ -~]{0,80}".prop_map(String::into_bytes),
        1 => prop::collection::vec(any::<u8>(), 0..80),
    ]
}

/// A JSON value of any kind, nested a few levels.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        Just(json!(u64::MAX)),
        text().prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-z_]{1,12}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A decision body for `run` and `id`: valid, or with one field dropped,
/// of another type or value, or an unknown field added.
fn decision_json(run: String, id: String) -> impl Strategy<Value = Value> {
    let fields = ["run_id", "approval_id", "hash", "by", "note"];
    let valid = json!({
        "run_id": run, "approval_id": id, "hash": "ab".repeat(32), "by": "alice", "note": "ok",
    });
    (
        0u8..6,
        json_value(),
        text(),
        prop::sample::select(fields.to_vec()),
    )
        .prop_map(move |(mutation, other, string, field)| {
            let mut body = valid.clone();
            if let Some(object) = body.as_object_mut() {
                match mutation {
                    0 => {}
                    1 => {
                        object.remove(field);
                    }
                    2 => {
                        object.insert(field.to_owned(), other);
                    }
                    3 => {
                        object.insert(field.to_owned(), Value::from(string));
                    }
                    4 => {
                        object.insert("extra".to_owned(), other);
                    }
                    _ => {
                        object.insert(field.to_owned(), json!(u64::MAX));
                    }
                }
            }
            body
        })
}

/// What a decision body must give for approval `id` of `run`, said
/// independently of the parser: an object of the five fields at most,
/// each a string, naming the path's run and approval, with a hash and an
/// author: `(hash, by, note)`.
fn expected_decision(body: &Value, run: &str, id: &str) -> Option<(String, String, String)> {
    let object = body.as_object()?;
    let known = ["run_id", "approval_id", "hash", "by", "note"];
    if object.keys().any(|k| !known.contains(&k.as_str())) {
        return None;
    }
    let mut strings = Vec::new();
    for name in known {
        match object.get(name) {
            None => strings.push(String::new()),
            Some(Value::String(s)) => strings.push(s.clone()),
            Some(_) => return None,
        }
    }
    let [run_id, approval_id, hash, by, note]: [String; 5] = strings.try_into().ok()?;
    (run_id == run && approval_id == id && !hash.is_empty() && !by.is_empty())
        .then_some((hash, by, note))
}

/// A method the webhook knows or not.
fn method() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec!["GET", "HEAD", "POST", "PUT", "DELETE", "get", ""])
            .prop_map(str::to_owned),
        text(),
    ]
}

/// A path of the webhook's segments, odd ones among them.
fn path() -> impl Strategy<Value = String> {
    let segment = prop_oneof![
        4 => prop::sample::select(vec!["runs", "approvals", "approve", "reject", "cancel", "r1", "a1"])
            .prop_map(str::to_owned),
        1 => prop::sample::select(vec!["", "%2F", "..", "é", " ", "runs?x"]).prop_map(str::to_owned),
        1 => text(),
    ];
    prop_oneof![
        4 => prop::collection::vec(segment, 0..7).prop_map(|s| format!("/{}", s.join("/"))),
        1 => text(),
    ]
}

/// One of `token`'s bytes changed (or one added or removed), still text.
fn mutated(token: &str, at: usize, kind: u8, byte: u8) -> String {
    let mut bytes = token.as_bytes().to_vec();
    let at = at % bytes.len().max(1);
    match kind % 3 {
        0 if !bytes.is_empty() => {
            let replacement = if bytes[at] == byte { byte ^ 1 } else { byte };
            bytes[at] = replacement;
        }
        1 => bytes.insert(at, byte),
        _ if !bytes.is_empty() => {
            bytes.remove(at);
        }
        _ => bytes.push(byte),
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

proptest! {
    #![proptest_config(fuzz_config())]

    /// Any method and path: a route only for the five shapes, and the
    /// route spells the path back exactly.
    #[test]
    fn a_route_is_found_only_for_the_five_shapes_and_spells_its_path(
        method in method(),
        path in path(),
    ) {
        let read = method == "GET" || method == "HEAD";
        if let Some(found) = route(&method, &path) {
            let (spelled, needs_read) = match found {
                Route::Pending { run } => (format!("/runs/{run}/approvals"), true),
                Route::Show { run, id } => (format!("/runs/{run}/approvals/{id}"), true),
                Route::Approve { run, id } => (format!("/runs/{run}/approvals/{id}/approve"), false),
                Route::Reject { run, id } => (format!("/runs/{run}/approvals/{id}/reject"), false),
                Route::Cancel { run } => (format!("/runs/{run}/cancel"), false),
            };
            prop_assert_eq!(&spelled, &path);
            prop_assert_eq!(needs_read, read);
            prop_assert!(needs_read || method == "POST");
        }
    }

    /// Any signature headers on any request: the check never panics and
    /// never passes (no MAC is guessed); a plausible one has a signature
    /// of its form.
    #[test]
    fn random_signature_headers_never_pass_the_check(
        timestamp in header_bytes(),
        nonce in header_bytes(),
        signature in header_bytes(),
        method in method(),
        path in path(),
        body in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let headers = header_map(&[
            ("x-approval-timestamp", timestamp),
            ("x-approval-nonce", nonce),
            (SIGNATURE_HEADER, signature),
        ]);
        let read = signature_headers(&headers);
        let mut v = verifier();
        let plausible = v.plausible(NOW, &read);
        let checked = v.check(NOW, &read, &method, &path, &body);
        prop_assert!(checked.is_err(), "a random signature never holds");
        prop_assert!(!plausible || read.signature.is_some_and(|s| s.len() == 67));
    }

    /// A signed request with one part changed (time, nonce, method, path,
    /// body, signature) fails the check; unchanged it passes, once.
    #[test]
    fn a_signed_request_changed_in_one_part_fails_the_check(
        offset in -400i64..400,
        nonce in "[ -~]{1,64}",
        method in method(),
        path in path(),
        body in prop::collection::vec(any::<u8>(), 0..64),
        part in 0u8..7,
        at in any::<usize>(),
        byte in any::<u8>(),
    ) {
        let timestamp = NOW + offset;
        let signed = sign(&secret(), timestamp, &nonce, &method, &path, &body);
        let stamp = timestamp.to_string();
        let (mut t, mut n, mut m, mut p, mut b, mut s) =
            (stamp.clone(), nonce.clone(), method.clone(), path.clone(), body.clone(), signed.clone());
        match part {
            0 => t = mutated(&t, at, byte, byte),
            1 => n = mutated(&n, at, byte, byte),
            2 => m = mutated(&m, at, byte, byte),
            3 => p = mutated(&p, at, byte, byte),
            4 => b = mutated(&String::from_utf8_lossy(&b), at, byte, byte).into_bytes(),
            5 => s = mutated(&s, at, byte, byte),
            _ => {}
        }
        // A timestamp spelled with leading zeros is the same time.
        let same_time = t.bytes().all(|c| c.is_ascii_digit()) && t.parse::<i64>().ok() == Some(timestamp);
        let changed = (&n, &m, &p, &b, &s) != (&nonce, &method, &path, &body, &signed) || !same_time;
        let headers = SignedHeaders { timestamp: Some(&t), nonce: Some(&n), signature: Some(&s), key_id: None };
        let mut v = verifier();
        let checked = v.verify(NOW, &headers, &m, &p, &b);
        let in_window = offset.abs() <= 300;
        if changed {
            // A changed timestamp that reads as another number is another
            // request: the MAC no longer matches.
            prop_assert!(checked.is_err(), "changed part {part}: {t} {n:?} {m:?} {p:?}");
        } else {
            prop_assert_eq!(checked.is_ok(), in_window);
            prop_assert_eq!(v.plausible(NOW, &headers), in_window);
            if in_window {
                prop_assert!(v.verify(NOW, &headers, &m, &p, &b).is_err(), "a replay");
            }
        }
    }

    /// Any bytes as a decision or cancellation body: a typed refusal or a
    /// body that names the path's run (and approval) and has its author
    /// (signed with a key: that key's approver, and no one else).
    #[test]
    fn any_body_is_a_refusal_or_a_decision_for_the_path(
        run in id(),
        id in id(),
        body in prop_oneof![
            prop::collection::vec(any::<u8>(), 0..200),
            json_value().prop_map(|v| v.to_string().into_bytes()),
        ],
    ) {
        match decision_body(&run, &id, &body) {
            Ok(decision) => {
                prop_assert_eq!(&decision.run_id, &run);
                prop_assert_eq!(&decision.approval_id, &id);
                prop_assert!(!decision.hash.is_empty() && !decision.by.is_empty());
                prop_assert_eq!(decision.request_signature, None);
            }
            Err(refusal) => prop_assert!(matches!(
                refusal,
                BodyRefusal::NotADecision | BodyRefusal::DecisionElsewhere | BodyRefusal::DecisionIncomplete
            )),
        }
        match cancellation_body(&run, &body) {
            Ok(cancellation) => {
                prop_assert_eq!(&cancellation.run_id, &run);
                prop_assert!(!cancellation.by.is_empty());
            }
            Err(refusal) => prop_assert!(matches!(
                refusal,
                BodyRefusal::NotACancellation | BodyRefusal::CancellationElsewhere | BodyRefusal::CancellationIncomplete
            )),
        }
        // Signed with alice's key: alice decides, or nothing does.
        match decision_body_as(&run, &id, &body, Some("alice")) {
            Ok(decision) => prop_assert_eq!(decision.by.as_str(), "alice"),
            Err(refusal) => prop_assert!(matches!(
                refusal,
                BodyRefusal::NotADecision | BodyRefusal::DecisionElsewhere
                    | BodyRefusal::DecisionIncomplete | BodyRefusal::ByMismatch
            )),
        }
        match cancellation_body_as(&run, &body, Some("alice")) {
            Ok(cancellation) => prop_assert_eq!(cancellation.by.as_str(), "alice"),
            Err(refusal) => prop_assert!(matches!(
                refusal,
                BodyRefusal::NotACancellation | BodyRefusal::CancellationElsewhere
                    | BodyRefusal::CancellationIncomplete | BodyRefusal::ByMismatch
            )),
        }
        let _ = asked_by(&body);
    }

    /// A decision body with one field dropped, retyped, changed or added:
    /// accepted exactly when it still is a whole decision for the path,
    /// with the values it holds.
    #[test]
    fn a_decision_body_with_one_field_changed_is_read_exactly(
        (run, id, body) in (id(), id()).prop_flat_map(|(run, id)| {
            (Just(run.clone()), Just(id.clone()), decision_json(run, id))
        }),
    ) {
        let read = decision_body(&run, &id, body.to_string().as_bytes())
            .map(|d| (d.hash, d.by, d.note));
        prop_assert_eq!(read.ok(), expected_decision(&body, &run, &id), "{}", body);
    }

    /// Any query and `Accept` value: text exactly when `format=text` is
    /// one of the pairs or the value starts with `text/plain`.
    #[test]
    fn text_is_asked_by_the_query_pair_or_the_accept_header(
        query in prop::option::of(text()),
        accept in header_bytes(),
    ) {
        let headers = header_map(&[("accept", accept)]);
        let asked = query.as_deref().is_some_and(|q| q.split('&').any(|p| p == "format=text"))
            || headers
                .get(header::ACCEPT)
                .is_some_and(|v| v.to_str().is_ok_and(|v| v.starts_with("text/plain")));
        prop_assert_eq!(wants_text(query.as_deref(), &headers), asked);
    }

    /// Any text as a login token: never read unless made with the secret.
    #[test]
    fn an_arbitrary_token_is_never_read(
        token in prop_oneof![
            text(),
            (any::<u32>(), "[a-f0-9]{0,20}", "[a-f0-9]{0,20}", "[a-zA-Z0-9_-]{0,70}", "[a-f0-9]{0,70}")
                .prop_map(|(e, b, r, n, t)| format!("{e}.{b}.{r}.{n}.{t}")),
            "[0-9.a-f]{0,5000}",
        ],
        now in any::<i64>(),
    ) {
        let read = Link::read(&secret(), &token, now);
        prop_assert!(read.is_err(), "{token}");
        if token.len() > MAX_TOKEN_BYTES {
            prop_assert_eq!(read, Err(LinkRefusal::Malformed));
        }
    }

    /// A token made for any person, run, time and nonce reads back as
    /// made before its time and expired after; changed in one byte it is
    /// never read.
    #[test]
    fn a_made_token_reads_back_and_one_changed_byte_is_never_read(
        by in "\\PC{1,40}",
        run in "\\PC{1,60}",
        expires in 0i64..=i64::MAX,
        nonce in "[A-Za-z0-9_-]{1,64}",
        now in any::<i64>(),
        at in any::<usize>(),
        kind in any::<u8>(),
        byte in any::<u8>(),
    ) {
        let token = login_token(&secret(), &by, &run, expires, &nonce);
        let read = Link::read(&secret(), &token, now);
        if token.len() > MAX_TOKEN_BYTES {
            prop_assert_eq!(read, Err(LinkRefusal::Malformed));
        } else if now >= expires {
            prop_assert_eq!(read, Err(LinkRefusal::Expired));
        } else {
            let link = read.map_err(|e| TestCaseError::fail(e.to_string()))?;
            let Scope::Run(link_run) = link.scope.clone() else {
                return Err(TestCaseError::fail("a run's link read as a console link"));
            };
            prop_assert_eq!(
                login_token(&secret(), &link.by, &link_run, link.expires, &link.nonce),
                token.clone()
            );
            prop_assert_eq!((link.by, link_run, link.expires, link.nonce), (by, run, expires, nonce));
        }
        let changed = mutated(&token, at, kind, byte);
        if changed != token {
            prop_assert!(Link::read(&secret(), &changed, now).is_err(), "{changed}");
        }
    }

    /// Any bytes as a form: fields, never a panic; pairs encoded as a
    /// browser does read back the same.
    #[test]
    fn form_bodies_read_back_what_a_browser_encodes(
        body in prop::collection::vec(any::<u8>(), 0..300),
        pairs in prop::collection::vec((text(), text()), 0..6),
    ) {
        let _ = form_fields(&body);
        let encoded = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .finish();
        prop_assert_eq!(form_fields(encoded.as_bytes()), pairs);
    }

    /// Any `Cookie` headers: the session id is the value of the first
    /// `agentrt_session` pair, found among others.
    #[test]
    fn the_session_cookie_is_found_among_any_others(
        values in prop::collection::vec(header_bytes(), 0..4),
        others in prop::collection::vec(("[a-z_]{1,16}", "[a-zA-Z0-9]{0,20}"), 0..4),
        id in "[a-f0-9]{1,64}",
        at in any::<usize>(),
    ) {
        let arbitrary: Vec<(&str, Vec<u8>)> = values.into_iter().map(|v| ("cookie", v)).collect();
        let headers = header_map(&arbitrary);
        if let Some(found) = session_id(&headers) {
            let all: Vec<&str> = headers.get_all(header::COOKIE).iter().filter_map(|v| v.to_str().ok()).collect();
            let pair = format!("agentrt_session={found}");
            prop_assert!(all.iter().any(|v| v.contains(&pair)));
        }
        let mut pairs: Vec<String> = others
            .iter()
            .filter(|(name, _)| name != "agentrt_session")
            .map(|(name, value)| format!("{name}={value}"))
            .collect();
        let at = at % (pairs.len() + 1);
        pairs.insert(at, format!("agentrt_session={id}"));
        let headers = header_map(&[("cookie", pairs.join("; ").into_bytes())]);
        prop_assert_eq!(session_id(&headers), Some(id.as_str()));
    }

    /// Any forwarded-protocol header: `Secure` exactly when one of its
    /// comma-separated values is `https`.
    #[test]
    fn the_forwarded_protocol_makes_the_cookie_secure_only_when_it_says_https(
        values in prop::collection::vec(header_bytes(), 0..3),
        https in any::<bool>(),
    ) {
        let name = HeaderName::from_static("x-forwarded-proto");
        let rule = SecureCookie::WhenForwardedProto(name.clone());
        let mut pairs: Vec<(&str, Vec<u8>)> = values.into_iter().map(|v| ("x-forwarded-proto", v)).collect();
        if https {
            pairs.push(("x-forwarded-proto", b"http, HTTPS ".to_vec()));
        }
        let headers = header_map(&pairs);
        let says = headers
            .get_all(&name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| v.split(',').any(|p| p.trim().eq_ignore_ascii_case("https")));
        prop_assert_eq!(rule.applies(&headers), says);
        prop_assert!(!https || says);
        prop_assert!(!SecureCookie::Never.applies(&headers));
    }
}
