//! A voter's subscriber connections: one to a standalone master, or, for a
//! cluster voter, one per node that owns a waited-for channel's slot, made
//! as channels need them, each subscribing by `SSUBSCRIBE` (sharded
//! pub/sub: a release's notice is `SPUBLISH`ed on the node that owns the
//! lock key's slot, which the channel shares; see `message`).
//!
//! A cluster voter's channel goes to the owner of its slot by the voter's
//! slot map (the map lock rounds route by), and stays where it was
//! confirmed until the server ends it: a node whose slot moves away sends
//! an `sunsubscribe` push, and a node that does not own the slot answers
//! `SSUBSCRIBE` with `MOVED`. Then the voter's map is told (a `MOVED`
//! moves the slot at once; any other end marks the map stale, so that the
//! next lock round asks for the topology) and the channel is subscribed
//! again where the map now says, at once for the first
//! [`MAX_QUICK_RETRIES`] times in a row, then spaced out, doubling from
//! [`RETRY_PAUSE`] up to [`MAX_RETRY_PAUSE`] (nodes that disagree on the
//! owner, or a cluster that is down, must not make the leader spin). A
//! subscription confirmed starts the count over. Messages from any node
//! of a cluster voter count for that voter, as one master's do; the voter
//! hears a channel while one of its connections has the subscription
//! confirmed, and the waiters are told when none has any more.
//!
//! In the single-cluster mode (`Builder::cluster_shards`) a voter's keys
//! carry a hash tag of their own, and so do its notices' channels (its own
//! key's: see `command::channel`): its connections follow those channels,
//! and tell what they hear by the resources' channels, as the waiters
//! know them.

use super::subscriber::{Event, SubConn};
use crate::command::channel::{channel_of, key_of};
use crate::conn::Node;
use crate::resp::ServerErrorKind;
use crate::round::{redirect_target, ClusterVoter, Voter};
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

/// How many times in a row a channel is subscribed again at once after
/// its subscription ended or was redirected (a slot moved while being
/// migrated takes two).
const MAX_QUICK_RETRIES: u32 = 4;

/// The first pause before subscribing a channel again after more ends in
/// a row, or after a cluster error other than a redirect (`CLUSTERDOWN`,
/// `TRYAGAIN`); it doubles with each, up to [`MAX_RETRY_PAUSE`].
const RETRY_PAUSE: Duration = Duration::from_millis(100);
const MAX_RETRY_PAUSE: Duration = Duration::from_secs(1);

/// The subscriber connections of one voter.
pub(super) enum VoterSubs {
    /// A standalone master's one connection.
    Master(SubConn),
    /// A cluster voter's.
    Cluster(ClusterSubs),
}

impl VoterSubs {
    /// No connection yet, for a cluster voter (`cluster`) or a standalone
    /// master.
    pub(super) fn new(cluster: bool) -> VoterSubs {
        if cluster {
            VoterSubs::Cluster(ClusterSubs {
                conns: Vec::new(),
                retries: Vec::new(),
            })
        } else {
            VoterSubs::Master(SubConn::new(false))
        }
    }

    /// Brings the connections in line with `wanted` (see
    /// `SubConn::maintain`): the resources' channels, or, for a voter whose
    /// keys carry a hash tag of their own, its own keys' channels.
    pub(super) fn maintain(&mut self, voter: &Voter, wanted: &[&[u8]], now: Instant) {
        match (self, voter.cluster(), voter.key_prefix()) {
            (VoterSubs::Cluster(subs), Some(cluster), None) => subs.maintain(cluster, wanted, now),
            (VoterSubs::Cluster(subs), Some(cluster), Some(prefix)) => {
                let own: Vec<Vec<u8>> = wanted
                    .iter()
                    .filter_map(|channel| own_channel(prefix, channel))
                    .collect();
                let own: Vec<&[u8]> = own.iter().map(Vec::as_slice).collect();
                subs.maintain(cluster, &own, now);
            }
            (VoterSubs::Master(sub), _, _) => sub.maintain(voter.primary(), wanted, now),
            (VoterSubs::Cluster(_), None, _) => {}
        }
    }

    /// The connections to poll: `(connection, fd, read, write)`.
    pub(super) fn interests(&self, out: &mut impl FnMut(usize, RawFd, bool, bool)) {
        let mut add = |j, sub: &SubConn| {
            if let Some((fd, read, write)) = sub.interest() {
                out(j, fd, read, write);
            }
        };
        match self {
            VoterSubs::Master(sub) => add(0, sub),
            VoterSubs::Cluster(subs) => {
                for (j, (_, sub)) in subs.conns.iter().enumerate() {
                    add(j, sub);
                }
            }
        }
    }

