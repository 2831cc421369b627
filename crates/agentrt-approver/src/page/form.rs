//! The page's form bodies (`application/x-www-form-urlencoded`), read by
//! the `form_urlencoded` crate.

/// The fields of a form body in order: `+` is a space, `%XX` a byte, a
/// `%` not followed by two hex digits stays itself, bytes that are not
/// UTF-8 become U+FFFD; a pair without `=` has an empty value.
pub fn form_fields(body: &[u8]) -> Vec<(String, String)> {
    form_urlencoded::parse(body)
        .map(|(key, value)| (key.into_owned(), value.into_owned()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_fields_are_decoded() {
        assert_eq!(
            form_fields(b"csrf=a%2Bb&note=two+words%21&hash=&bad=%zz&&lone"),
            [
                ("csrf".to_owned(), "a+b".to_owned()),
                ("note".to_owned(), "two words!".to_owned()),
                ("hash".to_owned(), String::new()),
                ("bad".to_owned(), "%zz".to_owned()),
                ("lone".to_owned(), String::new()),
            ]
        );
    }
}
