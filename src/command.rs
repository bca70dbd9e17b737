//! The lock commands: what each sends, in which form a connection sends it,
//! and how a reply to it counts.
//!
//! Every command carries a *tag*, a number unique on its connection, and its
//! positive answer carries the tag back: the scripts return `2 * tag +
//! status`, and a plain `SET` is followed by `ECHO tag`. RESP2 has no
//! request ids, so this is what makes "a reply answers exactly the command
//! it is matched to" hold for any timing: a surplus or stale reply shifts
//! the stream by one, and the shifted stream fails the next tag check
//! before any vote is counted. The tag is always a script call's last
//! argument. Error replies carry no tag, but an error
//! only ever counts against a command, never for it.

use crate::error::{NodeError, ProtocolError, ServerError};
use crate::resp::{encode_args, encode_array_header, encode_bulk, Arg, Reply, ServerErrorKind};
use std::fmt;

/// A Lua script and its SHA-1 digest (what EVALSHA names it by).
#[derive(Debug)]
pub(crate) struct Script {
    pub(crate) body: &'static [u8],
    pub(crate) digest: &'static [u8],
}

/// `SET key value NX PX ttl` in a script, for a connection that may not run
/// `ECHO` (an ACL that forbids it): `2 * tag + 1` if set, `2 * tag` if held.
/// ARGV: value, ttl in ms, tag.
pub(crate) const ACQUIRE: Script = Script {
    body: b"local t = tonumber(ARGV[3]) * 2 if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return t + 1 end return t",
    digest: b"8dcf61f018a9eeb23fbeb34c1403817eb528551a",
};

/// Compare-and-delete: deletes the key only if it still holds our value,
/// then, if a channel is given as a second key, publishes a release notice
/// there. The publish is a `pcall`: an ACL user who may not publish (Redis
/// 7's default for new users) must not turn a done release into an error
/// after the key is gone. `2 * tag + 1` if deleted, `2 * tag` if not ours.
/// ARGV: value, then the notice if there is a channel, then the tag.
pub(crate) const RELEASE: Script = Script {
    body: b"local t = tonumber(ARGV[#ARGV]) * 2 if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('del', KEYS[1]) if KEYS[2] then redis.pcall('publish', KEYS[2], ARGV[2]) end return t + 1 end return t",
    digest: b"bab843d58ffb5e77c9bc7938256d1542d2598e72",
};

/// Compare-and-pexpire: resets the key's TTL only if it still holds our
/// value. `2 * tag + 1` if extended, `2 * tag` if not ours. ARGV: value, ttl
/// in ms, tag.
pub(crate) const EXTEND: Script = Script {
    body: b"local t = tonumber(ARGV[3]) * 2 if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('pexpire', KEYS[1], ARGV[2]) return t + 1 end return t",
    digest: b"31e4197f956c390a314b20ec698e08f16e13cd80",
};

/// The scripts, by [`ScriptId`]: loaded on every new connection.
pub(crate) const SCRIPTS: [&Script; 3] = [&ACQUIRE, &RELEASE, &EXTEND];

/// A script, by its index in [`SCRIPTS`] (small enough to keep in a queue
/// entry).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ScriptId {
    Acquire = 0,
    Release = 1,
    Extend = 2,
}

impl ScriptId {
    pub(crate) fn script(self) -> &'static Script {
        SCRIPTS[self as usize]
    }
}

/// Tags stay below 2^52 so that `2 * tag + 1`, computed by Lua in a double,
/// is exact. A connection would need 2^52 commands to wrap.
pub(crate) const TAG_LIMIT: u64 = 1 << 52;

