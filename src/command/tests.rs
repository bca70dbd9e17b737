use super::native::{Known, Lack, NativeRecord};
use super::rights::Releasing;
use super::scripts::*;
use super::*;
use crate::error::{NodeError, ProtocolError};
use crate::resp::{decode, Decoded, Reply};

pub(super) fn commands(mut frame: &[u8]) -> Vec<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    while !frame.is_empty() {
        let Ok(Decoded::Complete(Reply::Array(a), used)) = decode(frame) else {
            panic!("not a command")
        };
        out.push(
            a.iter()
                .map(|r| match r {
                    Reply::Bulk(b) => b.to_vec(),
                    other => panic!("{other:?}"),
                })
                .collect(),
        );
        frame = &frame[used..];
    }
    out
}

/// What a connection with `caps` sends for `command` tagged `tag`.
pub(super) fn sent(command: Command<'_>, tag: u64, caps: Capabilities) -> Vec<Vec<Vec<u8>>> {
    let mut encoded = Encoded::default();
    encoded.reset(&command, tag);
    encoded.prepare(&command, caps);
    let mut out = Vec::new();
    match encoded.form(caps).expect("a form") {
        Form::SetThenEcho | Form::PttlThenPing { .. } => {
            out.extend_from_slice(encoded.plain());
            out.extend_from_slice(encoded.echo());
        }
        Form::Ping => out.extend_from_slice(encoded.plain()),
        Form::Publish { sharded } => out.extend_from_slice(encoded.publish(sharded)),
        Form::ScriptThenEcho { id, by_digest } => {
            encoded.encode_script_call(id, by_digest, &mut out);
            out.extend_from_slice(encoded.echo());
        }
        Form::TaggedScript { id, by_digest } => encoded.encode_script_call(id, by_digest, &mut out),
        Form::Native { form, id, .. } => {
            out.extend_from_slice(encoded.native(form, id.is_sharded()));
            out.extend_from_slice(encoded.echo());
        }
    }
    commands(&out)
}

/// A record where each native form is present or not.
pub(super) fn native(del_if_eq: bool, del_ex: bool, set_if_eq: bool) -> NativeRecord {
    let mut record = NativeRecord::UNKNOWN;
    for (form, present) in [
        (Native::DelIfEq, del_if_eq),
        (Native::DelEx, del_ex),
        (Native::SetIfEq, set_if_eq),
    ] {
        let known = match present {
            true => Known::Present,
            false => Known::Absent(Lack::Unknown),
        };
        record.set(form, known);
    }
    record
}

pub(super) fn caps(cached: &[ScriptId], echo: bool) -> Capabilities {
    let mut caps = Capabilities {
        cached: 0,
        echo,
        releasing: Releasing::Scripts,
        fence: super::fence::FenceCheck::Unprobed,
        native: native(false, false, false),
        scripts: true,
        sharded: false,
        role_pending: false,
    };
    for id in cached {
        caps.set_cached(*id, true);
    }
    caps
}

pub(super) fn v(args: &[&[u8]]) -> Vec<Vec<u8>> {
    args.iter().map(|a| a.to_vec()).collect()
}

#[test]
fn each_command_is_followed_by_its_tag() {
    let loaded = caps(&ScriptId::PRELOADED, true);
    let acquire = Command::Acquire {
        resource: b"r",
        value: b"v",
        ttl_ms: 1500,
    };
    assert_eq!(
        sent(acquire, 42, loaded),
        [
            v(&[b"SET", b"r", b"v", b"NX", b"PX", b"1500"]),
            v(&[b"ECHO", b"42"])
        ]
    );
    let release = Command::Release {
        resource: b"r",
        value: b"v",
        notify: None,
    };
    assert_eq!(
        sent(release, 9, loaded),
        [
            v(&[b"EVALSHA", RELEASE.digest, b"1", b"r", b"v"]),
            v(&[b"ECHO", b"9"])
        ]
    );
    let notifying = Command::Release {
        resource: b"r",
        value: b"v",
        notify: Some((b"ch", b"n")),
    };
    assert_eq!(
        sent(notifying, 9, caps(&[], true)),
        [
            v(&[b"EVAL", RELEASE.body, b"1", b"r", b"v", b"ch", b"n"]),
            v(&[b"ECHO", b"9"])
        ]
    );
    let extend = Command::Extend {
        resource: b"r",
        value: b"v",
        ttl_ms: 7,
    };
    assert_eq!(
        sent(extend, 3, loaded),
        [
            v(&[b"EVALSHA", EXTEND.digest, b"1", b"r", b"v", b"7"]),
            v(&[b"ECHO", b"3"])
        ]
    );
    assert_eq!(sent(Command::Ping, 5, loaded), [v(&[b"PING", b"5"])]);
    // PUBLISH is never awaited: untagged, on any connection.
    let publish = Command::Publish {
        channel: b"ch",
        message: b"m",
    };
    for caps in [loaded, caps(&[], false)] {
        assert_eq!(sent(publish, 6, caps), [v(&[b"PUBLISH", b"ch", b"m"])]);
    }
}

