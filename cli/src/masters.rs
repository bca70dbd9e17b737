//! The voters' URLs and credentials, from the command line, files and the
//! environment: standalone masters, whole clusters (`--cluster`, or
//! `cluster(URL,...)` in a list: see `list` for the grammar), and masters
//! Sentinels watch (`sentinel(URL,...;NAME)` in a list: the sentinels'
//! password is theirs, `REDLOCK_SENTINEL_PASSWORD` or in their URLs; the
//! masters' is the masters' password). A password
//! is never needed on the command line: it comes from `REDLOCK_PASSWORD`,
//! a password file, or URLs kept in the environment or a file; one given
//! in `--nodes` or `--cluster` works but draws a warning (any user of the
//! host can read a command line). `rediss://` masters (with the cargo
//! feature `tls`) are checked against the CA in `--tls-ca-file`.

use crate::args::MasterArgs;
use crate::exit::{self, Exit};
use crate::list::{self, Entry};
use crate::output::say;
use redlock_sync::{Builder, Redlock};
use std::ffi::OsString;
use std::fs;
use std::path::Path;

/// The voters, as `redis://` URLs and `cluster(URL,...)` groups separated
/// by commas or white space (see `list`).
pub(crate) const NODES_VARIABLE: &str = "REDLOCK_NODES";
/// The password for every master whose URL has none.
pub(crate) const PASSWORD_VARIABLE: &str = "REDLOCK_PASSWORD";
/// A file holding that password.
pub(crate) const PASSWORD_FILE_VARIABLE: &str = "REDLOCK_PASSWORD_FILE";
/// The ACL user for that password.
pub(crate) const USER_VARIABLE: &str = "REDLOCK_USER";
/// The password of every sentinel (of `sentinel(...)` entries) whose URL
/// has none: the sentinels' own, apart from the masters'.
pub(crate) const SENTINEL_PASSWORD_VARIABLE: &str = "REDLOCK_SENTINEL_PASSWORD";

/// The voters to lock on.
#[derive(PartialEq, Eq)]
pub(crate) struct Masters {
    /// With the credentials filled in (never shown: see `Debug`).
    pub(crate) voters: Vec<Voter>,
    /// What the user should hear about the configuration.
    pub(crate) warnings: Vec<String>,
    tls: Tls,
    /// The masters' credentials for Sentinel voters (user, password: the
    /// sentinels' are in their URLs); never shown.
    sentinel_masters: (Option<String>, Option<String>),
}

/// One voter: one vote in the quorum.
#[derive(PartialEq, Eq)]
pub(crate) enum Voter {
    /// A standalone master's URL (`Builder::nodes`).
    Master(String),
    /// A Redis or Valkey Cluster, by the URLs of some of its nodes
    /// (`Builder::cluster`).
    Cluster(Vec<String>),
    /// The master Sentinels watch: the sentinels' URLs and the master's
    /// name (`Builder::sentinel`).
    Sentinel(Vec<String>, String),
}

impl Voter {
    /// Every URL it names.
    fn urls(&self) -> &[String] {
        match self {
            Voter::Master(url) => std::slice::from_ref(url),
            Voter::Cluster(seeds) | Voter::Sentinel(seeds, _) => seeds,
        }
    }

    fn urls_mut(&mut self) -> &mut [String] {
        match self {
            Voter::Master(url) => std::slice::from_mut(url),
            Voter::Cluster(seeds) | Voter::Sentinel(seeds, _) => seeds,
        }
    }
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
            .field("voters", &self.voters.len())
            .field("warnings", &self.warnings)
            .finish_non_exhaustive()
    }
}

