//! A command built again from the arguments a connection kept for it: the
//! re-sent forms (NOSCRIPT as EVAL, a refused native form in its next one,
//! a refused first acquisition script as `SET NX`; see `conn::resend`).

use super::native::{self, Native};
use super::scripts::ScriptId;
use crate::resp::{decode, encode_args, encode_array_header, encode_bulk, Arg, Decoded, Reply};

/// Appends native form `form` of plain script `id`'s call, from the
/// script's arguments `tail` (as [`Encoded::script_args`] gives them): for
/// a command re-sent in its next form after the server refused one (see
/// `conn::resend`). A release with a notice is followed by `PUBSUB NUMSUB`
/// of its channel (`SHARDNUMSUB` if `id` is a cluster node's sharded
/// script), as first sent (its `PUBLISH` goes out if the delete answered 1
/// and someone listens: see [`encode_notice_from_script_args`]); returns
/// whether it is one.
pub(crate) fn encode_native_from_script_args(
    form: Native,
    id: ScriptId,
    tail: &[u8],
    out: &mut Vec<u8>,
) -> bool {
    if id == ScriptId::AcquireSet {
        encode_msetex_from_script_args(tail, out);
        return false;
    }
    // Key count, key, values.
    let (args, n) = script_args(tail);
    match id {
        ScriptId::Extend => {
            native::encode_extend(args[1], args[2], &Arg::Bytes(args[3]), out);
            false
        }
        // KEYS: resource; ARGV: value, channel, notice.
        _ if n == 5 => {
            native::encode_release(form, args[1], args[2], out);
            native::encode_listeners(args[3], id.is_sharded(), out);
            true
        }
        _ => {
            native::encode_release(form, args[1], args[2], out);
            false
        }
    }
}

/// Appends a set's release run in native form `form` (`DELIFEQ`, or
/// `DELEX … IFEQ`), one command per key, each after `before_each` (an
/// `ASKING`, or nothing), from the set release script's arguments `tail`
/// (key count, the keys, the mode, the value, then the notice and the
/// channels if it tells waiters: see `many`), which we encoded: a run
/// re-sent in its next form after the server refused one (see
/// `conn::run`). Returns how many keys it went over.
pub(crate) fn encode_release_run_from_script_args(
    form: Native,
    tail: &[u8],
    before_each: &[u8],
    out: &mut Vec<u8>,
) -> usize {
    let count = bulk_strings(tail).next().unwrap_or(b"0");
    let keys = std::str::from_utf8(count)
        .ok()
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(0);
    // Past the count and the keys, the mode; then the value.
    let value = bulk_strings(tail).nth(keys + 2).unwrap_or(b"");
    let mut went = 0;
    for key in bulk_strings(tail).skip(1).take(keys) {
        out.extend_from_slice(before_each);
        native::encode_release(form, key, value, out);
        went += 1;
    }
    went
}

/// Appends `MSETEX numkeys key value … NX PX ttl` from the set
/// acquisition script's arguments `tail` (key count, the keys, `p`, value,
/// ttl: see `many`), which we encoded.
fn encode_msetex_from_script_args(tail: &[u8], out: &mut Vec<u8>) {
    let mut args = bulk_strings(tail);
    let count = args.next().unwrap_or(b"0");
    let keys = std::str::from_utf8(count)
        .ok()
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(0);
    let after_keys = bulk_strings(tail).skip(1 + keys);
    let mut rest = after_keys.skip(1); // the mode
    let (value, ttl) = (rest.next().unwrap_or(b""), rest.next().unwrap_or(b"0"));
    native::encode_msetex_head(keys, out);
    for key in args.take(keys) {
        encode_args(out, &[Arg::Bytes(key), Arg::Bytes(value)]);
    }
    native::encode_msetex_tail(&Arg::Bytes(ttl), out);
}

/// The bulk strings of a script call's arguments, in order.
fn bulk_strings(tail: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = tail;
    std::iter::from_fn(move || match decode(rest) {
        Ok(Decoded::Complete(Reply::Bulk(bytes), used)) => {
            rest = &rest[used..];
            Some(bytes)
        }
        _ => None,
    })
}

/// Appends `PUBLISH channel notice` (`SPUBLISH` on a cluster node:
/// `sharded`), from the release script's arguments `tail` (key count 1,
/// resource, value, channel, notice): the notice of a native release, sent
/// once its compare-and-delete answered 1 and someone listens (see
/// `conn::notice`).
pub(crate) fn encode_notice_from_script_args(tail: &[u8], sharded: bool, out: &mut Vec<u8>) {
    let (args, n) = script_args(tail);
    debug_assert_eq!(n, 5, "a release with a notice");
    native::encode_publish(args[3], args[4], sharded, out);
}

/// Appends `SET key value NX PX ttl`, from the tagged acquisition
/// script's arguments `tail` (key count, key, value, ttl, tag): the first
/// acquisition on a new connection, re-sent when its script was refused
/// (see `conn::resend`).
pub(crate) fn encode_set_from_script_args(tail: &[u8], out: &mut Vec<u8>) {
    let (args, _) = script_args(tail);
    encode_array_header(out, 6);
    encode_args(
        out,
        &[
            Arg::Bytes(b"SET"),
            Arg::Bytes(args[1]),
            Arg::Bytes(args[2]),
            Arg::Bytes(b"NX"),
            Arg::Bytes(b"PX"),
            Arg::Bytes(args[3]),
        ],
    );
}

/// The arguments of a script call (as [`Encoded::script_args`] gives
/// them): bulk strings we encoded, at most five read, and how many were.
fn script_args(tail: &[u8]) -> ([&[u8]; 5], usize) {
    let mut args: [&[u8]; 5] = [b""; 5];
    let mut n = 0;
    let mut rest = tail;
    for arg in args.iter_mut() {
        match decode(rest) {
            Ok(Decoded::Complete(Reply::Bulk(bytes), used)) => {
                *arg = bytes;
                rest = &rest[used..];
                n += 1;
            }
            _ => break,
        }
    }
    (args, n)
}

/// Appends the start of a script call (`*argc EVALSHA digest` or `*argc EVAL
/// body`) whose remaining `args` arguments follow.
pub(crate) fn encode_script_head(id: ScriptId, by_digest: bool, args: usize, out: &mut Vec<u8>) {
    let script = id.script();
    encode_array_header(out, 2 + args);
    if by_digest {
        encode_bulk(out, b"EVALSHA");
        encode_bulk(out, script.digest);
    } else {
        encode_bulk(out, b"EVAL");
        encode_bulk(out, script.body);
    }
}
