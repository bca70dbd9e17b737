//! What a server says it is, asked by every new connection's handshake
//! (`INFO server` and `INFO replication`), and whether that makes it a
//! voter: a master of its own, of the kind it was given as.
//!
//! A node that is not refused here tells its `run_id` (new at each start
//! of the server) and its replication ids (`master_replid`, and
//! `master_replid2`, the history a promoted replica continues), which the
//! round layer compares across voters: two voters that reach one server,
//! or one replication history, are one vote (see `round::independence`).
//!
//! Refused here, whatever the other voters are ([`NotAVoter`]):
//! - a node given as a standalone master that is a replica (`role:slave`:
//!   its keys are its master's, and it refuses writes), a cluster node
//!   (`redis_mode:cluster`, Valkey's `server_mode`) or a Sentinel;
//! - a node given as a cluster's seed that is not a cluster node;
//! - any KeyDB active replica (`role:active-replica`) or multi-master node
//!   (a second master, `master_1_host`): it and its peers accept writes to
//!   one key and copy them to each other, so two clients could each win
//!   one of them.
//!
//! The same read serves the failover re-check (`conn::identity`): a
//! connection to a standalone master or a Sentinel voter's master keeps
//! what its handshake was told, and a later read on it that tells another
//! run id or replication id, or a refusal (a replica now), means the
//! master changed under the connection ([`Identity::changed_to`]).
//!
//! A cluster's replicas are members of their voter (a seed may be one), so
//! `role:slave` is no refusal there. A server that refuses `INFO` (an ACL
//! user without `@dangerous`, a renamed command) is not checked: nothing is
//! learnt, and it votes as before. The answers are read line by line from
//! one bulk string, within the codec's bounds; a field that does not parse
//! counts as absent.

use crate::error::{NodeError, NotAVoter, ProtocolError};
use crate::resp::{encode_command, Arg, Reply};
use std::fmt;

/// A server's `run_id`: 40 hex digits, random at each start.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct RunId([u8; 40]);

impl RunId {
    /// The id in `text`, if it is 40 hex digits.
    pub(crate) fn parse(text: &[u8]) -> Option<RunId> {
        hex40(text).map(RunId)
    }
}

impl fmt::Debug for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Hex digits only (checked by `parse`).
        write!(f, "RunId({})", String::from_utf8_lossy(&self.0))
    }
}

/// A replication id (`master_replid`): 40 hex digits naming one history
/// of writes. A master's is new when it starts or is promoted; its
/// replicas take it on when they sync; a promoted replica keeps the one it
/// replicated as its `master_replid2`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ReplId([u8; 40]);

impl ReplId {
    /// The id in `text`, if it is 40 hex digits and not all zeros (a
    /// server without a second history says `master_replid2:000...0`).
    pub(crate) fn parse(text: &[u8]) -> Option<ReplId> {
        hex40(text)
            .filter(|id| id.iter().any(|&b| b != b'0'))
            .map(ReplId)
    }
}

impl fmt::Debug for ReplId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Hex digits only (checked by `parse`).
        write!(f, "ReplId({})", String::from_utf8_lossy(&self.0))
    }
}

/// `text` as 40 hex digits, if it is.
fn hex40(text: &[u8]) -> Option<[u8; 40]> {
    let id: [u8; 40] = text.try_into().ok()?;
    id.iter().all(u8::is_ascii_hexdigit).then_some(id)
}

/// A server's replication history as `INFO replication` tells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct History {
    /// `master_replid`: the history it writes (a master) or copies (a
    /// replica) now.
    pub(crate) current: ReplId,
    /// `master_replid2`: the history it continued when it was promoted,
    /// if any.
    pub(crate) previous: Option<ReplId>,
}

impl History {
    /// Whether the two servers' writes are one history: the same current
    /// one, or one continuing the other's (a replica promoted beside its
    /// still-running master, a server restarted from the other's dump).
    /// Two servers that both continue a third's history are not compared:
    /// restarted from copies of one dump, they are independent from then
    /// on.
    pub(crate) fn shared_with(&self, other: &History) -> bool {
        self.current == other.current
            || Some(self.current) == other.previous
            || self.previous == Some(other.current)
    }
}

/// What a server told of itself (see [`IdentityProbe::judge`]): each part
/// if its probe answered with it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Identity {
    /// `run_id` (`INFO server`).
    pub(crate) run: Option<RunId>,
    /// The replication ids (`INFO replication`).
    pub(crate) history: Option<History>,
}

impl Identity {
    /// Whether nothing was told.
    pub(crate) fn is_empty(&self) -> bool {
        self.run.is_none() && self.history.is_none()
    }

    /// What `self` and `later` told together, `later` winning.
    pub(crate) fn and(self, later: Identity) -> Identity {
        Identity {
            run: later.run.or(self.run),
            history: later.history.or(self.history),
        }
    }

