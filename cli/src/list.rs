//! The grammar of a list of voters, as `--nodes`, `--nodes-file` and
//! `REDLOCK_NODES` write it: URLs of standalone masters, and groups such as
//! `cluster(URL,URL)`, one voter each, separated by commas or white space:
//!
//! ```text
//! redis://m1:6379, cluster(redis://a:7000,redis://b:7000) cluster(redis://c:7000)
//! ```
//!
//! A group is a keyword glued to `(` ([`GROUPS`]: `cluster`, `sentinel`),
//! then URLs in the list's own form, then `)`; a `sentinel(...)` group
//! ends with `;NAME`, the name its sentinels know the master by:
//! `sentinel(redis://s1:26379,redis://s2:26379;mymaster)`. We chose this over a scheme of its own (`redis+cluster://a,b`):
//! a group says where its seeds end without giving the comma two meanings,
//! it holds `rediss://` and credentials as any URL does, it is how the
//! library names a cluster voter (`redlock status` prints
//! `cluster(a:7000,b:7000)`), and more kinds of voters fit the same form.
//!
//! Where a URL starts: where the list does, or where a `redis://`,
//! `rediss://` or a group's keyword follows a comma or a blank, or a
//! `redis://` follows a group's `(`. A URL runs to the next start; within
//! it, a comma, blank or `)` before its last `@` belongs to its
//! credentials (a password may hold them), while one after it separates
//! (a `)` then closes the group, a `;` starts a Sentinel voter's master
//! name, which runs to the `)`). So a password holds anything but a comma
//! or blank followed by `redis://`, `rediss://`, `cluster(` or
//! `sentinel(` (write that comma as `%2C`). Nothing here shows a URL: errors name entries by their
//! place, since a URL or a piece of one may hold a password.

/// A kind of voter written as a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GroupKind {
    /// `cluster(SEED,...)`: a Redis or Valkey Cluster, one voter.
    Cluster,
    /// `sentinel(SENTINEL,...;NAME)`: the master Sentinels watch, one voter.
    Sentinel,
}

/// The keywords that open a group, glued to their `(` (in any case).
const GROUPS: [(&str, GroupKind); 2] = [
    ("cluster(", GroupKind::Cluster),
    ("sentinel(", GroupKind::Sentinel),
];

impl GroupKind {
    /// Its keyword, as the messages write it: `cluster(`.
    pub(crate) fn opener(self) -> &'static str {
        GROUPS
            .iter()
            .find(|(_, kind)| *kind == self)
            .map_or("(", |(opener, _)| opener)
    }
}

