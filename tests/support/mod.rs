//! Shared helpers for the integration tests: real `redis-server` processes
//! ([`RedisServer`], [`Cluster`] of independent masters), real Redis/Valkey
//! Clusters ([`RedisCluster`], [`shared_clusters`]), masters with replicas
//! ([`Replicated`]) and their [`Sentinels`], and a scripted fake node
//! ([`FakeNode`]) for protocol faults a real server cannot be made to produce.

// Every test file compiles its own copy of this module and uses only part of it.
#![allow(dead_code, unused_imports)]

pub mod alloc;
mod cluster;
mod cluster_ops;
mod fake;
mod proxy;
mod redis;
mod replication;
pub mod resp;
mod sentinel;
mod server_replication;
mod shared;
mod slots;

pub use cluster::{RedisCluster, SlotMap, SlotRange, NODE_TIMEOUT};
pub use cluster_ops::{Failover, Migration};
pub use fake::{always, closing, handshake_reply, lock_server, silent, Action, Call, FakeNode};
pub use proxy::Proxy;
pub use redis::{
    how_to_get_a_server, native_server_binary, redis_server_available, server_binary,
    server_version, Cluster, PauseGuard, RedisServer, NATIVE_SERVER_VARIABLE, SERVER_VARIABLE,
};
pub use replication::{Replicated, Role};
pub use resp::OwnedReply;
pub use sentinel::{
    shared_sentinels, SentinelSet, Sentinels, SENTINEL_DOWN_AFTER, SENTINEL_FAILOVER_TIMEOUT,
};
pub use server_replication::{Replication, QUICK_SYNC};
pub use shared::{shared_clusters, unique_prefix, SHARED_CLUSTERS, SHARED_SHARDS};
pub use slots::{key_in_slot, key_slot, release_channel, SLOTS};