/// A lock command for one resource and value.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Command<'a> {
    /// Set the key if it is absent (`SET resource value NX PX ttl`).
    Acquire {
        resource: &'a [u8],
        value: &'a [u8],
        ttl_ms: u64,
    },
    /// Compare-and-delete, publishing on `notify` (a channel name) if given.
    Release {
        resource: &'a [u8],
        value: &'a [u8],
        notify: Option<(&'a [u8], &'a [u8])>,
    },
    /// Compare-and-pexpire.
    Extend {
        resource: &'a [u8],
        value: &'a [u8],
        ttl_ms: u64,
    },
    /// `PING tag`: answers with the tag (a health check).
    Ping,
}

/// How a connection sends a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Form {
    /// `SET ... NX PX` then `ECHO tag`.
    SetThenEcho,
    /// `PING tag`.
    Ping,
    /// A script, by digest (`EVALSHA`) or by body (`EVAL`).
    Script { id: ScriptId, by_digest: bool },
}

/// What the connection can do, learned from its handshake.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Capabilities {
    /// The scripts were loaded (SCRIPT LOAD succeeded), so EVALSHA works
    /// unless the script cache is flushed later. An ACL may forbid SCRIPT
    /// but allow EVAL: then scripts go by body from the start.
    pub(crate) scripts_loaded: bool,
    /// `ECHO` answered during the handshake, so an acquisition can be a
    /// plain `SET` followed by `ECHO tag` (cheaper for the server than the
    /// acquire script). Until that is known, acquisitions use the script.
    pub(crate) echo: bool,
}

impl Default for Capabilities {
    /// Before the handshake has answered: assume the scripts are loaded
    /// (they are loaded first, in the same write) and do not assume ECHO.
    fn default() -> Capabilities {
        Capabilities {
            scripts_loaded: true,
            echo: false,
        }
    }
}

impl Command<'_> {
    /// The script this command runs (none for PING).
    fn script(&self) -> Option<ScriptId> {
        match self {
            Command::Acquire { .. } => Some(ScriptId::Acquire),
            Command::Release { .. } => Some(ScriptId::Release),
            Command::Extend { .. } => Some(ScriptId::Extend),
            Command::Ping => None,
        }
    }

    /// Appends the arguments of this command's script after the script name
    /// (key count, keys, arguments, the tag last): the part that is the
    /// same for EVALSHA and EVAL. Returns how many arguments it wrote.
    fn encode_script_args(&self, tag: u64, out: &mut Vec<u8>) -> usize {
        let args: &[Arg<'_>] = match *self {
            Command::Acquire {
                resource,
                value,
                ttl_ms,
            }
            | Command::Extend {
                resource,
                value,
                ttl_ms,
            } => &[
                Arg::Bytes(b"1"),
                Arg::Bytes(resource),
                Arg::Bytes(value),
                Arg::Uint(ttl_ms),
                Arg::Uint(tag),
            ],
            Command::Release {
                resource,
                value,
                notify: None,
            } => &[
                Arg::Bytes(b"1"),
                Arg::Bytes(resource),
                Arg::Bytes(value),
                Arg::Uint(tag),
            ],
            Command::Release {
                resource,
                value,
                notify: Some((channel, notice)),
            } => &[
                Arg::Bytes(b"2"),
                Arg::Bytes(resource),
                Arg::Bytes(channel),
                Arg::Bytes(value),
                Arg::Bytes(notice),
                Arg::Uint(tag),
            ],
            Command::Ping => &[],
        };
        encode_args(out, args);
        args.len()
    }
}

/// A tagged command, encoded once for all the connections of a round: each
/// connection sends it in the form its capabilities allow, from these
/// pieces. The buffers keep their capacity from round to round.
#[derive(Default)]
pub(crate) struct Encoded {
    tag: u64,
    script: Option<ScriptId>,
    /// `SET ... NX PX` then `ECHO tag` (an acquisition), or `PING tag`.
    plain: Vec<u8>,
    /// The script's arguments after its name (see `encode_script_args`).
    tail: Vec<u8>,
    args: usize,
    /// `*argc EVALSHA digest`, the start of the usual script call.
    head_by_digest: Vec<u8>,
}

