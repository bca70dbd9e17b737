//! The replies of real servers, as test fixtures: raw RESP2 bytes that
//! Redis 7.0.15, Valkey 8.1.8 and Valkey 9.1.2 sent to `CLUSTER SHARDS`,
//! `CLUSTER SLOTS`, `CLUSTER MYSHARDID` and to commands that got a cluster
//! error, captured by `fixtures/capture.py` (its code says how each case
//! was made).

macro_rules! fixtures {
    ($($name:literal)*) => {
        &[$(($name, include_bytes!(concat!("fixtures/", $name, ".resp")))),*]
    };
}

/// Every fixture: its file name without `.resp`, and its bytes.
pub(super) const ALL: &[(&str, &[u8])] = fixtures! {
    "redis7.0-ask"
    "redis7.0-clusterdown"
    "redis7.0-crossslot"
    "redis7.0-moved-from-target"
    "redis7.0-moved-hostname-missing"
    "redis7.0-moved-hostname"
    "redis7.0-moved-ipv6"
    "redis7.0-moved-unknown-endpoint"
    "redis7.0-moved"
    "redis7.0-myshardid"
    "redis7.0-shards-3"
    "redis7.0-shards-6-failover"
    "redis7.0-shards-6"
    "redis7.0-shards-fragmented"
    "redis7.0-shards-hostname-missing"
    "redis7.0-shards-hostname"
    "redis7.0-shards-ipv6"
    "redis7.0-shards-unknown-endpoint"
    "redis7.0-slots-3"
    "redis7.0-slots-6-failover"
    "redis7.0-slots-6"
    "redis7.0-slots-fragmented"
    "redis7.0-slots-hostname-missing"
    "redis7.0-slots-hostname"
    "redis7.0-slots-ipv6"
    "redis7.0-slots-unknown-endpoint"
    "redis7.0-tryagain"
    "valkey8.1-ask"
    "valkey8.1-clusterdown"
    "valkey8.1-crossslot"
    "valkey8.1-moved-from-target"
    "valkey8.1-moved-hostname-missing"
    "valkey8.1-moved-hostname"
    "valkey8.1-moved-ipv6"
    "valkey8.1-moved-unknown-endpoint"
    "valkey8.1-moved"
    "valkey8.1-myshardid"
    "valkey8.1-shards-3"
    "valkey8.1-shards-6-failover"
    "valkey8.1-shards-6"
    "valkey8.1-shards-fragmented"
    "valkey8.1-shards-hostname-missing"
    "valkey8.1-shards-hostname"
    "valkey8.1-shards-ipv6"
    "valkey8.1-shards-unknown-endpoint"
    "valkey8.1-slots-3"
    "valkey8.1-slots-6-failover"
    "valkey8.1-slots-6"
    "valkey8.1-slots-fragmented"
    "valkey8.1-slots-hostname-missing"
    "valkey8.1-slots-hostname"
    "valkey8.1-slots-ipv6"
    "valkey8.1-slots-unknown-endpoint"
    "valkey8.1-tryagain"
    "valkey9.1-ask"
    "valkey9.1-clusterdown"
    "valkey9.1-crossslot"
    "valkey9.1-moved-from-target"
    "valkey9.1-moved-hostname-missing"
    "valkey9.1-moved-hostname"
    "valkey9.1-moved-ipv6"
    "valkey9.1-moved-unknown-endpoint"
    "valkey9.1-moved"
    "valkey9.1-myshardid"
    "valkey9.1-shards-3"
    "valkey9.1-shards-6-failover"
    "valkey9.1-shards-6"
    "valkey9.1-shards-fragmented"
    "valkey9.1-shards-hostname-missing"
    "valkey9.1-shards-hostname"
    "valkey9.1-shards-ipv6"
    "valkey9.1-shards-unknown-endpoint"
    "valkey9.1-slots-3"
    "valkey9.1-slots-6-failover"
    "valkey9.1-slots-6"
    "valkey9.1-slots-fragmented"
    "valkey9.1-slots-hostname-missing"
    "valkey9.1-slots-hostname"
    "valkey9.1-slots-ipv6"
    "valkey9.1-slots-unknown-endpoint"
    "valkey9.1-tryagain"
};

/// One fixture by name (a test's typo fails loudly).
pub(super) fn get(name: &str) -> &'static [u8] {
    ALL.iter()
        .find(|(n, _)| *n == name)
        .map(|(_, bytes)| *bytes)
        .unwrap_or_else(|| panic!("no fixture {name}"))
}