impl Masters {
    /// A client builder for these voters, in their order.
    pub(crate) fn builder(&self) -> Builder {
        let builder = self
            .voters
            .iter()
            .fold(Redlock::builder(), |builder, voter| match voter {
                Voter::Master(url) => builder.nodes([url]),
                Voter::Cluster(seeds) => builder.cluster(seeds),
                Voter::Sentinel(sentinels, master) => builder.sentinel(sentinels, master),
            });
        let builder = if self.voters.iter().any(|v| matches!(v, Voter::Sentinel(..))) {
            let (user, password) = &self.sentinel_masters;
            builder.sentinel_master_auth(user.as_deref(), password.as_deref())
        } else {
            builder
        };
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
) -> Result<Redlock, NoClient> {
    let masters = resolve(args, |name| std::env::var_os(name))
        .map_err(|message| NoClient::said(message, exit::CONFIG))?;
    for warning in &masters.warnings {
        say(&format!("warning: {warning}"));
    }
    configure(masters.builder().node_timeout(node_timeout))
        .build()
        .map_err(|error| NoClient::said(error.to_string(), exit::for_error(&error)))
}

/// Why [`client`] made no client: what it said on stderr (never a
/// password), and how the tool ends.
#[derive(Debug)]
pub(crate) struct NoClient {
    pub(crate) message: String,
    pub(crate) exit: Exit,
}

impl NoClient {
    fn said(message: String, code: u8) -> NoClient {
        say(&message);
        NoClient {
            message,
            exit: Exit::Code(code),
        }
    }
}

/// Gathers the voters: those of `--nodes` then one per `--cluster`, else
/// `--nodes-file`, else `REDLOCK_NODES`; then adds the password
/// (`--password-file`, else `REDLOCK_PASSWORD`, else
/// `REDLOCK_PASSWORD_FILE`) and user (`--user`, else `REDLOCK_USER`) to
/// every URL (a cluster's seeds too) that has no credentials of its own.
/// `env` reads the environment. Errors are configuration errors (exit
/// status 78), and never show a password.
pub(crate) fn resolve(
    args: &MasterArgs,
    env: impl Fn(&str) -> Option<OsString>,
) -> Result<Masters, String> {
    let mut warnings = Vec::new();
    let mut voters = if args.nodes.is_some() || !args.clusters.is_empty() {
        let voters = command_line_voters(args)?;
        if voters
            .iter()
            .flat_map(Voter::urls)
            .any(|u| has_credentials(u))
        {
            warnings.push(format!(
                "a password given in --nodes or --cluster can be read by any user of this host \
                 (ps, /proc); put it in {PASSWORD_VARIABLE} or a --password-file instead"
            ));
        }
        voters
    } else if let Some(file) = &args.nodes_file {
        let list = read_nodes_file(file)?;
        voters_of(&list).map_err(|e| format!("the nodes file {}: {e}", file.display()))?
    } else if let Some(nodes) = env(NODES_VARIABLE) {
        let list = nodes
            .into_string()
            .map_err(|_| format!("{NODES_VARIABLE} is not UTF-8"))?;
        voters_of(&list).map_err(|e| format!("{NODES_VARIABLE}: {e}"))?
    } else {
        return Err(format!(
            "no masters: give --nodes redis://HOST:PORT,... or --cluster redis://HOST:PORT,... \
             (or --nodes-file FILE), or set {NODES_VARIABLE}"
        ));
    };
    if voters.is_empty() {
        return Err("the list of masters is empty".into());
    }
    let total = voters.iter().map(|v| v.urls().len()).sum::<usize>();
    let urls = || voters.iter().flat_map(Voter::urls);
    if let Some(n) = urls().position(|url| user_has_separator(url)) {
        return Err(format!(
            "node URL {} of {total} has a comma, blank or parenthesis in its user name: is \
             redis:// or a separator missing before a URL? (in a user name, write them as %2C, \
             %20, %28 and %29)",
            n + 1,
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
    let secure = urls().any(|url| is_secure(url));
    let tls = read_tls(args, secure)?;
    if let Some(password) = &password {
        let masters = voters
            .iter_mut()
            .filter(|v| !matches!(v, Voter::Sentinel(..)))
            .flat_map(Voter::urls_mut);
        for url in masters {
            if !has_credentials(url) {
                *url = with_credentials(url, user.as_deref().unwrap_or(""), password);
            }
        }
    }
    // Sentinel voters: the sentinels take their own password, the
    // masters the masters'.
    let mut sentinel_masters = (None, None);
    if voters.iter().any(|v| matches!(v, Voter::Sentinel(..))) {
        if let Some(sentinel_password) = env(SENTINEL_PASSWORD_VARIABLE) {
            use std::os::unix::ffi::OsStringExt;
            let sentinel_password = sentinel_password.into_vec();
            let sentinels = voters
                .iter_mut()
                .filter(|v| matches!(v, Voter::Sentinel(..)))
                .flat_map(Voter::urls_mut);
            for url in sentinels {
                if !has_credentials(url) && !sentinel_password.is_empty() {
                    *url = with_credentials(url, "", &sentinel_password);
                }
            }
        }
        let password = password
            .map(|p| {
                String::from_utf8(p).map_err(|_| {
                    "the masters' password is not UTF-8, which Sentinel voters' masters need"
                        .to_string()
                })
            })
            .transpose()?;
        sentinel_masters = (user.clone().filter(|_| password.is_some()), password);
    }
    Ok(Masters {
        voters,
        warnings,
        tls,
        sentinel_masters,
    })
}

/// The voters a list names (see `list`), owned.
fn voters_of(list: &str) -> Result<Vec<Voter>, String> {
    let owned = |urls: &[&str]| urls.iter().map(|u| u.to_string()).collect();
    Ok(list::parse(list)?
        .into_iter()
        .map(|entry| match entry {
            Entry::Master(url) => Voter::Master(url.to_string()),
            Entry::Group(_, seeds) => Voter::Cluster(owned(&seeds)),
            Entry::Sentinel(sentinels, master) => {
                Voter::Sentinel(owned(&sentinels), master.to_string())
            }
        })
        .collect())
}

/// The voters of the command line: `--nodes`'s, then one cluster per
/// `--cluster`.
fn command_line_voters(args: &MasterArgs) -> Result<Vec<Voter>, String> {
    let mut voters = match &args.nodes {
        Some(nodes) => voters_of(nodes).map_err(|e| format!("--nodes: {e}"))?,
        None => Vec::new(),
    };
    for (n, seeds) in args.clusters.iter().enumerate() {
        let which = || match args.clusters.len() {
            1 => "--cluster".to_string(),
            _ => format!(
                "--cluster (the {} of {})",
                ordinal(n + 1),
                args.clusters.len()
            ),
        };
        let seeds = list::urls(seeds).map_err(|e| format!("{}: {e}", which()))?;
        if seeds.is_empty() {
            return Err(format!("{}: no URL given", which()));
        }
        voters.push(Voter::Cluster(
            seeds.into_iter().map(str::to_string).collect(),
        ));
    }
    Ok(voters)
}

/// `1st`, `2nd`, `3rd`, `4th`...
fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (1, 11) | (2, 12) | (3, 13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
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
/// hand the command a password (or cannot be read to tell).
pub(crate) fn nodes_variable_has_credentials(value: &OsString) -> bool {
    value.to_str().is_none_or(|list| {
        list::parse(list).map_or(true, |entries| {
            entries
                .iter()
                .flat_map(Entry::urls)
                .any(|url| has_credentials(url))
        })
    })
}

/// Whether `c` separates URLs in a list (outside credentials).
fn is_separator(c: char) -> bool {
    c == ',' || c.is_whitespace()
}

/// Whether a URL's user name holds a comma or blank: by `list`'s rule
/// it may, but `redis://h1,:pw@h2` (a scheme forgotten) would then be one
/// master whose user name is `h1,`; and `cluster(redis://a)cluster(redis://:pw@b)`
/// (a blank forgotten) one cluster whose seed's user name is
/// `a)cluster(redis`. Refused: a real user name has its comma, blank or
/// parenthesis percent-encoded.
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
    user.contains(|c| is_separator(c) || c == '(' || c == ')')
}

/// One URL (or `cluster(...)` group, which may span lines) per line;
/// blank lines and lines starting with `#` are skipped.
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
mod tests;
