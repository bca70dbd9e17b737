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
/// of its channel, as first sent (its `PUBLISH` goes out if the delete
/// answered 1 and someone listens: see [`encode_notice_from_script_args`]);
/// returns whether it is one.
pub(crate) fn encode_native_from_script_args(
    form: Native,
    id: ScriptId,
    tail: &[u8],
    out: &mut Vec<u8>,
) -> bool {
    // Key count, keys, values.
    let args = script_args(tail);
    match (id, args[0]) {
        (ScriptId::Extend, _) => {
            native::encode_extend(args[1], args[2], &Arg::Bytes(args[3]), out);
            false
        }
        // KEYS: resource, channel; ARGV: value, notice.
        (_, b"2") => {
            native::encode_release(form, args[1], args[3], out);
            native::encode_listeners(args[2], out);
            true
        }
        _ => {
            native::encode_release(form, args[1], args[2], out);
            false
        }
    }
}

/// Appends `PUBLISH channel notice`, from the release script's arguments
/// `tail` (key count 2, resource, channel, value, notice): the notice of a
/// native release, sent once its compare-and-delete answered 1 and
/// someone listens (see `conn::notice`).
pub(crate) fn encode_notice_from_script_args(tail: &[u8], out: &mut Vec<u8>) {
    let args = script_args(tail);
    debug_assert_eq!(args[0], b"2", "a release with a notice");
    native::encode_publish(args[2], args[4], out);
}

/// Appends `SET key value NX PX ttl`, from the tagged acquisition
/// script's arguments `tail` (key count, key, value, ttl, tag): the first
/// acquisition on a new connection, re-sent when its script was refused
/// (see `conn::resend`).
pub(crate) fn encode_set_from_script_args(tail: &[u8], out: &mut Vec<u8>) {
    let args = script_args(tail);
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
/// them): bulk strings we encoded, at most five read.
fn script_args(tail: &[u8]) -> [&[u8]; 5] {
    let mut args: [&[u8]; 5] = [b""; 5];
    let mut rest = tail;
    for arg in args.iter_mut() {
        match decode(rest) {
            Ok(Decoded::Complete(Reply::Bulk(bytes), used)) => {
                *arg = bytes;
                rest = &rest[used..];
            }
            _ => break,
        }
    }
    args
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
