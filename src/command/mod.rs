//! The lock commands: what each sends, in which form a connection sends it,
//! and how a reply to it counts.
//!
//! Every command carries a *tag*, a number unique on its connection, that
//! comes back in the last reply the command gets: a command is followed by
//! `ECHO tag`, and its own reply counts only once the echo has come back.
//! RESP2 has no request ids, so this is what makes "a reply answers exactly
//! the command it is matched to" hold for any timing: a surplus or stale
//! reply shifts the stream by one, and the shifted stream fails the tag
//! check before any vote is counted. `ECHO` costs a server about a quarter
//! of a microsecond (INFO commandstats), less than folding the tag into the
//! scripts (about 2.5 µs more per call, measured the same way).
//!
//! A connection whose ACL refuses `ECHO` (the handshake probes it) uses
//! *tagged* scripts instead, which return `2 * tag + status`; so does the
//! first acquisition on a new connection, sent before the probe's answer.
//! Error replies carry no tag, but an error only ever counts against a
//! command, never for it.

pub(crate) mod rights;

use crate::error::{NodeError, ProtocolError, ServerError};
use crate::resp::{encode_args, encode_array_header, encode_bulk, Arg, Reply, ServerErrorKind};
use rights::Releasing;
use std::fmt;

/// A Lua script and its SHA-1 digest (what EVALSHA names it by).
#[derive(Debug)]
pub(crate) struct Script {
    pub(crate) body: &'static [u8],
    pub(crate) digest: &'static [u8],
}

/// Compare-and-delete: deletes the key only if it still holds our value,
/// then, if a channel is given as a second key, publishes a release notice
/// there. The publish is a `pcall`: an ACL user who may not publish (Redis
/// 7's default for new users) must not turn a done release into an error
/// after the key is gone. 1 if deleted, 0 if not ours. ARGV: value, then
/// the notice if there is a channel.
pub(crate) const RELEASE: Script = Script {
    body: b"if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('del', KEYS[1]) if KEYS[2] then redis.pcall('publish', KEYS[2], ARGV[2]) end return 1 end return 0",
    digest: b"268962138ed6167e6a7285adc3a9619ca64b2c20",
};

/// Compare-and-pexpire: resets the key's TTL only if it still holds our
/// value. 1 if extended, 0 if not ours. ARGV: value, ttl in ms.
pub(crate) const EXTEND: Script = Script {
    body: b"if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0",
    digest: b"e95849a1757fe494b3c802dc09b717d0c074eb21",
};

/// `SET key value NX PX ttl`, tagged: `2 * tag + 1` if set, `2 * tag` if
/// held. ARGV: value, ttl in ms, tag.
pub(crate) const ACQUIRE_TAGGED: Script = Script {
    body: b"local t = tonumber(ARGV[3]) * 2 if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return t + 1 end return t",
    digest: b"8dcf61f018a9eeb23fbeb34c1403817eb528551a",
};

/// [`RELEASE`], tagged: `2 * tag + 1` if deleted, `2 * tag` if not ours.
/// ARGV: value, then the notice if there is a channel, then the tag.
pub(crate) const RELEASE_TAGGED: Script = Script {
    body: b"local t = tonumber(ARGV[#ARGV]) * 2 if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('del', KEYS[1]) if KEYS[2] then redis.pcall('publish', KEYS[2], ARGV[2]) end return t + 1 end return t",
    digest: b"bab843d58ffb5e77c9bc7938256d1542d2598e72",
};

/// [`EXTEND`], tagged: `2 * tag + 1` if extended, `2 * tag` if not ours.
/// ARGV: value, ttl in ms, tag.
pub(crate) const EXTEND_TAGGED: Script = Script {
    body: b"local t = tonumber(ARGV[3]) * 2 if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('pexpire', KEYS[1], ARGV[2]) return t + 1 end return t",
    digest: b"31e4197f956c390a314b20ec698e08f16e13cd80",
};

/// A script, by its index in [`ScriptId::script`]'s table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ScriptId {
    Release = 0,
    Extend = 1,
    AcquireTagged = 2,
    ReleaseTagged = 3,
    ExtendTagged = 4,
}

impl ScriptId {
    /// The scripts every new connection loads (SCRIPT LOAD, pipelined with
    /// its first command). The tagged ones are rarely needed: they go by
    /// body the first time a connection uses them, which caches them.
    pub(crate) const PRELOADED: [ScriptId; 2] = [ScriptId::Release, ScriptId::Extend];

