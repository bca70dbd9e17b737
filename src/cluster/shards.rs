//! `CLUSTER SHARDS` (Redis and Valkey 7.0 and later) read into a
//! [`Topology`]. In RESP2 the reply is an array of shards, each a flat
//! key/value array: `slots`, a flat array of range starts and ends
//! (integers, both ends included); `nodes`, an array of flat key/value
//! arrays (`id`, `port`, `tls-port`, `ip`, `endpoint`, `hostname`, `role`,
//! `replication-offset`, `health`); and, from Valkey 9, `id`, the shard's
//! id. Keys this client does not know (a later server's) are skipped; a
//! known key twice is an error. `port` and `tls-port` are listed only when
//! the node has them, `hostname` only when announced.

use super::endpoint::{parse_host, Endpoint, EndpointRef};
use super::fields::{
    array, bytes, for_each_pair, health, integer, node_id, port, role, slot, text, Seen,
};
use super::topology::{ClusterNode, Health, Shard, SlotRange, Topology, TopologyError};
use crate::resp::{split_error, Reply};

impl Topology {
    /// Reads a `CLUSTER SHARDS` reply (decoded with
    /// [`crate::resp::decode_topology`]) and checks it.
    pub fn from_shards(reply: &Reply<'_>) -> Result<Topology, TopologyError> {
        if let Reply::Error(line) = *reply {
            return Err(TopologyError::Refused(split_error(line).0));
        }
        let shards = array(reply, "reply")?;
        let mut out = Vec::with_capacity(shards.len());
        for shard in shards.iter() {
            out.push(read_shard(&shard)?);
        }
        Topology::checked(out)
    }
}

fn read_shard(shard: &Reply<'_>) -> Result<Shard, TopologyError> {
    let (mut id, mut ranges, mut nodes) = (None, None, None);
    let mut seen = Seen::default();
    for_each_pair(shard, "shard", |key, value| {
        match key {
            b"slots" => {
                seen.mark(0, "slots")?;
                ranges = Some(read_ranges(&value)?);
            }
            b"nodes" => {
                seen.mark(1, "nodes")?;
                let list = array(&value, "nodes")?;
                let mut read = Vec::with_capacity(list.len());
                for node in list.iter() {
                    read.push(read_node(&node)?);
                }
                nodes = Some(read);
            }
            b"id" => {
                seen.mark(2, "shard id")?;
                id = Some(text(&value, "shard id")?);
            }
            _ => {}
        }
        Ok(())
    })?;
    let ranges = ranges.ok_or(TopologyError::Missing("slots"))?;
    let nodes = nodes.ok_or(TopologyError::Missing("nodes"))?;
    Shard::new(id, ranges, nodes)
}

/// `slots`: starts and ends, in pairs.
fn read_ranges(slots: &Reply<'_>) -> Result<Vec<SlotRange>, TopologyError> {
    let slots = array(slots, "slots")?;
    if slots.len() % 2 != 0 {
        return Err(TopologyError::WrongType("slots"));
    }
    let mut ranges = Vec::with_capacity(slots.len() / 2);
    let mut items = slots.iter();
    while let (Some(start), Some(end)) = (items.next(), items.next()) {
        ranges.push(SlotRange {
            start: slot(&start, "slot")?,
            end: slot(&end, "slot")?,
        });
    }
    Ok(ranges)
}

fn read_node(node: &Reply<'_>) -> Result<ClusterNode, TopologyError> {
    let mut id = None;
    let (mut port_, mut tls_port) = (None, None);
    let (mut ip, mut endpoint, mut hostname) = (None, None, None);
    let (mut role_, mut offset, mut health_) = (None, None, None);
    let mut seen = Seen::default();
    for_each_pair(node, "node", |key, value| {
        match key {
            b"id" => {
                seen.mark(0, "node id")?;
                id = Some(node_id(&value)?);
            }
            b"port" => {
                seen.mark(1, "port")?;
                port_ = port(&value, "port")?;
            }
            b"tls-port" => {
                seen.mark(2, "tls-port")?;
                tls_port = port(&value, "tls-port")?;
            }
            b"ip" => {
                seen.mark(3, "ip")?;
                ip = Some(bytes(&value, "ip")?);
            }
            b"endpoint" => {
                seen.mark(4, "endpoint")?;
                endpoint = Some(bytes(&value, "endpoint")?);
            }
            b"hostname" => {
                seen.mark(5, "hostname")?;
                hostname = Some(text(&value, "hostname")?);
            }
            b"role" => {
                seen.mark(6, "role")?;
                role_ = Some(role(&value)?);
            }
            b"replication-offset" => {
                seen.mark(7, "replication-offset")?;
                offset = Some(integer(&value, "replication-offset")?);
            }
            b"health" => {
                seen.mark(8, "health")?;
                health_ = Some(health(&value)?);
            }
            _ => {}
        }
        Ok(())
    })?;
    let id = id.ok_or(TopologyError::Missing("node id"))?;
    let role = role_.ok_or(TopologyError::Missing("role"))?;
    if port_.is_none() && tls_port.is_none() {
        return Err(TopologyError::Missing("port"));
    }
    // An empty IP: the node has not learnt its own address yet.
    let ip = match ip {
        Some(b"") | None => None,
        Some(ip) => match parse_host(ip).map_err(TopologyError::BadHost)? {
            EndpointRef::Host(ip) => Some(ip.to_owned()),
            _ => None,
        },
    };
    let endpoint = match endpoint {
        // `unknown-endpoint` prints "" for a node whose IP is known;
        // with the `ip` type, "" is the node not knowing its address.
        Some(b"") if ip.is_some() => Endpoint::SameAsAsked,
        Some(b"") => Endpoint::Unknown,
        Some(host) => parse_host(host).map_err(TopologyError::BadHost)?.to_owned(),
        // Every server that has `CLUSTER SHARDS` prints an endpoint; from
        // a server that does not, fall back to the IP.
        None => match &ip {
            Some(ip) => Endpoint::Host(ip.clone()),
            None => return Err(TopologyError::Missing("endpoint")),
        },
    };
    Ok(ClusterNode {
        id,
        endpoint,
        ip,
        hostname,
        port: port_,
        tls_port,
        role,
        // Always present on the servers; absent, the node is listed as one
        // that serves (as `CLUSTER SLOTS` lists only those).
        health: health_.unwrap_or(Health::Online),
        replication_offset: offset,
    })
}
