//! Reading who a checked token names: its subject and a claim of names
//! (groups), the same way for every door.

use serde_json::{Map, Value};

/// The longest subject admitted, in characters.
pub const MAX_SUBJECT_CHARS: usize = 200;

/// The token's `sub`: a string of 1 to [`MAX_SUBJECT_CHARS`] characters,
/// none a control character (it is recorded, and shown to people).
///
/// # Errors
///
/// Why not, in words.
///
/// ```
/// let claims = serde_json::json!({"sub": "alice"});
/// assert_eq!(agentrt_oauth::subject(claims.as_object().unwrap()), Ok("alice"));
/// let bad = serde_json::json!({"sub": "a\nb"});
/// assert!(agentrt_oauth::subject(bad.as_object().unwrap()).is_err());
/// ```
pub fn subject(claims: &Map<String, Value>) -> Result<&str, String> {
    let subject = claims
        .get("sub")
        .and_then(Value::as_str)
        .ok_or("the token's sub is not a string")?;
    if subject.is_empty()
        || subject.chars().count() > MAX_SUBJECT_CHARS
        || subject.chars().any(char::is_control)
    {
        return Err(format!(
            "the token's sub is empty, longer than {MAX_SUBJECT_CHARS} characters or holds a \
             control character"
        ));
    }
    Ok(subject)
}

/// The names in `claim` (a string, or a list of strings; absent or `null`:
/// none), sorted, each once.
///
/// # Errors
///
/// The claim is something else, or a list holding something else.
///
/// ```
/// let claims = serde_json::json!({"groups": ["staff", "approvers", "staff"]});
/// let groups = agentrt_oauth::names(claims.as_object().unwrap(), "groups").unwrap();
/// assert_eq!(groups, ["approvers", "staff"]);
/// ```
pub fn names(claims: &Map<String, Value>, claim: &str) -> Result<Vec<String>, String> {
    let not_names = || format!("the {claim} claim is not a list of names");
    let mut names = match claims.get(claim) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(one)) => vec![one.clone()],
        Some(Value::Array(list)) => list
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(not_names)?,
        Some(_) => return Err(not_names()),
    };
    names.sort();
    names.dedup();
    Ok(names)
}