    pub(crate) fn script(self) -> &'static Script {
        const SCRIPTS: [&Script; 5] = [
            &RELEASE,
            &EXTEND,
            &ACQUIRE_TAGGED,
            &RELEASE_TAGGED,
            &EXTEND_TAGGED,
        ];
        SCRIPTS[self as usize]
    }

    /// Its bit in [`Capabilities::cached`].
    fn bit(self) -> u8 {
        1 << self as u8
    }

    /// Whether the script returns a tagged number (see the module docs).
    pub(crate) fn is_tagged(self) -> bool {
        matches!(
            self,
            ScriptId::AcquireTagged | ScriptId::ReleaseTagged | ScriptId::ExtendTagged
        )
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
    /// Compare-and-delete, publishing `notify.1` on channel `notify.0` if
    /// given.
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
    /// `PUBLISH channel message`: only ever sent without waiting for the
    /// answer (which is checked when it comes, and counts for nothing).
    Publish {
        channel: &'a [u8],
        message: &'a [u8],
    },
}

/// How a connection sends a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Form {
    /// `SET ... NX PX`, then `ECHO tag`.
    SetThenEcho,
    /// A plain script, by digest (`EVALSHA`) or by body (`EVAL`), then
    /// `ECHO tag`.
    ScriptThenEcho { id: ScriptId, by_digest: bool },
    /// A tagged script, by digest or by body.
    TaggedScript { id: ScriptId, by_digest: bool },
    /// `PING tag`.
    Ping,
    /// `PUBLISH channel message`, untagged.
    Publish,
}

/// What the connection can do, learned from its handshake and its replies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Capabilities {
    /// The scripts known to be in the server's script cache (a bit per
    /// [`ScriptId`]), so that EVALSHA works: loaded by the handshake, or
    /// sent by body once. An ACL may forbid SCRIPT but allow EVAL; a
    /// `SCRIPT FLUSH` empties the cache (the NOSCRIPT answer clears the bit).
    pub(crate) cached: u8,
    /// `ECHO` answered the handshake's probe, so commands can be tagged
    /// with it. Until that is known, commands use the tagged scripts.
    pub(crate) echo: bool,
    /// How the connection releases and extends locks (see `rights`): no
    /// acquisition goes out on one that cannot.
    pub(crate) releasing: Releasing,
}

impl Capabilities {
    /// Before the handshake has answered: the preloaded scripts are loaded
    /// first, in the same write, so they count as cached; ECHO is unknown.
    pub(crate) fn before_handshake() -> Capabilities {
        Capabilities {
            cached: ScriptId::PRELOADED
                .iter()
                .fold(0, |bits, id| bits | id.bit()),
            echo: false,
            releasing: Releasing::Unknown,
        }
    }

    pub(crate) fn is_cached(self, id: ScriptId) -> bool {
        self.cached & id.bit() != 0
    }

    pub(crate) fn set_cached(&mut self, id: ScriptId, cached: bool) {
        if cached {
            self.cached |= id.bit();
        } else {
            self.cached &= !id.bit();
        }
    }
}

impl Command<'_> {
    /// The plain script and the tagged script this command runs (none for
    /// an acquisition's plain form, which is `SET`, and for PING).
    fn scripts(&self) -> (Option<ScriptId>, Option<ScriptId>) {
        match self {
            Command::Acquire { .. } => (None, Some(ScriptId::AcquireTagged)),
            Command::Release { .. } => (Some(ScriptId::Release), Some(ScriptId::ReleaseTagged)),
            Command::Extend { .. } => (Some(ScriptId::Extend), Some(ScriptId::ExtendTagged)),
            Command::Ping | Command::Publish { .. } => (None, None),
        }
    }

    /// Appends the arguments of this command's script after the script name
    /// (key count, keys, arguments; with `tag`, the tag last): the part
    /// that is the same for EVALSHA and EVAL. Returns how many it wrote.
    fn encode_script_args(&self, tag: Option<u64>, out: &mut Vec<u8>) -> usize {
        let mut args: [Arg<'_>; 6] = [Arg::Bytes(b""); 6];
        let mut n = 0;
        let mut push = |arg| {
            args[n] = arg;
            n += 1;
        };
        match *self {
            Command::Acquire {
                resource,
                value,
                ttl_ms,
            }
            | Command::Extend {
                resource,
                value,
                ttl_ms,
            } => {
                push(Arg::Bytes(b"1"));
                push(Arg::Bytes(resource));
                push(Arg::Bytes(value));
                push(Arg::Uint(ttl_ms));
            }
            Command::Release {
                resource,
                value,
                notify: None,
            } => {
                push(Arg::Bytes(b"1"));
                push(Arg::Bytes(resource));
                push(Arg::Bytes(value));
            }
            Command::Release {
                resource,
                value,
                notify: Some((channel, notice)),
            } => {
                push(Arg::Bytes(b"2"));
                push(Arg::Bytes(resource));
                push(Arg::Bytes(channel));
                push(Arg::Bytes(value));
                push(Arg::Bytes(notice));
            }
            Command::Ping | Command::Publish { .. } => return 0,
        }
        if let Some(tag) = tag {
            push(Arg::Uint(tag));
        }
        encode_args(out, &args[..n]);
        n
    }
}

