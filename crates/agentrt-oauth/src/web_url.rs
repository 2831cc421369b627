//! Which URLs an issuer may be reached at.

use url::Url;

use crate::OAuthError;

/// The longest URL used (a run label holds 256 characters).
const MAX_URL_CHARS: usize = 200;

/// `url` parsed, if it may be used for `field`: HTTPS, or HTTP to a
/// loopback host (127.0.0.0/8, `[::1]`, `localhost`); no user or password;
/// at most 200 characters.
///
/// # Errors
///
/// [`OAuthError::Url`] saying why.
pub fn web_url(field: &str, url: &str) -> Result<Url, OAuthError> {
    let refused = |detail: String| OAuthError::Url {
        field: field.to_owned(),
        url: url.to_owned(),
        detail,
    };
    if url.chars().count() > MAX_URL_CHARS {
        return Err(refused(format!("longer than {MAX_URL_CHARS} characters")));
    }
    let parsed = Url::parse(url).map_err(|e| refused(e.to_string()))?;
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(refused("no user or password in the URL".into()));
    }
    match parsed.scheme() {
        "https" => Ok(parsed),
        "http" if is_loopback(&parsed) => Ok(parsed),
        _ => Err(refused(
            "must be https:// (http:// only to 127.0.0.1, [::1] or localhost)".into(),
        )),
    }
}

fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn https_anywhere_and_http_on_loopback_only() {
        for (url, ok) in [
            ("https://id.example.com", true),
            ("http://127.0.0.1:4000/x", true),
            ("http://127.9.9.9", true),
            ("http://[::1]:80", true),
            ("http://LOCALHOST:1", true),
            ("http://id.example.com", false),
            ("http://10.0.0.1", false),
            ("ftp://127.0.0.1", false),
            ("https://u:p@id.example.com", false),
            ("not a url", false),
        ] {
            assert_eq!(web_url("issuer", url).is_ok(), ok, "{url}");
        }
        let long = format!("https://id.example.com/{}", "a".repeat(200));
        assert!(web_url("issuer", &long).is_err());
    }
}