/// One voter of a list.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Entry<'a> {
    /// A standalone master's URL (or a word without a scheme, left for the
    /// library to refuse as a URL).
    Master(&'a str),
    /// A group: one voter, reached through these URLs.
    Group(GroupKind, Vec<&'a str>),
    /// `sentinel(URL,...;NAME)`: the sentinels' URLs and the master's name.
    Sentinel(Vec<&'a str>, &'a str),
}

impl<'a> Entry<'a> {
    /// Every URL it names.
    pub(crate) fn urls(&self) -> &[&'a str] {
        match self {
            Entry::Master(url) => std::slice::from_ref(url),
            Entry::Group(_, urls) | Entry::Sentinel(urls, _) => urls,
        }
    }
}

/// What the list is made of, in order.
#[derive(Debug, PartialEq, Eq)]
enum Token<'a> {
    Url(&'a str),
    /// A word with a `(` outside its credentials: no URL, no known group.
    Paren(&'a str),
    Open(GroupKind),
    Close,
    /// `;`: a Sentinel voter's master name follows.
    Semicolon,
}

/// Whether `c` separates entries (outside credentials).
fn is_separator(c: char) -> bool {
    c == ',' || c.is_whitespace()
}

/// Whether `s` starts with `redis://` or `rediss://`, in any case.
fn starts_with_scheme(s: &str) -> bool {
    ["redis://", "rediss://"]
        .iter()
        .any(|scheme| starts_with(s, scheme))
}

/// The group whose keyword `s` starts with, and the keyword's length.
fn group_at(s: &str) -> Option<(GroupKind, usize)> {
    GROUPS
        .iter()
        .find(|(opener, _)| starts_with(s, opener))
        .map(|(opener, kind)| (*kind, opener.len()))
}

/// Whether `s` starts with `prefix` (ASCII), in any case.
fn starts_with(s: &str, prefix: &str) -> bool {
    s.get(..prefix.len())
        .is_some_and(|head| head.eq_ignore_ascii_case(prefix))
}

/// The list's tokens (see the module's notes for the rule).
fn tokens(list: &str) -> Vec<Token<'_>> {
    // Where the chunks start: each holds at most one URL with a scheme,
    // at its start, after any group keywords.
    let mut starts = vec![0];
    for (i, c) in list.char_indices() {
        let next = i + c.len_utf8();
        let rest = &list[next..];
        if is_separator(c) && (starts_with_scheme(rest) || group_at(rest).is_some()) {
            starts.push(next);
        }
    }
    starts.push(list.len());
    let mut tokens = Vec::new();
    for pair in starts.windows(2) {
        let mut chunk = &list[pair[0]..pair[1]];
        while let Some((kind, len)) = group_at(chunk) {
            tokens.push(Token::Open(kind));
            chunk = &chunk[len..];
        }
        let credentials = match chunk.rfind('@') {
            Some(at) if starts_with_scheme(chunk) => at + 1,
            _ => 0,
        };
        // After the credentials, separators and `)` end the URL; the words
        // that follow are entries of their own.
        let word = |from: usize, to: usize| {
            let after_credentials = &chunk[from.max(credentials)..to];
            if after_credentials.contains('(') {
                Token::Paren(&chunk[from..to])
            } else {
                Token::Url(&chunk[from..to])
            }
        };
        let mut word_start = 0;
        for (i, c) in chunk[credentials..].char_indices() {
            let i = credentials + i;
            if is_separator(c) || c == ')' || c == ';' {
                if i > word_start {
                    tokens.push(word(word_start, i));
                }
                if c == ')' {
                    tokens.push(Token::Close);
                }
                if c == ';' {
                    tokens.push(Token::Semicolon);
                }
                word_start = i + c.len_utf8();
            }
        }
        if chunk.len() > word_start {
            tokens.push(word(word_start, chunk.len()));
        }
    }
    tokens
}

/// The voters of a list, or why it cannot be read (never showing what
/// the list holds beyond a group's keyword).
pub(crate) fn parse(list: &str) -> Result<Vec<Entry<'_>>, String> {
    let mut entries = Vec::new();
    // The open group: its kind, its URLs, and (after a `;`) its master
    // name, `Some(None)` until the name is read.
    let mut group: Option<(GroupKind, Vec<&str>)> = None;
    let mut name: Option<Option<&str>> = None;
    for token in tokens(list) {
        let place = entries.len() + 1;
        match (token, &mut group) {
            (Token::Paren(word), _) => return Err(unknown_group(word, place)),
            (Token::Semicolon, Some((GroupKind::Sentinel, _))) if name.is_none() => {
                name = Some(None)
            }
            (Token::Semicolon, _) => {
                return Err(format!(
                    "entry {place} of the list: a `;` outside sentinel(URL,...;NAME), or a second \
                     one in it"
                ))
            }
            (Token::Url(word), Some(_)) if name.is_some() => {
                if name != Some(None) || starts_with_scheme(word) {
                    return Err(format!(
                        "entry {place} of the list: sentinel(...;NAME) takes one NAME after its \
                         `;`, then `)`"
                    ));
                }
                name = Some(Some(word));
            }
            (Token::Url(url), Some((_, urls))) => urls.push(url),
            (Token::Url(url), None) => entries.push(Entry::Master(url)),
            (Token::Open(kind), None) => group = Some((kind, Vec::new())),
            (Token::Open(inner), Some((outer, _))) => {
                return Err(format!(
                    "entry {place} of the list: {}...) inside {}...): groups do not nest",
                    inner.opener(),
                    outer.opener()
                ))
            }
            (Token::Close, None) => {
                return Err(format!(
                    "entry {place} of the list: a `)` that closes no group (a voter is a URL, \
                     cluster(URL,...) or sentinel(URL,...;NAME))"
                ))
            }
            (Token::Close, Some(_)) => {
                let (kind, urls) = group.take().expect("a group is open");
                if urls.is_empty() {
                    return Err(format!(
                        "entry {place} of the list: `{})` names no node",
                        kind.opener()
                    ));
                }
                match (kind, name.take()) {
                    (GroupKind::Sentinel, Some(Some(master))) => {
                        entries.push(Entry::Sentinel(urls, master))
                    }
                    (GroupKind::Sentinel, _) => {
                        return Err(format!(
                            "entry {place} of the list: sentinel(...) names no master: write \
                             sentinel(URL,...;NAME), NAME as the sentinels know the master"
                        ))
                    }
                    (kind, _) => entries.push(Entry::Group(kind, urls)),
                }
            }
        }
    }
    if let Some((kind, _)) = group {
        return Err(format!(
            "entry {} of the list: `{}` has no closing `)`",
            entries.len() + 1,
            kind.opener()
        ));
    }
    Ok(entries)
}

