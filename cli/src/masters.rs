//! The masters' URLs and credentials, from the command line, files and the
//! environment. A password is never needed on the command line: it comes
//! from `REDLOCK_PASSWORD`, a password file, or URLs kept in the
//! environment or a file; one given in `--nodes` works but draws a warning
//! (any user of the host can read a command line). `rediss://` masters
//! (with the cargo feature `tls`) are checked against the CA in
//! `--tls-ca-file`.

use crate::args::MasterArgs;
use crate::exit::{self, Exit};
use crate::output::say;
use redlock_sync::{Builder, Redlock};
use std::ffi::OsString;
use std::fs;
use std::path::Path;

/// The masters, as `redis://` URLs separated by commas or white space (see
/// [`split`]).
pub(crate) const NODES_VARIABLE: &str = "REDLOCK_NODES";
/// The password for every master whose URL has none.
pub(crate) const PASSWORD_VARIABLE: &str = "REDLOCK_PASSWORD";
/// A file holding that password.
pub(crate) const PASSWORD_FILE_VARIABLE: &str = "REDLOCK_PASSWORD_FILE";
/// The ACL user for that password.
pub(crate) const USER_VARIABLE: &str = "REDLOCK_USER";

/// The masters to lock on.
#[derive(PartialEq, Eq)]
pub(crate) struct Masters {
    /// With the credentials filled in (never shown: see `Debug`).
    pub(crate) urls: Vec<String>,
    /// What the user should hear about the configuration.
    pub(crate) warnings: Vec<String>,
    tls: Tls,
}

/// The PEM files for `rediss://` masters, read.
#[derive(Default, PartialEq, Eq)]
struct Tls {
    ca: Option<Vec<u8>>,
    /// The client's certificate chain and private key.
    identity: Option<(Vec<u8>, Vec<u8>)>,
}

impl std::fmt::Debug for Masters {
    // The URLs may hold a password, and the TLS identity a private key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Masters")
            .field("urls", &self.urls.len())
            .field("warnings", &self.warnings)
            .finish_non_exhaustive()
    }
}

impl Masters {
    /// A client builder for these masters.
    pub(crate) fn builder(&self) -> Builder {
        let builder = Redlock::builder().nodes(&self.urls);
        #[cfg(feature = "tls")]
        let builder = {
            let mut builder = builder;
            if let Some(ca) = &self.tls.ca {
                builder = builder.tls_root_ca_pem(ca);
            }
            if let Some((chain, key)) = &self.tls.identity {
                builder = builder.tls_client_identity_pem(chain, key);
            }
            builder
        };
        builder
    }
}

/// The client for the masters `args` name, with `node_timeout` and what
/// `configure` adds; the configuration's warnings said. On failure, says why and returns how the
/// tool ends (78 for the configuration, or as the library's error says).
/// The password (and any TLS key) lives on only inside the client.
pub(crate) fn client(
    args: &MasterArgs,
    node_timeout: std::time::Duration,
    configure: impl FnOnce(Builder) -> Builder,
) -> Result<Redlock, Exit> {
    let masters = resolve(args, |name| std::env::var_os(name)).map_err(|message| {
        say(&message);
        Exit::Code(exit::CONFIG)
    })?;
    for warning in &masters.warnings {
        say(&format!("warning: {warning}"));
    }
    configure(masters.builder().node_timeout(node_timeout))
        .build()
        .map_err(|error| {
            say(&error.to_string());
            Exit::Code(exit::for_error(&error))
        })
}

