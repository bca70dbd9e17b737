//! A Redis or Valkey Cluster as the client sees it, without I/O: a key's
//! slot, hash tags that place a key in a chosen slot, the meaning of a
//! cluster node's error replies (`MOVED`, `ASK`, `TRYAGAIN`, ...), the
//! cluster's topology read from `CLUSTER SHARDS` or `CLUSTER SLOTS`, and
//! the slot map that rounds route by. No clock is read here and no socket
//! touched; the layers above ask the servers and pass what they said.
//!
//! - `slot.rs`: CRC16 and [`key_slot`], with the servers' hash-tag rule.
//! - `tags.rs`: [`tag_for_slot`], [`tag_for_key`]: a three-byte tag per slot.
//! - `endpoint.rs`: where a node says it can be reached ([`Endpoint`]).
//! - `redirect.rs`: [`classify`] an error line; [`Redirect`] parsed.
//! - `topology.rs`: [`Topology`], its shards and nodes, and its checks;
//!   `fields.rs` reads the parts of a reply, `shards.rs` and
//!   `slots_reply.rs` the two commands' replies.
//! - `slot_map.rs`: [`SlotMap`], slot to owner index, and when to refresh.
//!
//! Public only with the `fuzzing` feature (for the fuzz targets in
//! `fuzz/`); no part of the API.

// The layer above builds on this module (issue 32); the fuzz targets use
// the parsers. Until the cluster voter uses the rest, it is dead code
// outside the tests.
#![cfg_attr(not(feature = "fuzzing"), allow(dead_code))]

mod endpoint;
mod fields;
mod redirect;
mod shards;
mod slot;
mod slot_map;
mod slots_reply;
mod tags;
mod topology;

#[cfg(test)]
mod fixtures;
#[cfg(test)]
mod hostile_tests;
#[cfg(test)]
mod tests;

// Without the `fuzzing` feature, part of this is used by the crate only.
#[allow(unused_imports)]
pub use endpoint::{Endpoint, EndpointRef, HostError, MAX_HOST_LEN};
#[allow(unused_imports)]
pub use redirect::{classify, ClusterError, Redirect, RedirectError, RedirectKind};
#[allow(unused_imports)]
pub use slot::{crc16, hashed_part, key_slot, SLOTS};
#[allow(unused_imports)]
pub use slot_map::{RefreshTicket, SlotMap, UNKNOWN};
#[allow(unused_imports)]
pub use tags::{tag_for_key, tag_for_slot, TAG_LEN};
#[allow(unused_imports)]
pub use topology::{
    ClusterNode, Health, Role, Shard, SlotRange, Topology, TopologyError, MAX_MASTERS,
};
