//! A signed JWT checked against an issuer's keys: its header (an
//! admitted asymmetric algorithm, a key of the set), its signature, and
//! the claims every token of ours must hold (`iss` exactly the issuer,
//! `aud` holding the audience, `exp` and `nbf` within the leeway, a
//! `sub`). What a caller checks beyond that (a type, a nonce, scopes) is
//! its own.

use jsonwebtoken::{Algorithm, Header, Validation};
use serde_json::{Map, Value};

use crate::Keys;

/// The signature algorithms a token may use: asymmetric ones only (a
/// shared-secret algorithm would let anyone holding the public key sign).
pub const ASYMMETRIC: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// What a token must be.
#[derive(Debug, Clone, Copy)]
pub struct Expected<'a> {
    /// Its issuer (`iss`, exactly).
    pub issuer: &'a str,
    /// An audience its `aud` must hold.
    pub audience: &'a str,
    /// How far clocks may disagree, in seconds.
    pub leeway: u64,
    /// The algorithms admitted (a subset of [`ASYMMETRIC`]).
    pub algorithms: &'a [Algorithm],
}

/// A token's header and claims, once it holds.
#[derive(Debug, Clone)]
pub struct Checked {
    /// Its header (its `typ`, say, for the caller to judge).
    pub header: Header,
    /// Its claims.
    pub claims: Map<String, Value>,
}

impl Keys {
    /// Checks `token` as [`Expected`] says, with the key its header names.
    ///
    /// # Errors
    ///
    /// Why it does not hold, in words a caller may be told (no secret is
    /// in them).
    pub async fn check(&self, token: &str, expected: &Expected<'_>) -> Result<Checked, String> {
        let header =
            jsonwebtoken::decode_header(token).map_err(|e| format!("not a signed JWT: {e}"))?;
        if !expected.algorithms.contains(&header.alg) || !ASYMMETRIC.contains(&header.alg) {
            return Err(format!("algorithm {:?} is not admitted", header.alg));
        }
        let key = self
            .key_for(header.kid.as_deref(), header.alg)
            .await
            .map_err(|e| e.to_string())?;
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[expected.issuer]);
        validation.set_audience(&[expected.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.validate_nbf = true;
        validation.leeway = expected.leeway;
        let claims = jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation)
            .map_err(|e| in_words(&e))?
            .claims;
        Ok(Checked { header, claims })
    }
}

/// A claims failure in words a caller can act on.
fn in_words(e: &jsonwebtoken::errors::Error) -> String {
    use jsonwebtoken::errors::ErrorKind;
    match e.kind() {
        ErrorKind::ExpiredSignature => "the token has expired".into(),
        ErrorKind::ImmatureSignature => "the token is not valid yet (nbf)".into(),
        ErrorKind::InvalidAudience => "the token is for another audience".into(),
        ErrorKind::InvalidIssuer => "the token is from another issuer".into(),
        ErrorKind::InvalidSignature => "the signature does not verify".into(),
        ErrorKind::MissingRequiredClaim(claim) => format!("the token has no {claim} claim"),
        _ => format!("the token is not valid: {e}"),
    }
}