#[test]
fn an_inspection_is_pttl_then_ping_on_any_connection() {
    let inspect = Command::Inspect {
        resource: b"r",
        holder: false,
    };
    let with_holder = Command::Inspect {
        resource: b"r",
        holder: true,
    };
    for caps in [caps(&ScriptId::PRELOADED, true), caps(&[], false)] {
        assert_eq!(
            sent(inspect, 8, caps),
            [v(&[b"PTTL", b"r"]), v(&[b"PING", b"8"])]
        );
        // The holder label: the value from byte 40 on (its secret is
        // bytes 0 to 39), 66 bytes at most.
        assert_eq!(
            sent(with_holder, 9, caps),
            [
                v(&[b"PTTL", b"r"]),
                v(&[b"GETRANGE", b"r", b"40", b"105"]),
                v(&[b"PING", b"9"])
            ]
        );
    }
    for (reply, ms) in [(1500, 1500), (-1, -1), (-2, -2)] {
        assert!(matches!(
            judge_pttl(&Reply::Integer(reply)),
            Ok(Vote::Pttl { ms: m, holder: None }) if m == ms
        ));
    }
    assert_eq!(
        judge_holder(&Reply::Bulk(b"|web-3"))
            .unwrap()
            .map(|l| l.as_str().to_string()),
        Some("web-3".into())
    );
    assert_eq!(judge_holder(&Reply::Bulk(b"")).unwrap(), None);
    assert_eq!(
        judge_holder(&Reply::Error(b"WRONGTYPE Operation")).unwrap(),
        None
    );
    assert_eq!(judge_holder(&Reply::Error(b"NOPERM no")).unwrap(), None);
    assert!(judge_holder(&Reply::Integer(3)).is_err());
    assert!(judge_pttl(&Reply::Integer(-3)).is_err());
    assert!(judge_pttl(&Reply::Bulk(b"12")).is_err());
}

#[test]
fn without_echo_the_scripts_carry_the_tag() {
    let no_echo = caps(&ScriptId::PRELOADED, false);
    let acquire = Command::Acquire {
        resource: b"r",
        value: b"v",
        ttl_ms: 1500,
    };
    assert_eq!(
        sent(acquire, 7, no_echo),
        [v(&[
            b"EVAL",
            ACQUIRE_TAGGED.body,
            b"1",
            b"r",
            b"v",
            b"1500",
            b"7"
        ])]
    );
    let notifying = Command::Release {
        resource: b"r",
        value: b"v",
        notify: Some((b"ch", b"n")),
    };
    assert_eq!(
        sent(notifying, 9, caps(&[ScriptId::ReleaseTagged], false)),
        [v(&[
            b"EVALSHA",
            RELEASE_TAGGED.digest,
            b"1",
            b"r",
            b"v",
            b"ch",
            b"n",
            b"9"
        ])]
    );
    let extend = Command::Extend {
        resource: b"r",
        value: b"v",
        ttl_ms: 7,
    };
    assert_eq!(
        sent(extend, 3, no_echo),
        [v(&[
            b"EVAL",
            EXTEND_TAGGED.body,
            b"1",
            b"r",
            b"v",
            b"7",
            b"3"
        ])]
    );
}

#[test]
fn the_digests_have_their_shape() {
    // A wrong digest would make every call fall back to EVAL: the lock
    // tests check against a real server that EVALSHA works (no EVAL
    // calls in commandstats). This only guards their shape.
    for id in [
        ScriptId::Release,
        ScriptId::Extend,
        ScriptId::AcquireTagged,
        ScriptId::ReleaseTagged,
        ScriptId::ExtendTagged,
        ScriptId::ReleaseSharded,
        ScriptId::ReleaseShardedTagged,
    ] {
        let digest = id.script().digest;
        assert_eq!(digest.len(), 40);
        assert!(digest.iter().all(u8::is_ascii_hexdigit));
    }
}

