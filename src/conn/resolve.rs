//! How a master's host name becomes addresses: the [`Resolve`] trait a
//! handle is given ([`Builder::resolver`](crate::Builder::resolver)), and
//! the system's resolver, its default.

use std::fmt;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};

/// Turns a master's host name into socket addresses, for a handle
/// ([`Builder::resolver`](crate::Builder::resolver); the default is
/// [`SystemResolver`]).
///
/// A handle asks when it is built (each URL's host name), when it meets
/// a cluster node named by host, and again, away from its rounds, when a
/// connection to a node could not be made or its cluster's topology was
/// refreshed: at most once a second per node, on a short-lived thread
/// (`redlock-resolve`), so a slow lookup never holds a lock call up.
/// IP addresses are never looked up.
///
/// It may block (the system's resolver can take seconds on an
/// unanswering DNS server), and is called from several threads at once.
/// A lookup that fails, or finds nothing, leaves the node at the address
/// it had.
///
/// ```
/// use std::io;
/// use std::net::{Ipv4Addr, SocketAddr};
///
/// /// Names from a service catalogue, say.
/// struct Catalogue;
///
/// impl redlock_sync::Resolve for Catalogue {
///     fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
///         match host {
///             "lock-a.internal" => Ok(vec![(Ipv4Addr::new(10, 0, 0, 1), port).into()]),
///             _ => Err(io::Error::new(io::ErrorKind::NotFound, "not in the catalogue")),
///         }
///     }
/// }
/// ```
pub trait Resolve: Send + Sync + 'static {
    /// The addresses of `host` (a host name as the URL or the cluster
    /// wrote it, never an IP address), each with `port`, the preferred
    /// first. An error's message is shown as the reason (host names are
    /// no secret; a resolver must not put credentials in it).
    fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>>;
}

/// A closure is a resolver: `|host, port| ...` gives the addresses of
/// `host` (each with `port`), as [`Resolve::resolve`] does.
///
/// ```
/// use std::net::SocketAddr;
///
/// let moved: SocketAddr = "127.0.0.1:7001".parse().unwrap();
/// let builder = redlock_sync::Redlock::builder()
///     .nodes(["redis://lock-a.internal:7001"])
///     .resolver(move |host: &str, _port: u16| match host {
///         "lock-a.internal" => Ok(vec![moved]),
///         _ => Err(std::io::Error::new(std::io::ErrorKind::NotFound, "unknown")),
///     });
/// # drop(builder);
/// ```
impl<F> Resolve for F
where
    F: Fn(&str, u16) -> io::Result<Vec<SocketAddr>> + Send + Sync + 'static,
{
    fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        self(host, port)
    }
}

/// The system's resolver (`getaddrinfo(3)`, through the standard
/// library): `/etc/hosts`, DNS, and whatever else the system is set up
/// to ask. The default of [`Builder::resolver`](crate::Builder::resolver).
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        Ok((host, port).to_socket_addrs()?.collect())
    }
}

/// A handle's resolver, shared by its nodes.
#[derive(Clone)]
pub(crate) struct Resolver(pub(crate) std::sync::Arc<dyn Resolve>);

impl Default for Resolver {
    fn default() -> Resolver {
        Resolver(std::sync::Arc::new(SystemResolver))
    }
}

impl fmt::Debug for Resolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Resolver")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_resolver_reads_the_hosts_file() {
        // `localhost` is in every hosts file: no DNS server is asked.
        let found = SystemResolver
            .resolve("localhost", 7001)
            .expect("localhost");
        assert!(!found.is_empty());
        assert!(found
            .iter()
            .all(|a| a.ip().is_loopback() && a.port() == 7001));
    }
}
