//! Unit tests of the scripts' digests, and of what a cluster node's
//! connection sends (the sharded release and publish).

use super::scripts::*;
use super::tests::{caps, commands, native, sent, v};
use super::*;

#[test]
fn the_digests_are_the_sha1_of_the_bodies() {
    // What the servers compute for SCRIPT LOAD (a mismatch would fail
    // every connection's handshake), by an independent SHA-1 here.
    for id in (0..22).map(script_id) {
        let script = id.script();
        assert_eq!(
            sha1_hex(script.body).as_bytes(),
            script.digest,
            "{id:?}: digest of its body"
        );
    }
}

/// The script with index `n` in the table.
fn script_id(n: u8) -> ScriptId {
    [
        ScriptId::Release,
        ScriptId::Extend,
        ScriptId::AcquireTagged,
        ScriptId::ReleaseTagged,
        ScriptId::ExtendTagged,
        ScriptId::FenceAcquire,
        ScriptId::FenceAcquireTagged,
        ScriptId::WriteBack,
        ScriptId::WriteBackTagged,
        ScriptId::FenceProbe,
        ScriptId::FenceBarrier,
        ScriptId::FenceAnchor,
        ScriptId::ReleaseSharded,
        ScriptId::ReleaseShardedTagged,
        ScriptId::AcquireSet,
        ScriptId::AcquireSetTagged,
        ScriptId::ReleaseSet,
        ScriptId::ReleaseSetTagged,
        ScriptId::ExtendSet,
        ScriptId::ExtendSetTagged,
        ScriptId::ReleaseSetSharded,
        ScriptId::ReleaseSetShardedTagged,
    ][usize::from(n)]
}

/// SHA-1 (FIPS 180-4), in lower-case hex: slow and plain, for the test.
fn sha1_hex(message: &[u8]) -> String {
    let mut h: [u32; 5] = [
        0x6745_2301,
        0xEFCD_AB89,
        0x98BA_DCFE,
        0x1032_5476,
        0xC3D2_E1F0,
    ];
    let mut padded = message.to_vec();
    padded.push(0x80);
    while padded.len() % 64 != 56 {
        padded.push(0);
    }
    padded.extend_from_slice(&(message.len() as u64 * 8).to_be_bytes());
    for block in padded.chunks(64) {
        let mut w = [0u32; 80];
        for (i, word) in block.chunks(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..80 {
            w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (i, &wi) in w.iter().enumerate() {
            let (f, k) = match i {
                0..=19 => ((b & c) | (!b & d), 0x5A82_7999),
                20..=39 => (b ^ c ^ d, 0x6ED9_EBA1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC),
                _ => (b ^ c ^ d, 0xCA62_C1D6),
            };
            let t = a
                .rotate_left(5)
                .wrapping_add(f)
                .wrapping_add(e)
                .wrapping_add(k)
                .wrapping_add(wi);
            e = d;
            d = c;
            c = b.rotate_left(30);
            b = a;
            a = t;
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e]) {
            *x = x.wrapping_add(y);
        }
    }
    h.iter().map(|x| format!("{x:08x}")).collect()
}

#[test]
fn a_cluster_node_publishes_by_spublish_with_the_same_arguments() {
    // The channel is an argument, never a key: the one key is the lock's.
    let release = Command::Release {
        resource: b"r",
        value: b"v",
        notify: Some((b"ch", b"n")),
    };
    let node = Capabilities {
        sharded: true,
        ..caps(&ScriptId::PRELOADED_SHARDED, true)
    };
    assert_eq!(
        sent(release, 9, node),
        [
            v(&[
                b"EVALSHA",
                RELEASE_SHARDED.digest,
                b"1",
                b"r",
                b"v",
                b"ch",
                b"n"
            ]),
            v(&[b"ECHO", b"9"])
        ]
    );
    // Encoded once: a standalone master and a cluster node in one round.
    let standalone = caps(&ScriptId::PRELOADED, true);
    let mut encoded = Encoded::default();
    encoded.reset(&release, 9);
    for caps in [standalone, node] {
        encoded.prepare(&release, caps);
    }
    let mut out = Vec::new();
    for caps in [standalone, node] {
        let Some(Form::ScriptThenEcho { id, by_digest }) = encoded.form(caps) else {
            panic!("a script")
        };
        encoded.encode_script_call(id, by_digest, &mut out);
    }
    assert_eq!(
        commands(&out),
        [
            v(&[b"EVALSHA", RELEASE.digest, b"1", b"r", b"v", b"ch", b"n"]),
            v(&[
                b"EVALSHA",
                RELEASE_SHARDED.digest,
                b"1",
                b"r",
                b"v",
                b"ch",
                b"n"
            ]),
        ]
    );
    // Before ECHO is known: the sharded tagged script, by body first.
    let fresh = Capabilities {
        echo: false,
        ..node
    };
    assert_eq!(
        sent(release, 9, fresh),
        [v(&[
            b"EVAL",
            RELEASE_SHARDED_TAGGED.body,
            b"1",
            b"r",
            b"v",
            b"ch",
            b"n",
            b"9"
        ])]
    );
    // Natively: DELIFEQ, then the count of the sharded subscribers (the
    // SPUBLISH follows if it deleted and someone listens: see
    // `conn::notice`).
    let valkey = Capabilities {
        native: native(true, false, true),
        ..node
    };
    assert_eq!(
        sent(release, 9, valkey),
        [
            v(&[b"DELIFEQ", b"r", b"v"]),
            v(&[b"PUBSUB", b"SHARDNUMSUB", b"ch"]),
            v(&[b"ECHO", b"9"])
        ]
    );
    // A waiter's message.
    let publish = Command::Publish {
        channel: b"ch",
        message: b"m",
    };
    assert_eq!(sent(publish, 6, node), [v(&[b"SPUBLISH", b"ch", b"m"])]);
    // The preloaded scripts of a new connection to a cluster node.
    let before = Capabilities::before_handshake(true, true, true);
    assert!(before.sharded && before.is_cached(ScriptId::ReleaseSharded));
    assert!(!before.is_cached(ScriptId::Release));
}