/// Gathers the masters: `--nodes`, else `--nodes-file`, else
/// `REDLOCK_NODES`; then adds the password (`--password-file`, else
/// `REDLOCK_PASSWORD`, else `REDLOCK_PASSWORD_FILE`) and user (`--user`,
/// else `REDLOCK_USER`) to every URL that has no credentials of its own.
/// `env` reads the environment. Errors are configuration errors (exit
/// status 78), and never show a password.
pub(crate) fn resolve(
    args: &MasterArgs,
    env: impl Fn(&str) -> Option<OsString>,
) -> Result<Masters, String> {
    let mut warnings = Vec::new();
    let list = if let Some(nodes) = &args.nodes {
        if split(nodes).into_iter().any(has_credentials) {
            warnings.push(format!(
                "a password given in --nodes can be read by any user of this host (ps, \
                 /proc); put it in {PASSWORD_VARIABLE} or a --password-file instead"
            ));
        }
        nodes.clone()
    } else if let Some(file) = &args.nodes_file {
        read_nodes_file(file)?
    } else if let Some(nodes) = env(NODES_VARIABLE) {
        nodes
            .into_string()
            .map_err(|_| format!("{NODES_VARIABLE} is not UTF-8"))?
    } else {
        return Err(format!(
            "no masters: give --nodes redis://HOST:PORT,... (or --nodes-file FILE), or set \
             {NODES_VARIABLE}"
        ));
    };
    let urls = split(&list);
    if urls.is_empty() {
        return Err("the list of masters is empty".into());
    }
    if let Some(n) = urls.iter().position(|url| user_has_separator(url)) {
        return Err(format!(
            "node URL {} of {} has a comma or blank in its user name: is redis:// missing \
             before a URL? (in a user name, write them as %2C and %20)",
            n + 1,
            urls.len()
        ));
    }
    let password = password(args, &env)?;
    let user = match &args.user {
        Some(user) => Some(user.clone()),
        None => env(USER_VARIABLE)
            .map(|u| {
                u.into_string()
                    .map_err(|_| format!("{USER_VARIABLE} is not UTF-8"))
            })
            .transpose()?,
    };
    if user.is_some() && password.is_none() {
        return Err(format!(
            "a user is given but no password: set {PASSWORD_VARIABLE} or give --password-file"
        ));
    }
    let secure = urls.iter().any(|url| is_secure(url));
    let tls = read_tls(args, secure)?;
    let urls = urls
        .into_iter()
        .map(|url| match &password {
            Some(password) if !has_credentials(url) => {
                with_credentials(url, user.as_deref().unwrap_or(""), password)
            }
            _ => url.to_string(),
        })
        .collect();
    Ok(Masters {
        urls,
        warnings,
        tls,
    })
}

/// Reads the TLS files, if there are `rediss://` masters (`secure`) to use
/// them with.
fn read_tls(args: &MasterArgs, secure: bool) -> Result<Tls, String> {
    let given =
        args.tls_ca_file.is_some() || args.tls_cert_file.is_some() || args.tls_key_file.is_some();
    if !cfg!(feature = "tls") && (secure || given) {
        return Err(
            "rediss:// masters and the --tls-* options need a redlock built with TLS: \
                    cargo install redlock-cli --features tls"
                .into(),
        );
    }
    if given && !secure {
        return Err("--tls-* options are given, but no master is a rediss:// URL".into());
    }
    if !secure {
        return Ok(Tls::default());
    }
    let Some(ca) = &args.tls_ca_file else {
        return Err(
            "rediss:// masters need --tls-ca-file FILE: the CA certificate (PEM) \
                    their certificates must chain to"
                .into(),
        );
    };
    let read = |what: &str, path: &Path| {
        fs::read(path).map_err(|e| format!("cannot read the {what} {}: {e}", path.display()))
    };
    let identity = match (&args.tls_cert_file, &args.tls_key_file) {
        (None, None) => None,
        (Some(chain), Some(key)) => {
            Some((read("certificate file", chain)?, read("key file", key)?))
        }
        _ => return Err("--tls-cert-file and --tls-key-file go together".into()),
    };
    Ok(Tls {
        ca: Some(read("CA file", ca)?),
        identity,
    })
}

fn is_secure(url: &str) -> bool {
    url.get(..9)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("rediss://"))
}

/// Whether the child's environment must lose `REDLOCK_NODES`: it would
/// hand the command a password.
pub(crate) fn nodes_variable_has_credentials(value: &OsString) -> bool {
    value
        .to_str()
        .map_or(true, |list| split(list).into_iter().any(has_credentials))
}