/// The arguments of one script call, after its name.
#[derive(Default)]
struct ScriptCall {
    id: Option<ScriptId>,
    tail: Vec<u8>,
    args: usize,
    /// `*argc EVALSHA digest`, the start of the usual call.
    head_by_digest: Vec<u8>,
}

impl ScriptCall {
    fn set(&mut self, id: Option<ScriptId>, command: &Command<'_>, tag: Option<u64>) {
        self.tail.clear();
        let args = match id {
            Some(_) => command.encode_script_args(tag, &mut self.tail),
            None => 0,
        };
        // The head depends only on the script and the number of arguments,
        // which rarely change from one round to the next.
        if (id, args) != (self.id, self.args) {
            self.head_by_digest.clear();
            if let Some(id) = id {
                encode_script_head(id, true, args, &mut self.head_by_digest);
            }
        }
        self.id = id;
        self.args = args;
    }
}

/// A tagged command, encoded once for all the connections of a round: each
/// connection sends it in the form its capabilities allow, from these
/// pieces, each encoded the first time a connection needs it. The buffers
/// keep their capacity from round to round.
#[derive(Default)]
pub(crate) struct Encoded {
    tag: u64,
    is_acquire: bool,
    is_ping: bool,
    is_publish: bool,
    /// Whether the pieces for connections with ECHO are encoded this round.
    with_echo: bool,
    /// Whether the tagged script's call is encoded this round.
    with_tag: bool,
    /// `SET ... NX PX` (an acquisition), `PING tag` or `PUBLISH`.
    plain: Vec<u8>,
    /// `ECHO tag`.
    echo: Vec<u8>,
    /// The plain script's call (release, extend), followed by `echo`.
    script: ScriptCall,
    /// The tagged script's call, for connections without ECHO.
    tagged: ScriptCall,
}

impl fmt::Debug for Encoded {
    // The buffers hold the lock value, which lets anyone release the lock.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Encoded")
            .field("tag", &self.tag)
            .finish_non_exhaustive()
    }
}

impl Encoded {
    /// Starts a round's command with `tag`, forgetting the last one's.
    pub(crate) fn reset(&mut self, command: &Command<'_>, tag: u64) {
        self.tag = tag;
        self.is_acquire = matches!(command, Command::Acquire { .. });
        self.is_ping = matches!(command, Command::Ping);
        self.is_publish = matches!(command, Command::Publish { .. });
        self.with_echo = false;
        self.with_tag = false;
    }