impl fmt::Debug for Encoded {
    // The buffers hold the lock value, which lets anyone release the lock.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Encoded")
            .field("tag", &self.tag)
            .field("script", &self.script)
            .finish_non_exhaustive()
    }
}

impl Encoded {
    /// Encodes `command` with `tag`, replacing what was there. An
    /// acquisition is encoded as a script only if `script_too` (some
    /// connection cannot send it as `SET` then `ECHO`).
    pub(crate) fn set(&mut self, command: &Command<'_>, tag: u64, script_too: bool) {
        self.tag = tag;
        self.script = command.script();
        self.plain.clear();
        self.tail.clear();
        self.head_by_digest.clear();
        self.args = 0;
        let plain = matches!(command, Command::Acquire { .. } | Command::Ping);
        if let (Some(id), true) = (self.script, script_too || !plain) {
            self.args = command.encode_script_args(tag, &mut self.tail);
            encode_script_head(id, true, self.args, &mut self.head_by_digest);
        }
        match *command {
            Command::Acquire {
                resource,
                value,
                ttl_ms,
            } => {
                encode_array_header(&mut self.plain, 6);
                encode_args(
                    &mut self.plain,
                    &[
                        Arg::Bytes(b"SET"),
                        Arg::Bytes(resource),
                        Arg::Bytes(value),
                        Arg::Bytes(b"NX"),
                        Arg::Bytes(b"PX"),
                        Arg::Uint(ttl_ms),
                    ],
                );
                encode_array_header(&mut self.plain, 2);
                encode_args(&mut self.plain, &[Arg::Bytes(b"ECHO"), Arg::Uint(tag)]);
            }
            Command::Ping => {
                encode_array_header(&mut self.plain, 2);
                encode_args(&mut self.plain, &[Arg::Bytes(b"PING"), Arg::Uint(tag)]);
            }
            Command::Release { .. } | Command::Extend { .. } => {}
        }
    }

    /// The command's tag.
    pub(crate) fn tag(&self) -> u64 {
        self.tag
    }

    /// The form the command takes on a connection with `caps`.
    pub(crate) fn form(&self, caps: Capabilities) -> Form {
        match self.script {
            None => Form::Ping,
            Some(ScriptId::Acquire) if caps.echo => Form::SetThenEcho,
            Some(id) => Form::Script {
                id,
                by_digest: caps.scripts_loaded,
            },
        }
    }

    /// The bytes of a [`Form::SetThenEcho`] or [`Form::Ping`].
    pub(crate) fn plain(&self) -> &[u8] {
        &self.plain
    }

    /// The script's arguments after its name, and how many there are.
    pub(crate) fn script_args(&self) -> (&[u8], usize) {
        (&self.tail, self.args)
    }