/// The error for a word with a `(` that opens no group: a keyword that
/// does not start an entry, or none redlock knows. The word is never
/// shown (it may be a piece of a password).
fn unknown_group(word: &str, place: usize) -> String {
    if let Some((kind, _)) = group_at(word) {
        return format!(
            "entry {place} of the list: {} must start an entry: put a comma or blank before it",
            kind.opener()
        );
    }
    format!(
        "entry {place} of the list: a `(` that opens no kind of voter redlock knows (a voter \
         is a redis:// URL, cluster(URL,...) or sentinel(URL,...;NAME), with nothing between \
         the keyword and `(`)"
    )
}

/// The URLs of a list that holds no group (`--cluster`'s value).
pub(crate) fn urls(list: &str) -> Result<Vec<&str>, String> {
    let mut urls = Vec::new();
    for entry in parse(list)? {
        match entry {
            Entry::Master(url) => urls.push(url),
            Entry::Group(kind, _) => {
                return Err(format!(
                    "{}...) in a list of URLs: give the URLs alone",
                    kind.opener()
                ))
            }
            Entry::Sentinel(..) => {
                return Err("sentinel(...) in a list of URLs: give the URLs alone".into())
            }
        }
    }
    Ok(urls)
}

#[cfg(test)]
mod tests {
    use super::*;
    use Entry::{Group, Master};
    use GroupKind::Cluster;

    #[test]
    fn reads_masters_and_clusters_in_order() {
        assert_eq!(
            parse("redis://m1:1, cluster(redis://a:7000,redis://b:7000) CLUSTER(redis://c:7000)")
                .unwrap(),
            [
                Master("redis://m1:1"),
                Group(Cluster, vec!["redis://a:7000", "redis://b:7000"]),
                Group(Cluster, vec!["redis://c:7000"]),
            ]
        );
        // Blanks and commas anywhere between, as a nodes file's lines
        // joined with commas leave them.
        assert_eq!(
            parse("cluster(,redis://a redis://b,),\ncluster( redis://c )redis://m").unwrap(),
            [
                Group(Cluster, vec!["redis://a", "redis://b"]),
                Group(Cluster, vec!["redis://c"]),
                Master("redis://m"),
            ]
        );
        assert!(parse(" , \n").unwrap().is_empty());
    }