#[test]
fn judges_replies() {
    assert!(matches!(
        judge_tagged_script(&Reply::Integer(85), 42),
        Ok(Vote::Yes)
    ));
    assert!(matches!(
        judge_tagged_script(&Reply::Integer(84), 42),
        Ok(Vote::No)
    ));
    // A reply carrying another command's tag, or an untagged answer,
    // cannot answer this one.
    for stale in [0, 1, 83, 86, -85] {
        assert!(
            matches!(
                judge_tagged_script(&Reply::Integer(stale), 42),
                Err(NodeError::Protocol(_))
            ),
            "{stale}"
        );
    }
    let noscript = judge_tagged_script(&Reply::Error(b"NOSCRIPT No matching script."), 1).unwrap();
    assert!(is_noscript(&noscript));

    assert!(matches!(judge_script(&Reply::Integer(1)), Ok(Vote::Yes)));
    assert!(matches!(judge_script(&Reply::Integer(0)), Ok(Vote::No)));
    assert!(judge_script(&Reply::Integer(2)).is_err());
    assert!(judge_script(&Reply::Simple(b"OK")).is_err());

    assert!(matches!(judge_set(&Reply::Simple(b"OK")), Ok(Vote::Yes)));
    assert!(matches!(judge_set(&Reply::Nil), Ok(Vote::No)));
    assert!(judge_set(&Reply::Integer(1)).is_err());
    let long = [b'x'; 500];
    match judge_set(&Reply::Bulk(&long)) {
        Err(NodeError::Protocol(ProtocolError::UnexpectedReply(text))) => {
            assert!(text.len() <= 64, "{text}")
        }
        other => panic!("{other:?}"),
    }

    assert!(matches!(check_tag(&Reply::Bulk(b"17"), 17), Ok(None)));
    for wrong in [
        &b"16"[..],
        b"017",
        b"+17",
        b"17 ",
        b"",
        b"99999999999999999999",
    ] {
        assert!(check_tag(&Reply::Bulk(wrong), 17).is_err(), "{wrong:?}");
    }
    assert!(check_tag(&Reply::Simple(b"OK"), 17).is_err());
    assert!(matches!(
        check_tag(&Reply::Error(b"NOPERM no"), 17),
        Ok(Some(_))
    ));
}

#[test]
fn fenced_commands_run_their_scripts_with_both_keys_and_the_operators_always_echo() {
    let acquire = Command::FenceAcquire {
        resource: b"r",
        domain: b"d",
        value: b"v",
        ttl_ms: 1500,
    };
    let cached = caps(&[ScriptId::FenceAcquire, ScriptId::WriteBack], true);
    assert_eq!(
        sent(acquire, 42, cached),
        [
            v(&[
                b"EVALSHA",
                FENCE_ACQUIRE.digest,
                b"2",
                b"r",
                b"d",
                b"v",
                b"1500"
            ]),
            v(&[b"ECHO", b"42"])
        ]
    );
    // Without ECHO (or before the probe answered): the tag as last argument.
    assert_eq!(
        sent(acquire, 42, caps(&[], false)),
        [v(&[
            b"EVAL",
            FENCE_ACQUIRE.body,
            b"2",
            b"r",
            b"d",
            b"v",
            b"1500",
            b"42"
        ])]
    );
    let write_back = Command::WriteBack {
        resource: b"r",
        domain: b"d",
        value: b"v",
        token: 9,
        epoch: 77,
    };
    assert_eq!(
        sent(write_back, 3, cached),
        [
            v(&[
                b"EVALSHA",
                FENCE_WRITE_BACK.digest,
                b"2",
                b"r",
                b"d",
                b"v",
                b"9",
                b"77"
            ]),
            v(&[b"ECHO", b"3"])
        ]
    );
    let anchor = Command::FenceAnchor {
        domain: b"d",
        slot: 0,
        counter: 5,
        epoch: 77,
        place: (12, 3),
        member: 2,
    };
    assert_eq!(
        sent(anchor, 4, caps(&[], false)),
        [
            v(&[
                b"EVAL",
                FENCE_ANCHOR.body,
                b"1",
                b"d",
                b"5",
                b"77",
                b"12",
                b"3",
                b"2"
            ]),
            v(&[b"ECHO", b"4"])
        ]
    );
}

#[test]
fn native_forms_replace_the_scripts_where_the_server_has_them() {
    let release = Command::Release {
        resource: b"r",
        value: b"v",
        notify: Some((b"ch", b"n")),
    };
    let extend = Command::Extend {
        resource: b"r",
        value: b"v",
        ttl_ms: 7,
    };
    let valkey = Capabilities {
        native: native(true, false, true),
        ..caps(&ScriptId::PRELOADED, true)
    };
    assert_eq!(
        // The notice goes out only if the delete answered 1 and someone
        // listens (see `conn::notice`).
        sent(release, 9, valkey),
        [
            v(&[b"DELIFEQ", b"r", b"v"]),
            v(&[b"PUBSUB", b"NUMSUB", b"ch"]),
            v(&[b"ECHO", b"9"])
        ]
    );
    assert_eq!(
        sent(extend, 3, valkey),
        [
            v(&[b"SET", b"r", b"v", b"IFEQ", b"v", b"PX", b"7"]),
            v(&[b"ECHO", b"3"])
        ]
    );
    // Redis 8.4: DELEX, always with IFEQ.
    let redis = Capabilities {
        native: native(false, true, true),
        ..valkey
    };
    assert_eq!(
        sent(release, 9, redis),
        [
            v(&[b"DELEX", b"r", b"IFEQ", b"v"]),
            v(&[b"PUBSUB", b"NUMSUB", b"ch"]),
            v(&[b"ECHO", b"9"])
        ]
    );
    // Valkey 8.1: SET IFEQ, but the release script.
    let valkey81 = Capabilities {
        native: native(false, false, true),
        ..valkey
    };
    assert_eq!(sent(release, 9, valkey81)[0][0], b"EVALSHA");
    // Without scripts and without the native form: no form at all.
    let no_scripts = Capabilities {
        scripts: false,
        ..valkey81
    };
    let mut encoded = Encoded::default();
    encoded.reset(&release, 1);
    encoded.prepare(&release, no_scripts);
    assert_eq!(encoded.form(no_scripts), None);
    assert!(no_scripts.refusal().is_some());
    assert!(Capabilities {
        scripts: false,
        ..valkey
    }
    .refusal()
    .is_none());
}

