//! Approvers who sign in with OpenID Connect (`serve --oidc FILE`): the
//! page sends a person to the provider (authorization code with PKCE,
//! `state` and `nonce` checked), and only a subject in the approvers'
//! group gets a session; a decision records the subject and the provider
//! that vouched for it, not a typed name.

mod config;
mod flow;

pub use config::{DEFAULT_APPROVERS_GROUP, DEFAULT_GROUPS_CLAIM, OidcConfig};
pub use flow::{Provider, SIGN_IN_SECONDS, SignInRefusal, SignedIn};

/// Where the provider sends the browser back.
pub const CALLBACK_PATH: &str = "/ui/oidc/callback";