    /// Makes sure the pieces a connection with `caps` sends are encoded.
    /// `command` must be the one given to [`Encoded::reset`].
    pub(crate) fn prepare(&mut self, command: &Command<'_>, caps: Capabilities) {
        let (plain, tagged) = command.scripts();
        if caps.echo || self.is_ping || self.is_publish {
            if self.with_echo {
                return;
            }
            self.with_echo = true;
            self.plain.clear();
            self.echo.clear();
            encode_array_header(&mut self.echo, 2);
            encode_args(&mut self.echo, &[Arg::Bytes(b"ECHO"), Arg::Uint(self.tag)]);
            self.script.set(plain, command, None);
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
                }
                Command::Ping => {
                    encode_array_header(&mut self.plain, 2);
                    encode_args(&mut self.plain, &[Arg::Bytes(b"PING"), Arg::Uint(self.tag)]);
                }
                Command::Publish { channel, message } => {
                    encode_array_header(&mut self.plain, 3);
                    encode_args(
                        &mut self.plain,
                        &[
                            Arg::Bytes(b"PUBLISH"),
                            Arg::Bytes(channel),
                            Arg::Bytes(message),
                        ],
                    );
                }
                _ => {}
            }
        } else if !self.with_tag {
            self.with_tag = true;
            self.tagged.set(tagged, command, Some(self.tag));
        }
    }

    /// The command's tag.
    pub(crate) fn tag(&self) -> u64 {
        self.tag
    }

    /// Whether the command sets a key (`SET NX`, or its tagged script).
    pub(crate) fn is_acquire(&self) -> bool {
        self.is_acquire
    }

    /// The form the command takes on a connection with `caps`.
    pub(crate) fn form(&self, caps: Capabilities) -> Form {
        if self.is_ping {
            return Form::Ping;
        }
        if self.is_publish {
            return Form::Publish;
        }
        if caps.echo {
            if self.is_acquire {
                return Form::SetThenEcho;
            }
            if let Some(id) = self.script.id {
                return Form::ScriptThenEcho {
                    id,
                    by_digest: caps.is_cached(id),
                };
            }
        }
        let id = self.tagged.id.expect("encoded for this connection's form");
        Form::TaggedScript {
            id,
            by_digest: caps.is_cached(id),
        }
    }

    /// The bytes of `SET ... NX PX`, `PING tag` or `PUBLISH`.
    pub(crate) fn plain(&self) -> &[u8] {
        &self.plain
    }

    /// The bytes of `ECHO tag`.
    pub(crate) fn echo(&self) -> &[u8] {
        &self.echo
    }

    /// The arguments of script `id` after its name, and how many there are.
    pub(crate) fn script_args(&self, id: ScriptId) -> (&[u8], usize) {
        let call = self.call(id);
        (&call.tail, call.args)
    }

    /// Appends the whole call of script `id`, by digest or by body.
    pub(crate) fn encode_script_call(&self, id: ScriptId, by_digest: bool, out: &mut Vec<u8>) {
        let call = self.call(id);
        if by_digest {
            out.extend_from_slice(&call.head_by_digest);
        } else {
            encode_script_head(id, false, call.args, out);
        }
        out.extend_from_slice(&call.tail);
    }

    fn call(&self, id: ScriptId) -> &ScriptCall {
        if id.is_tagged() {
            &self.tagged
        } else {
            &self.script
        }
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

fn server_error(line: &[u8]) -> Vote {
    Vote::Failed(NodeError::Server(ServerError::from_line(line)))
}

/// How a tagged script's reply counts, given the tag its command carried:
/// `Ok` with the vote, or a protocol error for a reply that cannot answer
/// this command (a wrong type, or a number that does not carry the tag).
pub(crate) fn judge_tagged_script(reply: &Reply<'_>, tag: u64) -> Result<Vote, NodeError> {
    match *reply {
        Reply::Integer(n) if n >= 0 && (n as u64) >> 1 == tag => {
            Ok(if n & 1 == 1 { Vote::Yes } else { Vote::No })
        }
        Reply::Error(line) => Ok(server_error(line)),
        ref other => Err(unexpected(other)),
    }
}

/// How a plain script's reply counts, before its tag has been checked.
pub(crate) fn judge_script(reply: &Reply<'_>) -> Result<Vote, NodeError> {
    match *reply {
        Reply::Integer(1) => Ok(Vote::Yes),
        Reply::Integer(0) => Ok(Vote::No),
        Reply::Error(line) => Ok(server_error(line)),
        ref other => Err(unexpected(other)),
    }
}

/// How the reply to a `PUBLISH` counts (nobody waits for it: an error,
/// such as an ACL's refusal, is only noted).
pub(crate) fn judge_publish(reply: &Reply<'_>) -> Result<Vote, NodeError> {
    match *reply {
        Reply::Integer(n) if n >= 0 => Ok(Vote::Yes),
        Reply::Error(line) => Ok(server_error(line)),
        ref other => Err(unexpected(other)),
    }
}

/// How the reply to a `SET ... NX PX` counts, before its tag has been
/// checked.
pub(crate) fn judge_set(reply: &Reply<'_>) -> Result<Vote, NodeError> {
    match *reply {
        Reply::Simple(b"OK") => Ok(Vote::Yes),
        Reply::Nil => Ok(Vote::No),
        Reply::Error(line) => Ok(server_error(line)),
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

    /// What a connection with `caps` sends for `command` tagged `tag`.
    fn sent(command: Command<'_>, tag: u64, caps: Capabilities) -> Vec<Vec<Vec<u8>>> {
        let mut encoded = Encoded::default();
        encoded.reset(&command, tag);
        encoded.prepare(&command, caps);
        let mut out = Vec::new();
        match encoded.form(caps) {
            Form::SetThenEcho => {
                out.extend_from_slice(encoded.plain());
                out.extend_from_slice(encoded.echo());
            }
            Form::Ping | Form::Publish => out.extend_from_slice(encoded.plain()),
            Form::ScriptThenEcho { id, by_digest } => {
                encoded.encode_script_call(id, by_digest, &mut out);
                out.extend_from_slice(encoded.echo());
            }
            Form::TaggedScript { id, by_digest } => {
                encoded.encode_script_call(id, by_digest, &mut out)
            }
        }
        commands(&out)
    }

    fn caps(cached: &[ScriptId], echo: bool) -> Capabilities {
        let mut caps = Capabilities {
            cached: 0,
            echo,
            releasing: Releasing::Scripts,
        };
        for id in cached {
            caps.set_cached(*id, true);
        }
        caps
    }

    fn v(args: &[&[u8]]) -> Vec<Vec<u8>> {
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
                v(&[b"EVAL", RELEASE.body, b"2", b"r", b"ch", b"v", b"n"]),
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
                b"2",
                b"r",
                b"ch",
                b"v",
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
        let noscript =
            judge_tagged_script(&Reply::Error(b"NOSCRIPT No matching script."), 1).unwrap();
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
}