    /// Whether `later`, read again on the connection whose handshake was
    /// told `self`, shows that the master changed under it: another run id
    /// (restarted, or another process behind the address) or another
    /// current replication id (a replica promoted, a failback). What
    /// either read did not tell is no change.
    pub(crate) fn changed_to(&self, later: &Identity) -> bool {
        fn differ<T: PartialEq>(set_up: Option<T>, later: Option<T>) -> bool {
            matches!((set_up, later), (Some(a), Some(b)) if a != b)
        }
        differ(self.run, later.run)
            || differ(
                self.history.map(|h| h.current),
                later.history.map(|h| h.current),
            )
    }
}

/// Which `INFO` section a probe asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Section {
    /// `INFO server`: `run_id`, and the mode (standalone, cluster,
    /// sentinel).
    Server,
    /// `INFO replication`: the role, and a replica's master.
    Replication,
}

/// What the voter was given the node as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GivenAs {
    /// A standalone master (`Builder::nodes`).
    Standalone,
    /// A node of a cluster voter (`Builder::cluster`, `cluster_shards`).
    ClusterNode,
}

/// One probe of the handshake: a section of `INFO`, judged against what
/// the node was given as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct IdentityProbe {
    pub(crate) section: Section,
    pub(crate) given_as: GivenAs,
}

/// Most masters a multi-master refusal names.
const MAX_NAMED_MASTERS: usize = 8;

/// Longest host name a refusal repeats (a server's own configuration, but
/// bounded all the same).
const MAX_HOST_LEN: usize = 255;

impl IdentityProbe {
    /// The probes of a node given as `given_as`, in the order they are
    /// sent.
    pub(crate) fn both(given_as: GivenAs) -> [IdentityProbe; 2] {
        [Section::Server, Section::Replication].map(|section| IdentityProbe { section, given_as })
    }

    /// Appends the probe's command to `out`.
    pub(crate) fn encode(self, out: &mut Vec<u8>) {
        let section: &[u8] = match self.section {
            Section::Server => b"server",
            Section::Replication => b"replication",
        };
        encode_command(out, &[Arg::Bytes(b"INFO"), Arg::Bytes(section)]);
    }

    /// Judges the answer: what this section tells of the server's
    /// identity (nothing if the ids are missing or `INFO` was refused), or
    /// why the node is no voter. A reply `INFO` never gives is a protocol
    /// error.
    pub(crate) fn judge(self, reply: &Reply<'_>) -> Result<Identity, NodeError> {
        let text = match reply {
            Reply::Bulk(text) => *text,
            // Refused (an ACL, a renamed command): nothing is learnt.
            Reply::Error(_) => return Ok(Identity::default()),
            other => {
                return Err(NodeError::Protocol(ProtocolError::UnexpectedReply(
                    format!("{} to INFO", super::describe(other)),
                )))
            }
        };
        let refusal = match self.section {
            Section::Server => self.judge_server(text),
            Section::Replication => self.judge_replication(text),
        };
        refusal.map_err(NodeError::NotAVoter)
    }

    fn judge_server(self, text: &[u8]) -> Result<Identity, NotAVoter> {
        let mode = field(text, b"redis_mode").or_else(|| field(text, b"server_mode"));
        match (mode, self.given_as) {
            (Some(b"sentinel"), _) => Err(NotAVoter::Sentinel),
            (Some(b"cluster"), GivenAs::Standalone) => Err(NotAVoter::ClusterNode),
            (Some(b"standalone"), GivenAs::ClusterNode) => Err(NotAVoter::NotACluster),
            _ => Ok(Identity {
                run: field(text, b"run_id").and_then(RunId::parse),
                history: None,
            }),
        }
    }

    fn judge_replication(self, text: &[u8]) -> Result<Identity, NotAVoter> {
        let master = |prefix: &str| {
            let host = field(text, format!("{prefix}_host").as_bytes())?;
            let port = field(text, format!("{prefix}_port").as_bytes())?;
            Some(address(host, port))
        };
        // KeyDB names its masters master_host, master_1_host, ...
        if field(text, b"master_1_host").is_some() {
            let masters: Vec<String> = std::iter::once(master("master"))
                .chain((1..MAX_NAMED_MASTERS).map(|k| master(&format!("master_{k}"))))
                .map_while(|m| m)
                .collect();
            return Err(NotAVoter::MultiMaster {
                masters: masters.join(", "),
            });
        }
        let unknown = || "an unnamed master".to_string();
        match (field(text, b"role"), self.given_as) {
            (Some(b"active-replica"), _) => Err(NotAVoter::ActiveReplica {
                master: master("master").unwrap_or_else(unknown),
            }),
            (Some(b"slave" | b"replica"), GivenAs::Standalone) => Err(NotAVoter::Replica {
                master: master("master").unwrap_or_else(unknown),
            }),
            _ => Ok(Identity {
                run: None,
                history: field(text, b"master_replid")
                    .and_then(ReplId::parse)
                    .map(|current| History {
                        current,
                        previous: field(text, b"master_replid2").and_then(ReplId::parse),
                    }),
            }),
        }
    }
}

