//! `CLUSTER SLOTS` (every cluster server; the only topology command before
//! 7.0) read into a [`Topology`]. The reply is an array of slot ranges,
//! each `[start, end, master, replica, ...]`, and each node
//! `[endpoint, port, id, metadata]`: the endpoint is the server's
//! preferred one (null for `unknown-endpoint`), the port the one for the
//! asking connection's transport (TLS or not), and the metadata (7.0 and
//! later) a flat key/value array with the `ip` and `hostname` that the
//! endpoint is not. Only available nodes are listed. A master with several
//! ranges appears once per range; its ranges make one shard here.

use std::collections::HashMap;

use super::endpoint::{parse_host, Endpoint, EndpointRef};
use super::fields::{array, bytes, for_each_pair, node_id, port, slot, text, Seen};
use super::topology::{ClusterNode, Health, Role, Shard, SlotRange, Topology, TopologyError};
use crate::resp::{split_error, Reply};

impl Topology {
    /// Reads a `CLUSTER SLOTS` reply (decoded with
    /// [`crate::resp::decode_topology`]) and checks it. `tls` says whether
    /// it was asked over TLS: the reply's ports are that transport's.
    pub fn from_slots(reply: &Reply<'_>, tls: bool) -> Result<Topology, TopologyError> {
        if let Reply::Error(line) = *reply {
            return Err(TopologyError::Refused(split_error(line).0));
        }
        let entries = array(reply, "reply")?;
        // Shards in the order their masters first appear, and where each
        // node is: (shard, place in its nodes; the master is first). A
        // map, so that a reply listing many nodes many times costs time in
        // proportion to its size.
        let mut shards: Vec<(Vec<SlotRange>, Vec<ClusterNode>)> = Vec::new();
        let mut places: HashMap<String, (usize, usize)> = HashMap::new();
        for entry in entries.iter() {
            let entry = array(&entry, "slot range")?;
            let mut items = entry.iter();
            let (Some(start), Some(end), Some(master)) = (items.next(), items.next(), items.next())
            else {
                return Err(TopologyError::Missing("slot range's master"));
            };
            let range = SlotRange {
                start: slot(&start, "slot")?,
                end: slot(&end, "slot")?,
            };
            let master = read_node(&master, Role::Master, tls)?;
            let index = match places.get(&master.id) {
                // The same master again: it must be the same node.
                Some(&(i, 0)) if shards[i].1[0] == master => i,
                // At another address, or listed as a replica before.
                Some(_) => return Err(TopologyError::DuplicateNode),
                None => {
                    places.insert(master.id.clone(), (shards.len(), 0));
                    shards.push((Vec::new(), vec![master]));
                    shards.len() - 1
                }
            };
            shards[index].0.push(range);
            for replica in items {
                let replica = read_node(&replica, Role::Replica, tls)?;
                let nodes = &mut shards[index].1;
                match places.get(&replica.id) {
                    // Listed again with the master's next range: keep one.
                    Some(&(i, at)) if i == index && at > 0 && nodes[at] == replica => {}
                    Some(_) => return Err(TopologyError::DuplicateNode),
                    None => {
                        places.insert(replica.id.clone(), (index, nodes.len()));
                        nodes.push(replica);
                    }
                }
            }
        }
        let shards = shards
            .into_iter()
            .map(|(ranges, nodes)| Shard::new(None, ranges, nodes))
            .collect::<Result<Vec<_>, _>>()?;
        Topology::checked(shards)
    }
}

fn read_node(node: &Reply<'_>, role: Role, tls: bool) -> Result<ClusterNode, TopologyError> {
    let node = array(node, "node")?;
    let mut items = node.iter();
    let (Some(first), Some(port_)) = (items.next(), items.next()) else {
        return Err(TopologyError::Missing("node's endpoint and port"));
    };
    // Every server since 4.0 gives the id; without it a node cannot be
    // told apart from another at the same address.
    let id = node_id(&items.next().ok_or(TopologyError::Missing("node id"))?)?;
    let (mut meta_ip, mut meta_hostname) = (None, None);
    if let Some(meta) = items.next() {
        let mut seen = Seen::default();
        for_each_pair(&meta, "node metadata", |key, value| {
            match key {
                b"ip" => {
                    seen.mark(0, "ip")?;
                    meta_ip = Some(bytes(&value, "ip")?);
                }
                b"hostname" => {
                    seen.mark(1, "hostname")?;
                    meta_hostname = Some(text(&value, "hostname")?);
                }
                _ => {}
            }
            Ok(())
        })?;
    }
    // The first element is the preferred endpoint: null for
    // `unknown-endpoint`, "" for a node that has not learnt its address.
    let first = match first {
        Reply::Nil => None,
        other => Some(bytes(&other, "endpoint")?),
    };
    let endpoint = match first {
        None => Endpoint::SameAsAsked,
        Some(b"") => Endpoint::Unknown,
        Some(host) => parse_host(host).map_err(TopologyError::BadHost)?.to_owned(),
    };
    // The metadata holds the IP whenever the endpoint is not the IP (and
    // servers before 7.0 have no metadata: the endpoint is the IP).
    let ip = match meta_ip.or(first) {
        Some(b"") | None => None,
        Some(ip) => match parse_host(ip).map_err(TopologyError::BadHost)? {
            EndpointRef::Host(ip) => Some(ip.to_owned()),
            _ => None,
        },
    };
    // Likewise the host name, when the endpoint is the host name.
    let hostname = match (&meta_hostname, &endpoint, meta_ip) {
        (Some(_), _, _) => meta_hostname,
        (None, Endpoint::Host(host), Some(_)) => Some(host.clone()),
        _ => None,
    };
    let port_ = port(&port_, "port")?;
    let (port_, tls_port) = if tls { (None, port_) } else { (port_, None) };
    if port_.is_none() && tls_port.is_none() {
        return Err(TopologyError::Missing("port"));
    }
    Ok(ClusterNode {
        id,
        endpoint,
        ip,
        hostname,
        port: port_,
        tls_port,
        role,
        health: Health::Online,
        replication_offset: None,
    })
}
