//! Shared helpers for the integration tests: real `redis-server` processes
//! ([`RedisServer`], [`Cluster`]) and a scripted fake node ([`FakeNode`]) for
//! protocol faults a real server cannot be made to produce.

// Every test file compiles its own copy of this module and uses only part of it.
#![allow(dead_code, unused_imports)]

pub mod alloc;
mod fake;
mod proxy;
mod redis;
mod replication;
pub mod resp;

pub use fake::{always, closing, handshake_reply, lock_server, silent, Action, Call, FakeNode};
pub use proxy::Proxy;
pub use redis::{
    how_to_get_a_server, native_server_binary, redis_server_available, server_binary,
    server_version, Cluster, PauseGuard, RedisServer, NATIVE_SERVER_VARIABLE, SERVER_VARIABLE,
};
pub use replication::{Replication, QUICK_SYNC};
pub use resp::OwnedReply;