/// Whether `c` separates URLs in a list (outside credentials).
fn is_separator(c: char) -> bool {
    c == ',' || c.is_whitespace()
}

/// Whether `s` starts with `redis://` or `rediss://`, in any case.
fn starts_with_scheme(s: &str) -> bool {
    ["redis://", "rediss://"].iter().any(|scheme| {
        s.get(..scheme.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(scheme))
    })
}

/// The URLs of a list. A URL starts where the list does, or where a
/// `redis://` or `rediss://` follows a comma or a blank; it runs to the
/// next such start, and within it a comma or blank before its last `@`
/// belongs to its credentials (a password may hold them), while one after
/// it separates: a word without a scheme there is an entry of its own
/// (and refused as a URL). So a password holds anything but a comma or
/// blank followed by `redis://` (write that comma as `%2C`).
fn split(list: &str) -> Vec<&str> {
    let mut starts = vec![0];
    for (i, c) in list.char_indices() {
        let next = i + c.len_utf8();
        if is_separator(c) && starts_with_scheme(&list[next..]) {
            starts.push(next);
        }
    }
    starts.push(list.len());
    let mut urls = Vec::new();
    for pair in starts.windows(2) {
        let chunk = &list[pair[0]..pair[1]];
        let credentials = match chunk.rfind('@') {
            Some(at) if starts_with_scheme(chunk) => at + 1,
            _ => 0,
        };
        let mut words = chunk[credentials..].split(is_separator);
        let first = words.next().unwrap_or_default();
        urls.push(&chunk[..credentials + first.len()]);
        urls.extend(words);
    }
    urls.retain(|url| !url.is_empty());
    urls
}

/// Whether a URL's user name holds a comma or blank: by [`split`]'s rule
/// it may, but `redis://h1,:pw@h2` (a scheme forgotten) would then be one
/// master whose user name is `h1,`. Refused: a real user name has its
/// comma or blank percent-encoded.
fn user_has_separator(url: &str) -> bool {
    let Some((_, rest)) = url.split_once("://") else {
        return false;
    };
    let Some(at) = rest.rfind('@') else {
        return false;
    };
    let credentials = &rest[..at];
    let user = credentials
        .split_once(':')
        .map_or(credentials, |(user, _)| user);
    user.contains(is_separator)
}

/// One URL per line; blank lines and lines starting with `#` are skipped.
fn read_nodes_file(path: &Path) -> Result<String, String> {
    let text = fs::read_to_string(path)
        .map_err(|e| format!("cannot read the nodes file {}: {e}", path.display()))?;
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .collect::<Vec<_>>()
        .join(","))
}

fn password(
    args: &MasterArgs,
    env: &impl Fn(&str) -> Option<OsString>,
) -> Result<Option<Vec<u8>>, String> {
    use std::os::unix::ffi::OsStringExt;
    if let Some(file) = &args.password_file {
        return read_password_file(file).map(Some);
    }
    if let Some(password) = env(PASSWORD_VARIABLE) {
        return Ok(Some(password.into_vec()).filter(|p| !p.is_empty()));
    }
    match env(PASSWORD_FILE_VARIABLE) {
        Some(file) => read_password_file(Path::new(&file)).map(Some),
        None => Ok(None),
    }
}

/// The file's contents without one trailing line break.
fn read_password_file(path: &Path) -> Result<Vec<u8>, String> {
    let mut password = fs::read(path)
        .map_err(|e| format!("cannot read the password file {}: {e}", path.display()))?;
    if password.ends_with(b"\n") {
        password.pop();
        if password.ends_with(b"\r") {
            password.pop();
        }
    }
    if password.is_empty() {
        return Err(format!("the password file {} is empty", path.display()));
    }
    Ok(password)
}

/// Whether a URL carries credentials (`scheme://...@host`).
fn has_credentials(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    rest.contains('@')
}