/// The value of `name` in an `INFO` text (`name:value` lines, `\r\n`
/// ended, `#` section headers), if present.
fn field<'a>(text: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    text.split(|&b| b == b'\n').find_map(|line| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        line.strip_prefix(name)?.strip_prefix(b":")
    })
}

/// `host:port` as errors write it (an IPv6 host in brackets), the host cut
/// to [`MAX_HOST_LEN`] bytes.
fn address(host: &[u8], port: &[u8]) -> String {
    let host = String::from_utf8_lossy(&host[..host.len().min(MAX_HOST_LEN)]);
    let port = std::str::from_utf8(port)
        .ok()
        .and_then(|p| p.parse::<u16>().ok())
        .map_or_else(|| "?".to_string(), |p| p.to_string());
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STANDALONE: [IdentityProbe; 2] = [
        IdentityProbe {
            section: Section::Server,
            given_as: GivenAs::Standalone,
        },
        IdentityProbe {
            section: Section::Replication,
            given_as: GivenAs::Standalone,
        },
    ];

    fn judge(probe: IdentityProbe, text: &str) -> Result<Identity, NodeError> {
        probe.judge(&Reply::Bulk(text.as_bytes()))
    }

    fn refusal(probe: IdentityProbe, text: &str) -> NotAVoter {
        match judge(probe, text) {
            Err(NodeError::NotAVoter(why)) => why,
            other => panic!("not refused: {other:?}"),
        }
    }

    const RUN: &str = "1552701f45bc89930404d889ced11b58115477c6";

    #[test]
    fn a_standalone_master_tells_its_run_id() {
        let [server, replication] = STANDALONE;
        // Redis 7.0 and Valkey 8.1/9.1 (which say server_mode).
        for mode in ["redis_mode", "server_mode"] {
            let text = format!("# Server\r\nredis_version:7.0.15\r\n{mode}:standalone\r\nrun_id:{RUN}\r\ntcp_port:6379\r\n");
            let told = judge(server, &text).unwrap();
            let run = told.run.expect("a run id");
            assert_eq!(run, RunId::parse(RUN.as_bytes()).unwrap());
            assert!(format!("{run:?}").contains(RUN));
            assert_eq!(told.history, None);
        }
        let text = "# Replication\r\nrole:master\r\nconnected_slaves:1\r\nslave0:ip=127.0.0.1,port=23451,state=online,offset=0,lag=0\r\nmaster_replid:de2824b2d6204e43d534cb474838242c2a414e0b\r\nmaster_replid2:0000000000000000000000000000000000000000\r\n";
        let told = judge(replication, text).unwrap();
        assert_eq!(told.run, None);
        let history = told.history.expect("a replication id");
        assert_eq!(
            history.current,
            ReplId::parse(b"de2824b2d6204e43d534cb474838242c2a414e0b").unwrap()
        );
        assert_eq!(history.previous, None, "all zeros: no second history");
        // Refused INFO, or an id that is not one: nothing learnt.
        assert!(server
            .judge(&Reply::Error(b"NOPERM no info"))
            .unwrap()
            .is_empty());
        assert!(judge(server, "run_id:xyz\r\n").unwrap().is_empty());
        assert!(judge(server, &format!("run_id:{RUN}0\r\n"))
            .unwrap()
            .is_empty());
        assert!(judge(replication, "role:master\r\nmaster_replid:0\r\n")
            .unwrap()
            .is_empty());
        // A reply INFO never gives.
        assert!(matches!(
            server.judge(&Reply::Simple(b"OK")),
            Err(NodeError::Protocol(ProtocolError::UnexpectedReply(_)))
        ));
    }

    #[test]
    fn a_replica_given_as_a_master_is_refused_naming_its_master() {
        let [_, replication] = STANDALONE;
        let text = "# Replication\r\nrole:slave\r\nmaster_host:10.0.0.7\r\nmaster_port:6380\r\nmaster_link_status:up\r\n";
        assert_eq!(
            refusal(replication, text),
            NotAVoter::Replica {
                master: "10.0.0.7:6380".into()
            }
        );
        let v6 = "role:slave\nmaster_host:::1\nmaster_port:7000\n";
        assert_eq!(
            refusal(replication, v6),
            NotAVoter::Replica {
                master: "[::1]:7000".into()
            }
        );
        let message = refusal(replication, text).to_string();
        assert!(message.contains("replica of 10.0.0.7:6380"), "{message}");
        // In a cluster, a replica is a member like any other.
        let member = IdentityProbe {
            section: Section::Replication,
            given_as: GivenAs::ClusterNode,
        };
        assert!(judge(member, text).unwrap().is_empty());
    }

    #[test]
    fn keydb_active_replicas_and_multi_masters_are_refused_wherever_given() {
        for given_as in [GivenAs::Standalone, GivenAs::ClusterNode] {
            let probe = IdentityProbe {
                section: Section::Replication,
                given_as,
            };
            let active = "# Replication\r\nrole:active-replica\r\nmaster_global_link_status:up\r\nconnected_masters:1\r\nmaster_host:keydb-b\r\nmaster_port:6379\r\n";
            assert_eq!(
                refusal(probe, active),
                NotAVoter::ActiveReplica {
                    master: "keydb-b:6379".into()
                }
            );
            let multi = "role:active-replica\r\nconnected_masters:2\r\nmaster_host:a\r\nmaster_port:1\r\nmaster_1_host:b\r\nmaster_1_port:2\r\n";
            assert_eq!(
                refusal(probe, multi),
                NotAVoter::MultiMaster {
                    masters: "a:1, b:2".into()
                }
            );
        }
    }

    #[test]
    fn a_node_of_the_wrong_kind_is_refused() {
        let [server, _] = STANDALONE;
        let cluster = format!("redis_mode:cluster\r\nrun_id:{RUN}\r\n");
        assert_eq!(refusal(server, &cluster), NotAVoter::ClusterNode);
        assert_eq!(
            refusal(server, "server_mode:sentinel\r\n"),
            NotAVoter::Sentinel
        );
        let seed = IdentityProbe {
            section: Section::Server,
            given_as: GivenAs::ClusterNode,
        };
        assert!(judge(seed, &cluster).unwrap().run.is_some());
        assert_eq!(
            refusal(seed, "redis_mode:standalone\r\n"),
            NotAVoter::NotACluster
        );
    }

    #[test]
    fn a_promoted_replica_continues_its_masters_history() {
        let id = |d: char| ReplId::parse(d.to_string().repeat(40).as_bytes()).unwrap();
        let master = History {
            current: id('a'),
            previous: None,
        };
        // Promoted beside it: a new history continuing the master's.
        let promoted = History {
            current: id('b'),
            previous: Some(id('a')),
        };
        assert!(master.shared_with(&promoted) && promoted.shared_with(&master));
        assert!(master.shared_with(&master));
        let other = History {
            current: id('c'),
            previous: None,
        };
        assert!(!other.shared_with(&master) && !promoted.shared_with(&other));
        // Two servers that each continue one earlier history.
        let sibling = History {
            current: id('d'),
            previous: Some(id('a')),
        };
        assert!(!sibling.shared_with(&promoted));
        let both = Identity {
            run: RunId::parse(RUN.as_bytes()),
            history: None,
        }
        .and(Identity {
            run: None,
            history: Some(master),
        });
        assert!(both.run.is_some() && both.history == Some(master));
    }

    #[test]
    fn another_run_id_or_replication_id_is_a_change_and_unknowns_are_not() {
        let id = |d: char| ReplId::parse(d.to_string().repeat(40).as_bytes()).unwrap();
        let history = |d| {
            Some(History {
                current: id(d),
                previous: None,
            })
        };
        let set_up = Identity {
            run: RunId::parse(RUN.as_bytes()),
            history: history('a'),
        };
        assert!(!set_up.changed_to(&set_up));
        // A failback that kept the process: same run id, new history.
        let failback = Identity {
            history: history('b'),
            ..set_up
        };
        assert!(set_up.changed_to(&failback));
        let restarted = Identity {
            run: RunId::parse("2".repeat(40).as_bytes()),
            ..set_up
        };
        assert!(set_up.changed_to(&restarted));
        // INFO refused now, or a part missing: nothing to tell.
        assert!(!set_up.changed_to(&Identity::default()));
        assert!(!Identity::default().changed_to(&set_up));
        let run_only = Identity {
            history: None,
            ..set_up
        };
        assert!(!set_up.changed_to(&run_only));
    }

    #[test]
    fn field_reads_whole_names_only() {
        let text = b"# Replication\r\nmaster_host_extra:x\r\nmaster_host:h\r\nrole:\r\n";
        assert_eq!(field(text, b"master_host"), Some(&b"h"[..]));
        assert_eq!(field(text, b"role"), Some(&b""[..]));
        assert_eq!(field(text, b"master"), None);
        assert_eq!(field(b"", b"role"), None);
        let long = "h".repeat(1000);
        assert_eq!(address(long.as_bytes(), b"x").len(), MAX_HOST_LEN + 2);
    }
}