    #[test]
    fn passwords_keep_commas_blanks_ats_and_parentheses() {
        assert_eq!(
            parse("cluster(redis://:p,w)d@a:1 rediss://u:x y@b:2),redis://:(q)@m").unwrap(),
            [
                Group(Cluster, vec!["redis://:p,w)d@a:1", "rediss://u:x y@b:2"]),
                Master("redis://:(q)@m"),
            ]
        );
        // The masters' grammar is unchanged (issue 31, item 5).
        assert_eq!(
            parse("redis://:hun,ter2@h1:1, redis://u:hun ter2@h2:2 REDIS://:p@ss,w%25rd@h3:3")
                .unwrap(),
            [
                Master("redis://:hun,ter2@h1:1"),
                Master("redis://u:hun ter2@h2:2"),
                Master("REDIS://:p@ss,w%25rd@h3:3"),
            ]
        );
        // After the host, a comma or blank separates, scheme or not.
        assert_eq!(
            parse("redis://:p,w@a:1,b:2 c").unwrap(),
            [Master("redis://:p,w@a:1"), Master("b:2"), Master("c")]
        );
    }

    #[test]
    fn refuses_malformed_groups_without_showing_the_list() {
        for (list, expected) in [
            ("cluster(redis://:hunter2@a:1", "no closing"),
            ("cluster(redis://:hunter2@a:1,redis://b", "no closing"),
            ("redis://:hunter2@a:1)", "closes no group"),
            ("cluster(redis://a) )", "closes no group"),
            ("cluster()", "names no node"),
            ("cluster( , )", "names no node"),
            ("cluster(cluster(redis://:hunter2@a:1))", "do not nest"),
            ("cluster (redis://:hunter2@a:1)", "no kind of voter"),
            ("redis://:hunter2@a:1 hunter2(x)", "no kind of voter"),
            (
                "cluster(redis://a)cluster(redis://b:1)",
                "must start an entry",
            ),
        ] {
            let error = parse(list).unwrap_err();
            assert!(error.contains(expected), "{list}: {error}");
            assert!(
                !error.contains("hunter2") && !error.contains("a:1"),
                "{error}"
            );
        }
        assert!(parse("redis://m cluster(redis://a")
            .unwrap_err()
            .contains("entry 2"));
    }

    #[test]
    fn reads_sentinel_voters_with_their_master_names() {
        assert_eq!(
            parse("redis://m:1, sentinel(redis://s1:26379,redis://s2:26379;locks-a) SENTINEL( redis://:p;w@s3:26379 ; b )")
                .unwrap(),
            [
                Master("redis://m:1"),
                Entry::Sentinel(vec!["redis://s1:26379", "redis://s2:26379"], "locks-a"),
                Entry::Sentinel(vec!["redis://:p;w@s3:26379"], "b"),
            ]
        );
        for (list, expected) in [
            ("sentinel(redis://:hunter2@a:1)", "names no master"),
            ("sentinel(redis://:hunter2@a:1;)", "names no master"),
            ("sentinel(redis://:hunter2@a:1;m;n)", "second one"),
            ("sentinel(redis://:hunter2@a:1;m n)", "one NAME"),
            ("sentinel(redis://:hunter2@a:1;redis://b)", "one NAME"),
            ("cluster(redis://:hunter2@a:1;m)", "outside sentinel"),
            ("redis://a:1;m", "outside sentinel"),
            ("sentinel(;m)", "names no node"),
            ("sentinel(redis://:hunter2@a:1;m", "no closing"),
        ] {
            let error = parse(list).unwrap_err();
            assert!(error.contains(expected), "{list}: {error}");
            assert!(
                !error.contains("hunter2") && !error.contains("a:1"),
                "{error}"
            );
        }
    }

    #[test]
    fn a_list_of_urls_holds_no_group() {
        assert_eq!(
            urls("redis://a:1, redis://:x,y@b:2").unwrap(),
            ["redis://a:1", "redis://:x,y@b:2"]
        );
        assert!(urls("cluster(redis://a)").unwrap_err().contains("cluster("));
    }
}