/// `redis://host` with `user:password@` put in front of the host, both
/// percent-encoded. A URL without a scheme is left for the library to
/// reject.
fn with_credentials(url: &str, user: &str, password: &[u8]) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    format!(
        "{scheme}://{}:{}@{rest}",
        percent_encode(user.as_bytes()),
        percent_encode(password)
    )
}

/// Every byte but the URL's unreserved characters as `%XX`.
fn percent_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 3);
    for &b in bytes {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let vars: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        move |name| vars.get(name).cloned()
    }

    fn nodes(list: &str) -> MasterArgs {
        MasterArgs {
            nodes: Some(list.into()),
            ..MasterArgs::default()
        }
    }

    #[test]
    fn takes_the_option_before_the_environment() {
        let from_env = env(&[(NODES_VARIABLE, "redis://e1, redis://e2\nredis://e3")]);
        let m = resolve(&MasterArgs::default(), &from_env).unwrap();
        assert_eq!(m.urls, ["redis://e1", "redis://e2", "redis://e3"]);
        let m = resolve(&nodes("redis://a:1,redis://b:2"), &from_env).unwrap();
        assert_eq!(m.urls, ["redis://a:1", "redis://b:2"]);
        assert!(m.warnings.is_empty());
    }

    #[test]
    fn no_masters_is_a_configuration_error() {
        let e = resolve(&MasterArgs::default(), env(&[])).unwrap_err();
        assert!(e.contains("--nodes") && e.contains(NODES_VARIABLE), "{e}");
        assert!(resolve(&nodes(" , "), env(&[])).is_err());
    }

    #[test]
    fn adds_the_password_from_the_environment_to_urls_without_one() {
        let vars = env(&[(PASSWORD_VARIABLE, "p@ss:w/rd"), (USER_VARIABLE, "alice")]);
        let m = resolve(&nodes("redis://h1:1,redis://:own@h2:2"), vars).unwrap();
        assert_eq!(
            m.urls,
            ["redis://alice:p%40ss%3Aw%2Frd@h1:1", "redis://:own@h2:2"]
        );
    }

    #[test]
    fn warns_about_a_password_on_the_command_line_without_showing_it() {
        let m = resolve(&nodes("redis://:hunter2@h:1"), env(&[])).unwrap();
        assert_eq!(m.warnings.len(), 1);
        assert!(!m.warnings[0].contains("hunter2"));
        assert!(!format!("{m:?}").contains("hunter2"));
        // Not for the same URL in the environment.
        let vars = env(&[(NODES_VARIABLE, "redis://:hunter2@h:1")]);
        assert!(resolve(&MasterArgs::default(), vars)
            .unwrap()
            .warnings
            .is_empty());
    }

    #[test]
    fn reads_the_password_file_without_its_line_break() {
        let dir = std::env::temp_dir().join(format!("redlock-cli-masters-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let file = dir.join("password");
        fs::write(&file, "s3cret\r\n").unwrap();
        let args = MasterArgs {
            password_file: Some(file.clone()),
            ..nodes("redis://h:1")
        };
        let m = resolve(&args, env(&[(PASSWORD_VARIABLE, "ignored")])).unwrap();
        assert_eq!(m.urls, ["redis://:s3cret@h:1"]);
        fs::write(&file, "\n").unwrap();
        assert!(resolve(&args, env(&[])).is_err());
        let missing = MasterArgs {
            password_file: Some(dir.join("missing")),
            ..nodes("redis://h:1")
        };
        assert!(resolve(&missing, env(&[])).unwrap_err().contains("missing"));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_user_without_a_password_is_refused() {
        let args = MasterArgs {
            user: Some("alice".into()),
            ..nodes("redis://h:1")
        };
        assert!(resolve(&args, env(&[])).is_err());
    }

    /// Passwords written in URLs, with what the old split cut them at.
    const PASSWORD_URLS: &str = "redis://:hun,ter2@h1:1, redis://u:hun ter2@h2:2 \
                                 REDIS://:p@ss,w%25rd@h3:3\nredis://:a,@h4";

    #[test]
    fn splits_between_urls_never_inside_credentials() {
        assert_eq!(
            split(PASSWORD_URLS),
            [
                "redis://:hun,ter2@h1:1",
                "redis://u:hun ter2@h2:2",
                "REDIS://:p@ss,w%25rd@h3:3",
                "redis://:a,@h4"
            ]
        );
        assert_eq!(
            split(" redis://a,,redis://b\tredis://c \n"),
            ["redis://a", "redis://b", "redis://c"]
        );
        // After the host, a comma or blank separates, scheme or not.
        assert_eq!(
            split("redis://:p,w@a:1,b:2 c"),
            ["redis://:p,w@a:1", "b:2", "c"]
        );
        assert_eq!(split("a,b rediss://:x,y@c"), ["a", "b", "rediss://:x,y@c"]);
        assert!(split(" , \n").is_empty());
    }

    /// The list from each source, with passwords holding a `,`, a blank, an
    /// `@` and a `%`: the URLs reach the library whole (issue 31, item 5:
    /// they were cut at every comma and blank, and the library's error
    /// showed a piece holding the password).
    #[test]
    fn takes_passwords_with_commas_blanks_ats_and_percents_from_every_source() {
        let expected = split(PASSWORD_URLS);
        assert_eq!(expected.len(), 4);
        let from_env = resolve(
            &MasterArgs::default(),
            env(&[(NODES_VARIABLE, PASSWORD_URLS)]),
        )
        .unwrap();
        assert_eq!(from_env.urls, expected);
        let from_option = resolve(&nodes(PASSWORD_URLS), env(&[])).unwrap();
        assert_eq!(from_option.urls, expected);
        for secret in ["hun", "ter2", "p@ss", "w%25rd"] {
            assert!(!from_option.warnings[0].contains(secret));
            assert!(!format!("{from_option:?}").contains(secret));
        }
        let dir = std::env::temp_dir().join(format!("redlock-cli-split-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let file = dir.join("nodes");
        fs::write(
            &file,
            format!("# masters\n{}\n", PASSWORD_URLS.replace(", ", "\n")),
        )
        .unwrap();
        let args = MasterArgs {
            nodes_file: Some(file),
            ..MasterArgs::default()
        };
        assert_eq!(resolve(&args, env(&[])).unwrap().urls, expected);
        fs::remove_dir_all(&dir).unwrap();
        assert!(nodes_variable_has_credentials(&PASSWORD_URLS.into()));
    }

    #[test]
    fn a_password_from_the_environment_with_commas_blanks_ats_and_percents_is_encoded() {
        let vars = env(&[(PASSWORD_VARIABLE, "hun,ter2 p@ss%")]);
        let m = resolve(&nodes("redis://h1:1 redis://h2:2"), vars).unwrap();
        assert_eq!(
            m.urls,
            [
                "redis://:hun%2Cter2%20p%40ss%25@h1:1",
                "redis://:hun%2Cter2%20p%40ss%25@h2:2"
            ]
        );
    }

    /// `redis://h1,:pw@h2` (a scheme forgotten) would be one master whose
    /// user name is `h1,`: refused, without showing the password.
    #[test]
    fn a_user_name_with_a_comma_or_blank_is_refused() {
        for list in [
            "redis://h1,:hunter2@h2",
            "redis://a redis://h1 u:hunter2@h2",
        ] {
            let e = resolve(&nodes(list), env(&[])).unwrap_err();
            assert!(e.contains("user name") && !e.contains("hunter2"), "{e}");
        }
        // Encoded, they are the user's.
        let m = resolve(&nodes("redis://a%2Cb:pw@h"), env(&[])).unwrap();
        assert_eq!(m.urls, ["redis://a%2Cb:pw@h"]);
    }

    #[test]
    fn tells_which_nodes_variables_carry_a_password() {
        assert!(nodes_variable_has_credentials(
            &"redis://h1,redis://:p@h2".into()
        ));
        assert!(!nodes_variable_has_credentials(
            &"redis://h1,redis://h2".into()
        ));
    }
}