    /// When something is due after `now` without the sockets saying so: a
    /// reconnect, or a channel's subscription again.
    pub(super) fn wake_at(&self, now: Instant) -> Option<Instant> {
        match self {
            VoterSubs::Master(sub) => sub.retry_at(),
            VoterSubs::Cluster(subs) => {
                let conns = subs.conns.iter().filter_map(|(_, sub)| sub.retry_at());
                // One due already was subscribed by `maintain`: its answer
                // wakes the leader.
                let retries = subs
                    .retries
                    .iter()
                    .map(|r| r.not_before)
                    .filter(|&at| at > now);
                conns.chain(retries).min()
            }
        }
    }

    /// Connection `j` is ready (see `SubConn::service`): hands each event
    /// to `event`, as the voter's (see the module docs).
    pub(super) fn service(
        &mut self,
        j: usize,
        voter: &Voter,
        (writable, readable): (bool, bool),
        now: Instant,
        event: &mut impl FnMut(Event),
    ) {
        let ready = (writable, readable);
        match (self, voter.key_prefix()) {
            (VoterSubs::Master(sub), _) => sub.service(writable, readable, now, event),
            (VoterSubs::Cluster(subs), None) => subs.service(j, voter, ready, now, event),
            // Told by the resources' channels, as the waiters know them.
            (VoterSubs::Cluster(subs), Some(prefix)) => {
                subs.service(j, voter, ready, now, &mut |e| {
                    if let Some(e) = as_resources(prefix, e) {
                        event(e);
                    }
                });
            }
        }
    }
}

/// A channel to subscribe again after its subscription ended.
#[derive(Debug)]
struct Retry {
    channel: Vec<u8>,
    /// Ends and redirects in a row since its last confirmed subscription.
    count: u32,
    not_before: Instant,
}

/// A cluster voter's subscriber connections.
pub(super) struct ClusterSubs {
    /// By the index of their node in the voter: at most one per node, and
    /// only while it has channels to follow.
    conns: Vec<(usize, SubConn)>,
    /// The channels whose subscriptions ended lately (see the module docs).
    retries: Vec<Retry>,
}

impl ClusterSubs {
    fn maintain(&mut self, cluster: &ClusterVoter, wanted: &[&[u8]], now: Instant) {
        self.retries
            .retain(|r| wanted.contains(&r.channel.as_slice()));
        // Each connection keeps the wanted channels it has: the server
        // ends a subscription whose slot moved away.
        let mut lists: Vec<Vec<&[u8]>> = self
            .conns
            .iter()
            .map(|(_, sub)| wanted.iter().copied().filter(|c| sub.has(c)).collect())
            .collect();
        for &channel in wanted {
            let placed = lists.iter().any(|list| list.contains(&channel));
            let waiting = self
                .retries
                .iter()
                .any(|r| r.channel == channel && now < r.not_before);
            if placed || waiting {
                continue;
            }
            // The channel shares the lock key's slot, so it routes as the
            // key does.
            let k = cluster.route(Some(channel), now);
            let j = match self.conns.iter().position(|(node, _)| *node == k) {
                Some(j) => j,
                None => {
                    self.conns.push((k, SubConn::new(true)));
                    lists.push(Vec::new());
                    self.conns.len() - 1
                }
            };
            lists[j].push(channel);
        }
        for ((k, sub), list) in self.conns.iter_mut().zip(&lists) {
            if let Some(node) = node_of(cluster, *k) {
                sub.maintain(node, list, now);
            }
        }
        // A connection with nothing to follow is closed.
        let mut lists = lists.iter();
        self.conns
            .retain(|(_, sub)| !lists.next().is_some_and(Vec::is_empty) || !sub.is_idle());
    }

