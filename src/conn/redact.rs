//! A node URL as errors and `Debug` may show it: never a password, whatever
//! the URL holds, whether it parses or not.

use std::net::IpAddr;

/// `url` as it may be shown; `parses`: whether it is a valid node URL.
///
/// A URL that parses has its credentials (everything before its last `@`)
/// replaced by `***`. One that does not cannot be trusted to say where its
/// credentials end (a password may hold a `,`, a blank or an `@`, and a
/// list split in the wrong place leaves pieces of one), so only what
/// cannot be a password is shown: a scheme, and the host if it is made of
/// a host name's characters (without a scheme, only an IP address); the
/// rest is `***`.
pub(super) fn shown(url: &str, parses: bool) -> String {
    if !parses {
        return unparsed(url);
    }
    let (scheme, rest) = url.split_at(url.find("://").map_or(0, |i| i + 3));
    match rest.rfind('@') {
        Some(at) => format!("{scheme}***@{}", &rest[at + 1..]),
        None => url.to_string(),
    }
}

/// [`shown`] for a URL that does not parse: a scheme, `***@` if there is
/// an `@`, the host if it looks like one, and `***` for anything else.
fn unparsed(url: &str) -> String {
    let scheme_end = url
        .find("://")
        .filter(|&i| is_scheme(&url[..i]))
        .map_or(0, |i| i + 3);
    let (scheme, rest) = url.split_at(scheme_end);
    let mut shown = scheme.to_string();
    let location = match rest.rfind('@') {
        Some(at) => {
            shown.push_str("***@");
            &rest[at + 1..]
        }
        None => rest,
    };
    let host_end = if location.starts_with('[') {
        location.find(']').map_or(location.len(), |i| i + 1)
    } else {
        location
            .find([':', '/', '?', '#'])
            .unwrap_or(location.len())
    };
    let (host, tail) = location.split_at(host_end);
    let host_shown = if scheme.is_empty() {
        // Without a scheme, a word may be anything: a password too.
        host.trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .is_ok()
    } else {
        !host.is_empty()
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._[]:".contains(&b))
    };
    let tail = if host_shown {
        shown.push_str(host);
        tail
    } else {
        location
    };
    if let Some(first) = tail.chars().next() {
        if ":/?#".contains(first) && host_shown {
            shown.push(first);
        }
        shown.push_str("***");
    }
    shown
}

/// Whether `s` is a scheme that may be shown: the usual ones and the
/// usual mistakes (`redis`, `http`, `tcp`, `valkey`, `unix`) are letters
/// alone, and a word with other characters may be part of a password.
fn is_scheme(s: &str) -> bool {
    (1..=16).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphabetic())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_valid_url_shows_all_but_its_credentials() {
        assert_eq!(
            shown("redis://alice:hunter2@h:1/2", true),
            "redis://***@h:1/2"
        );
        assert_eq!(shown("redis://:a@b@h", true), "redis://***@h");
        assert_eq!(shown("redis://:hun, ter2@h", true), "redis://***@h");
        assert_eq!(shown("redis://h:1", true), "redis://h:1");
    }

    #[test]
    fn an_invalid_url_shows_a_scheme_and_a_host_at_most() {
        for (url, expected) in [
            ("redis://:hunter2", "redis://***"),
            ("http://127.0.0.1", "http://127.0.0.1"),
            ("redis://h:0", "redis://h:***"),
            ("redis://[::1]:x", "redis://[::1]:***"),
            ("redis://ho st", "redis://***"),
            ("hunter2", "***"),
            ("[::1]:6379", "[::1]:***"),
            ("hunter2://h", "***"),
            ("", ""),
        ] {
            assert_eq!(shown(url, false), expected, "{url}");
        }
    }
}