    /// Appends the whole script call, by digest or by body.
    pub(crate) fn encode_script_call(&self, by_digest: bool, out: &mut Vec<u8>) {
        match self.script {
            Some(_) if by_digest => out.extend_from_slice(&self.head_by_digest),
            Some(id) => encode_script_head(id, false, self.args, out),
            None => return,
        }
        out.extend_from_slice(&self.tail);
    }
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

/// One node's vote on a command.
#[derive(Debug)]
pub(crate) enum Vote {
    /// Done: the key was set, deleted or extended (or the ping answered).
    Yes,
    /// Refused: the key is held by another value (or, for release and
    /// extend, is not ours).
    No,
    /// The server answered with an error.
    Failed(NodeError),
}

/// How a script's reply counts, given the tag its command carried: `Ok`
/// with the vote, or a protocol error for a reply that cannot answer this
/// command (a wrong type, or a number that does not carry the tag).
pub(crate) fn judge_script(reply: &Reply<'_>, tag: u64) -> Result<Vote, NodeError> {
    match *reply {
        Reply::Integer(n) if n >= 0 && (n as u64) >> 1 == tag => {
            Ok(if n & 1 == 1 { Vote::Yes } else { Vote::No })
        }
        Reply::Error(line) => Ok(Vote::Failed(NodeError::Server(ServerError::from_line(
            line,
        )))),
        ref other => Err(unexpected(other)),
    }
}

/// How the reply to the `SET` of a [`Form::SetThenEcho`] counts, before its
/// tag has been checked.
pub(crate) fn judge_set(reply: &Reply<'_>) -> Result<Vote, NodeError> {
    match *reply {
        Reply::Simple(b"OK") => Ok(Vote::Yes),
        Reply::Nil => Ok(Vote::No),
        Reply::Error(line) => Ok(Vote::Failed(NodeError::Server(ServerError::from_line(
            line,
        )))),
        ref other => Err(unexpected(other)),
    }
}

/// Whether a reply to `ECHO tag` or `PING tag` carries the tag: `Ok(None)`
/// if so, `Ok(Some(error))` for an error reply, and a protocol error for
/// anything else.
pub(crate) fn check_tag(reply: &Reply<'_>, tag: u64) -> Result<Option<ServerError>, NodeError> {
    match *reply {
        Reply::Bulk(bytes) if parse_tag(bytes) == Some(tag) => Ok(None),
        Reply::Error(line) => Ok(Some(ServerError::from_line(line))),
        ref other => Err(unexpected(other)),
    }
}

/// The tag in a bulk reply: decimal digits, no sign, no leading zero (as
/// the tag was sent), below [`TAG_LIMIT`].
fn parse_tag(bytes: &[u8]) -> Option<u64> {
    if bytes.is_empty() || bytes.len() > 16 || (bytes[0] == b'0' && bytes.len() > 1) {
        return None;
    }
    let mut n: u64 = 0;
    for &b in bytes {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n * 10 + u64::from(b - b'0');
    }
    (n < TAG_LIMIT).then_some(n)
}

/// Whether a vote is a NOSCRIPT error (answered by re-sending with EVAL).
pub(crate) fn is_noscript(vote: &Vote) -> bool {
    matches!(vote, Vote::Failed(NodeError::Server(e)) if e.kind() == ServerErrorKind::NoScript)
}

fn unexpected(reply: &Reply<'_>) -> NodeError {
    NodeError::Protocol(ProtocolError::UnexpectedReply(describe(reply)))
}

/// A short description of an unexpected reply for error messages, with the
/// payload cut to a few bytes (it came from a server we no longer trust).
pub(crate) fn describe(reply: &Reply<'_>) -> String {
    let mut text = format!("{reply:?}");
    if text.len() > 64 {
        let mut cut = 61;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("...");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resp::{decode, Decoded};

    fn commands(mut frame: &[u8]) -> Vec<Vec<Vec<u8>>> {
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

    fn script_call(command: Command<'_>, tag: u64, by_digest: bool) -> Vec<Vec<u8>> {
        let mut encoded = Encoded::default();
        encoded.set(&command, tag, true);
        let Form::Script { id, .. } = encoded.form(Capabilities::default()) else {
            panic!("not a script")
        };
        let (tail, n) = encoded.script_args();
        let mut out = Vec::new();
        encode_script_head(id, by_digest, n, &mut out);
        out.extend_from_slice(tail);
        let mut decoded = commands(&out);
        assert_eq!(decoded.len(), 1);
        decoded.remove(0)
    }

    #[test]
    fn encodes_each_command_with_its_tag() {
        let acquire = Command::Acquire {
            resource: b"r",
            value: b"v",
            ttl_ms: 1500,
        };
        let mut encoded = Encoded::default();
        encoded.set(&acquire, 42, false);
        assert_eq!(
            commands(encoded.plain()),
            [
                vec![&b"SET"[..], b"r", b"v", b"NX", b"PX", b"1500"],
                vec![&b"ECHO"[..], b"42"]
            ]
        );
        assert!(!format!("{encoded:?}").contains("v\""), "{encoded:?}");
        assert_eq!(
            script_call(acquire, 7, true),
            [&b"EVALSHA"[..], ACQUIRE.digest, b"1", b"r", b"v", b"1500", b"7"]
        );
        let release = Command::Release {
            resource: b"r",
            value: b"v",
            notify: None,
        };
        assert_eq!(
            script_call(release, 9, false),
            [&b"EVAL"[..], RELEASE.body, b"1", b"r", b"v", b"9"]
        );
        let notifying = Command::Release {
            resource: b"r",
            value: b"v",
            notify: Some((b"ch", b"n")),
        };
        assert_eq!(
            script_call(notifying, 9, true),
            [&b"EVALSHA"[..], RELEASE.digest, b"2", b"r", b"ch", b"v", b"n", b"9"]
        );
        let extend = Command::Extend {
            resource: b"r",
            value: b"v",
            ttl_ms: 7,
        };
        assert_eq!(
            script_call(extend, 3, true),
            [&b"EVALSHA"[..], EXTEND.digest, b"1", b"r", b"v", b"7", b"3"]
        );
        let mut ping = Encoded::default();
        ping.set(&Command::Ping, 5, false);
        assert_eq!(commands(ping.plain()), [vec![&b"PING"[..], b"5"]]);
    }

    #[test]
    fn the_digests_match_the_bodies() {
        // The digest is what EVALSHA sends: a wrong one would make every
        // call fall back to EVAL. SHA-1 by hand is out of scope here, so
        // the values were computed with `redis-cli SCRIPT LOAD` and are
        // checked against a real server by the lock tests; this only
        // guards their shape.
        for script in SCRIPTS {
            assert_eq!(script.digest.len(), 40);
            assert!(script.digest.iter().all(u8::is_ascii_hexdigit));
        }
    }

    #[test]
    fn a_form_follows_the_connections_capabilities() {
        let mut acquire = Encoded::default();
        acquire.set(
            &Command::Acquire {
                resource: b"r",
                value: b"v",
                ttl_ms: 1,
            },
            1,
            true,
        );
        let caps = |scripts_loaded, echo| Capabilities {
            scripts_loaded,
            echo,
        };
        assert_eq!(acquire.form(caps(true, true)), Form::SetThenEcho);
        assert_eq!(
            acquire.form(caps(false, false)),
            Form::Script {
                id: ScriptId::Acquire,
                by_digest: false
            }
        );
        let mut ping = Encoded::default();
        ping.set(&Command::Ping, 1, false);
        assert_eq!(ping.form(caps(true, false)), Form::Ping);
    }

    #[test]
    fn judges_replies_by_their_tag() {
        assert!(matches!(
            judge_script(&Reply::Integer(85), 42),
            Ok(Vote::Yes)
        ));
        assert!(matches!(
            judge_script(&Reply::Integer(84), 42),
            Ok(Vote::No)
        ));
        // A reply carrying another command's tag, or the untagged answers
        // of an older protocol, cannot answer this one.
        for stale in [0, 1, 83, 86, -85] {
            assert!(
                matches!(
                    judge_script(&Reply::Integer(stale), 42),
                    Err(NodeError::Protocol(_))
                ),
                "{stale}"
            );
        }
        assert!(judge_script(&Reply::Simple(b"OK"), 1).is_err());
        let noscript = judge_script(&Reply::Error(b"NOSCRIPT No matching script."), 1).unwrap();
        assert!(is_noscript(&noscript));

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
        for wrong in [&b"16"[..], b"017", b"+17", b"17 ", b"", b"99999999999999999999"] {
            assert!(check_tag(&Reply::Bulk(wrong), 17).is_err(), "{wrong:?}");
        }
        assert!(check_tag(&Reply::Simple(b"OK"), 17).is_err());
        assert!(matches!(
            check_tag(&Reply::Error(b"NOPERM no"), 17),
            Ok(Some(_))
        ));
    }
}