    fn service(
        &mut self,
        j: usize,
        voter: &Voter,
        (writable, readable): (bool, bool),
        now: Instant,
        event: &mut impl FnMut(Event),
    ) {
        let Some(cluster) = voter.cluster() else {
            return;
        };
        let Some((k, sub)) = self.conns.get_mut(j) else {
            return;
        };
        let k = *k;
        let mut seen = Vec::new();
        sub.service(writable, readable, now, &mut |e| seen.push(e));
        for e in seen {
            match e {
                Event::Subscribed(channel) => {
                    self.retries.retain(|r| r.channel != channel);
                    event(Event::Subscribed(channel));
                }
                Event::Moved(channel, error) => {
                    let pause = match &error {
                        // The node named owns the slot now: the map learns
                        // it at once (and the next lock round, the rest).
                        Some(error)
                            if matches!(
                                error.kind(),
                                ServerErrorKind::Moved | ServerErrorKind::Ask
                            ) && redirect_target(voter, k, error).is_some() =>
                        {
                            Duration::ZERO
                        }
                        // The slot went elsewhere: the next lock round asks
                        // where.
                        None => {
                            cluster.suspect();
                            Duration::ZERO
                        }
                        // Down, or being migrated, or named nowhere we can
                        // go: try again after a pause.
                        Some(_) => {
                            cluster.suspect();
                            RETRY_PAUSE
                        }
                    };
                    self.retry_later(&channel, pause, now);
                    if !self.hears(&channel) {
                        event(Event::Lost(vec![channel]));
                    }
                }
                Event::Lost(channels) => {
                    // The node may be gone (a failover): ask where its
                    // slots went.
                    cluster.suspect();
                    let unheard: Vec<Vec<u8>> =
                        channels.into_iter().filter(|c| !self.hears(c)).collect();
                    if !unheard.is_empty() {
                        event(Event::Lost(unheard));
                    }
                }
                other => event(other),
            }
        }
    }

    /// Notes that `channel`'s subscription ended, to be asked for again
    /// after `pause` at least (longer after many ends in a row).
    fn retry_later(&mut self, channel: &[u8], pause: Duration, now: Instant) {
        let index = match self.retries.iter().position(|r| r.channel == channel) {
            Some(index) => index,
            None => {
                self.retries.push(Retry {
                    channel: channel.to_vec(),
                    count: 0,
                    not_before: now,
                });
                self.retries.len() - 1
            }
        };
        let retry = &mut self.retries[index];
        retry.count = retry.count.saturating_add(1);
        let backoff = match retry.count.checked_sub(MAX_QUICK_RETRIES + 1) {
            None => Duration::ZERO,
            Some(n) => RETRY_PAUSE
                .saturating_mul(1 << n.min(16))
                .min(MAX_RETRY_PAUSE),
        };
        retry.not_before = now + backoff.max(pause);
    }

    /// Whether one of the connections has `channel`'s subscription
    /// confirmed.
    fn hears(&self, channel: &[u8]) -> bool {
        self.conns.iter().any(|(_, sub)| sub.hears(channel))
    }
}

/// The channel of the key `prefix` then the resource whose channel is
/// `channel` (a voter whose keys carry a tag of their own: see
/// `command::channel`), if it is one of ours.
fn own_channel(prefix: &[u8], channel: &[u8]) -> Option<Vec<u8>> {
    let resource = key_of(channel)?;
    let mut key = Vec::with_capacity(prefix.len() + resource.len());
    key.extend_from_slice(prefix);
    key.extend_from_slice(resource);
    let mut own = Vec::new();
    channel_of(&key, &mut own);
    Some(own)
}

/// The resource's channel for a voter's own channel `channel` (see
/// [`own_channel`]), if it is one.
fn resource_channel(prefix: &[u8], channel: &[u8]) -> Option<Vec<u8>> {
    let resource = key_of(channel)?.strip_prefix(prefix)?;
    let mut out = Vec::new();
    channel_of(resource, &mut out);
    Some(out)
}

/// Event `e` of a voter whose keys carry `prefix`, told by the resources'
/// channels (`None`: about no channel of ours).
fn as_resources(prefix: &[u8], e: Event) -> Option<Event> {
    let name = |channel: Vec<u8>| resource_channel(prefix, &channel);
    Some(match e {
        Event::Message { channel, message } => Event::Message {
            channel: name(channel)?,
            message,
        },
        Event::Subscribed(channel) => Event::Subscribed(name(channel)?),
        Event::Refused(channel, error) => Event::Refused(name(channel)?, error),
        Event::Moved(channel, error) => Event::Moved(name(channel)?, error),
        Event::Lost(channels) => Event::Lost(channels.into_iter().filter_map(name).collect()),
    })
}

/// Node `k` of `cluster`, if it knows one.
fn node_of(cluster: &ClusterVoter, k: usize) -> Option<&Node> {
    cluster.node(k).map(|n| &n.node)
}