#[test]
fn a_native_form_is_rebuilt_from_the_scripts_arguments() {
    let release = Command::Release {
        resource: b"r",
        value: b"v",
        notify: Some((b"ch", b"n")),
    };
    let mut encoded = Encoded::default();
    encoded.reset(&release, 4);
    encoded.prepare(&release, caps(&[], true));
    let (tail, _) = encoded.script_args(ScriptId::Release);
    let mut out = Vec::new();
    assert!(encode_native_from_script_args(
        Native::DelEx,
        ScriptId::Release,
        tail,
        &mut out
    ));
    assert_eq!(
        commands(&out),
        [
            v(&[b"DELEX", b"r", b"IFEQ", b"v"]),
            v(&[b"PUBSUB", b"NUMSUB", b"ch"])
        ]
    );
    // Its notice, once it deleted.
    out.clear();
    encode_notice_from_script_args(tail, false, &mut out);
    assert_eq!(commands(&out), [v(&[b"PUBLISH", b"ch", b"n"])]);
    // On a cluster node, the count and the notice are sharded.
    out.clear();
    assert!(encode_native_from_script_args(
        Native::DelIfEq,
        ScriptId::ReleaseSharded,
        tail,
        &mut out
    ));
    assert_eq!(
        commands(&out),
        [
            v(&[b"DELIFEQ", b"r", b"v"]),
            v(&[b"PUBSUB", b"SHARDNUMSUB", b"ch"])
        ]
    );
    out.clear();
    encode_notice_from_script_args(tail, true, &mut out);
    assert_eq!(commands(&out), [v(&[b"SPUBLISH", b"ch", b"n"])]);
    // Without a notice: the delete alone.
    let quiet = Command::Release {
        resource: b"r",
        value: b"v",
        notify: None,
    };
    encoded.reset(&quiet, 4);
    encoded.prepare(&quiet, caps(&[], true));
    let (tail, _) = encoded.script_args(ScriptId::Release);
    out.clear();
    assert!(!encode_native_from_script_args(
        Native::DelIfEq,
        ScriptId::ReleaseSharded,
        tail,
        &mut out
    ));
    assert_eq!(commands(&out), [v(&[b"DELIFEQ", b"r", b"v"])]);
    let extend = Command::Extend {
        resource: b"r",
        value: b"v",
        ttl_ms: 1500,
    };
    encoded.reset(&extend, 5);
    encoded.prepare(&extend, caps(&[], true));
    let (tail, _) = encoded.script_args(ScriptId::Extend);
    out.clear();
    assert!(!encode_native_from_script_args(
        Native::SetIfEq,
        ScriptId::Extend,
        tail,
        &mut out
    ));
    assert_eq!(
        commands(&out),
        [v(&[b"SET", b"r", b"v", b"IFEQ", b"v", b"PX", b"1500"])]
    );
}

#[test]
fn the_count_of_listeners_is_read_strictly() {
    let judged = |bytes: &[u8]| {
        let Ok(Decoded::Complete(reply, _)) = decode(bytes) else {
            panic!("a reply")
        };
        judge_listeners(&reply)
    };
    assert_eq!(judged(b"*2\r\n$2\r\nch\r\n:3\r\n"), Ok(true));
    assert_eq!(judged(b"*2\r\n$2\r\nch\r\n:0\r\n"), Ok(false));
    // An ACL without PUBSUB cannot say: someone may listen.
    assert_eq!(judged(b"-NOPERM no pubsub\r\n"), Ok(true));
    for wrong in [
        &b":1\r\n"[..],
        b"*1\r\n:1\r\n",
        b"*3\r\n$2\r\nch\r\n:1\r\n:1\r\n",
    ] {
        assert!(judged(wrong).is_err(), "{}", wrong.escape_ascii());
    }
}
