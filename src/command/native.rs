//! Native compare-and-delete and compare-and-set: the commands newer
//! servers have for what the release and extension scripts do, and what a
//! connection knows of them ([`NativeRecord`]).
//!
//! - `DELIFEQ key value` (Valkey 9.0+): deletes the key if it holds the
//!   value; `:1` or `:0`.
//! - `DELEX key IFEQ value` (Redis 8.4+): the same. Never sent without
//!   `IFEQ`: on Redis, a bare `DELEX` is a plain `DEL`.
//! - `SET key value IFEQ value PX ttl` (Valkey 8.1+, Redis 8.4+): resets the
//!   TTL if the key holds the value; `+OK`, or nil (it never creates a key).
//! - `MSETEX numkeys key value … NX PX ttl` (Valkey 9.1+, Redis 8.4+): a
//!   set's acquisition (see `many`): every key set, or none if any exists;
//!   `:1` or `:0`, as the set's acquisition script answers.
//!
//! They cost a server about half what the scripts do, and need no
//! scripting right. Each new connection's handshake probes all four in a
//! form that changes nothing (see [`Native::encode_probe`]), pipelined with
//! the rest of the handshake: no round trip, and a server without them
//! rejects the probe before running anything. Version strings are never
//! read (Valkey 9.1 calls itself `redis_version:7.2.4`).
//!
//! A native form refused later ("unknown command", "syntax error", or the
//! ACL's `NOPERM` for the command: all raised before the command runs) is
//! marked absent on its connection and the command re-sent there in the
//! next form, within the same round (see `conn::owed`).

use crate::error::ServerError;
use crate::resp::{encode_args, encode_array_header, encode_command, Arg, Reply, ServerErrorKind};
use std::fmt;

/// The key the probes name. `DELIFEQ` and `DELEX` look it up (and delete
/// it only if it holds [`PROBE_VALUE`], which no lock value is); the `SET`
/// probe is refused for its zero TTL before it looks.
const PROBE_KEY: &[u8] = b"redlock-sync:probe";

/// The keys of a cluster node's `MSETEX` probe: in two slots (their tags'
/// `a` and `b`).
const CLUSTER_PROBE_KEYS: [&[u8]; 2] = [b"redlock-sync:probe:{a}", b"redlock-sync:probe:{b}"];

/// The value the probes compare with: never a lock value (those are 22
/// bytes of base64).
const PROBE_VALUE: &[u8] = b"redlock-sync probe: never a lock value";

/// What a server needs to release without scripts, as errors name it.
pub(crate) const RELEASE_NEEDS: &str = "DELIFEQ (Valkey 9.0+) or DELEX … IFEQ (Redis 8.4+)";

/// What a server needs to extend without scripts, as errors name it.
pub(crate) const EXTEND_NEEDS: &str = "SET … IFEQ (Valkey 8.1+, Redis 8.4+)";

/// What a server needs to take a set without scripts, as errors name it.
pub(crate) const SET_NEEDS: &str = "MSETEX (Valkey 9.1+, Redis 8.4+)";

/// A native command form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Native {
    /// `DELIFEQ key value`.
    DelIfEq = 0,
    /// `DELEX key IFEQ value`.
    DelEx = 1,
    /// `SET key value IFEQ value PX ttl`.
    SetIfEq = 2,
    /// `MSETEX numkeys key value … NX PX ttl`: a set's acquisition.
    MSetEx = 3,
}

/// How many native forms there are.
const FORMS: usize = 4;

impl Native {
    /// Every form, in the order the handshake probes them.
    pub(crate) const ALL: [Native; FORMS] = [
        Native::DelIfEq,
        Native::DelEx,
        Native::SetIfEq,
        Native::MSetEx,
    ];

    /// The releases, in the order they are preferred.
    const RELEASES: [Native; 2] = [Native::DelIfEq, Native::DelEx];

    /// Appends the probe of this form: the command as it is used, on a key
    /// no lock uses, so that the ACL's command check and the server's
    /// parser both answer, and nothing changes: the compare fails, and the
    /// `SET` is refused for its zero TTL ("invalid expire time") by a
    /// server that knows `IFEQ`, for `IFEQ` itself ("syntax error") by one
    /// that does not; `MSETEX` is refused for its zero TTL too, before it
    /// sets anything.
    pub(crate) fn encode_probe(self, out: &mut Vec<u8>) {
        match self {
            Native::DelIfEq | Native::DelEx => encode_release(self, PROBE_KEY, PROBE_VALUE, out),
            Native::SetIfEq => encode_extend(PROBE_KEY, PROBE_VALUE, &Arg::Uint(0), out),
            Native::MSetEx => {
                encode_msetex_head(1, out);
                encode_args(out, &[Arg::Bytes(PROBE_KEY), Arg::Bytes(PROBE_VALUE)]);
                encode_msetex_tail(&Arg::Uint(0), out);
            }
        }
    }

    /// Appends the probe of `MSETEX` for a cluster node: two keys in
    /// different slots, a zero TTL. A server that checks a multi-key
    /// command's slots answers `CROSSSLOT` before anything else (after the
    /// ACL's command check); one that answers otherwise does not check
    /// `MSETEX`'s keys at all (Valkey 9.1.2 runs it on any node, setting
    /// keys in slots the node does not serve, where no `MOVED` or `ASK`
    /// ever sends us on), and is refused for the zero TTL, setting nothing.
    pub(crate) fn encode_cluster_set_probe(out: &mut Vec<u8>) {
        encode_msetex_head(2, out);
        for key in CLUSTER_PROBE_KEYS {
            encode_args(out, &[Arg::Bytes(key), Arg::Bytes(PROBE_VALUE)]);
        }
        encode_msetex_tail(&Arg::Uint(0), out);
    }

    /// What the cluster node's `MSETEX` probe (see
    /// [`Native::encode_cluster_set_probe`]) says: present only if the
    /// node refused it for its keys' slots.
    pub(crate) fn judge_cluster_set_probe(reply: &Reply<'_>) -> Known {
        let Reply::Error(line) = reply else {
            return Known::Absent(Lack::Unknown);
        };
        let error = ServerError::from_line(line);
        match refusal(&error) {
            Some(lack) => Known::Absent(lack),
            None if error.kind() == ServerErrorKind::CrossSlot => Known::Present,
            None => Known::Absent(Lack::Unknown),
        }
    }

    /// What the probe's answer says: present, unless the server refused the
    /// command itself (an error about the key still means it ran the
    /// command's checks, so it has the command and the user may run it).
    pub(crate) fn judge_probe(self, reply: &Reply<'_>) -> Known {
        match reply {
            Reply::Error(line) => match refusal(&ServerError::from_line(line)) {
                Some(lack) => Known::Absent(lack),
                None => Known::Present,
            },
            _ => Known::Present,
        }
    }

    /// How health views and errors name it.
    fn name(self) -> &'static str {
        match self {
            Native::DelIfEq => "DELIFEQ",
            Native::DelEx => "DELEX … IFEQ",
            Native::SetIfEq => "SET … IFEQ",
            Native::MSetEx => "MSETEX",
        }
    }
}

/// Appends `DELIFEQ key value` or `DELEX key IFEQ value`.
pub(crate) fn encode_release(form: Native, key: &[u8], value: &[u8], out: &mut Vec<u8>) {
    match form {
        Native::DelIfEq => encode_command(
            out,
            &[Arg::Bytes(b"DELIFEQ"), Arg::Bytes(key), Arg::Bytes(value)],
        ),
        // Always with IFEQ: without it, DELEX deletes whatever is there.
        Native::DelEx => encode_command(
            out,
            &[
                Arg::Bytes(b"DELEX"),
                Arg::Bytes(key),
                Arg::Bytes(b"IFEQ"),
                Arg::Bytes(value),
            ],
        ),
        Native::SetIfEq | Native::MSetEx => unreachable!("not a release"),
    }
}

/// Appends `SET key value IFEQ value PX ttl`.
pub(crate) fn encode_extend(key: &[u8], value: &[u8], ttl_ms: &Arg<'_>, out: &mut Vec<u8>) {
    encode_command(
        out,
        &[
            Arg::Bytes(b"SET"),
            Arg::Bytes(key),
            Arg::Bytes(value),
            Arg::Bytes(b"IFEQ"),
            Arg::Bytes(value),
            Arg::Bytes(b"PX"),
            *ttl_ms,
        ],
    );
}

/// Appends the start of `MSETEX numkeys key value … NX PX ttl`: its array
/// header for `keys` pairs, the name and the count; the pairs follow, then
/// [`encode_msetex_tail`].
pub(crate) fn encode_msetex_head(keys: usize, out: &mut Vec<u8>) {
    encode_array_header(out, 2 * keys + 5);
    encode_args(out, &[Arg::Bytes(b"MSETEX"), Arg::Uint(keys as u64)]);
}

/// Appends the end of an `MSETEX`: `NX PX ttl`.
pub(crate) fn encode_msetex_tail(ttl_ms: &Arg<'_>, out: &mut Vec<u8>) {
    encode_args(out, &[Arg::Bytes(b"NX"), Arg::Bytes(b"PX"), *ttl_ms]);
}

/// Appends `PUBSUB NUMSUB channel` (`PUBSUB SHARDNUMSUB channel` on a
/// cluster node: `sharded`), behind a native release with a notice:
/// whether anyone listens for it.
pub(crate) fn encode_listeners(channel: &[u8], sharded: bool, out: &mut Vec<u8>) {
    let count: &[u8] = if sharded { b"SHARDNUMSUB" } else { b"NUMSUB" };
    encode_command(
        out,
        &[
            Arg::Bytes(b"PUBSUB"),
            Arg::Bytes(count),
            Arg::Bytes(channel),
        ],
    );
}

/// Appends `PUBLISH channel message`, or `SPUBLISH channel message` on a
/// cluster node (`sharded`): a native release's notice, sent once its
/// compare-and-delete answered 1, if someone listens (the script
/// publishes from inside, when it deleted), or a waiter's message.
pub(crate) fn encode_publish(channel: &[u8], message: &[u8], sharded: bool, out: &mut Vec<u8>) {
    let verb: &[u8] = if sharded { b"SPUBLISH" } else { b"PUBLISH" };
    encode_command(
        out,
        &[Arg::Bytes(verb), Arg::Bytes(channel), Arg::Bytes(message)],
    );
}

/// Why a command cannot run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lack {
    /// The ACL user may not run it (`NOPERM`).
    Forbidden,
    /// The server does not know it (renamed or disabled, or too old).
    Unknown,
}

/// Why an error reply shows a command that cannot run here, if it does:
/// the ACL forbids it (not a key or a channel: their messages say so), or
/// the server does not know it.
pub(crate) fn lack(error: &ServerError) -> Option<Lack> {
    match error.kind() {
        ServerErrorKind::NoPerm if error.message().contains("command") => Some(Lack::Forbidden),
        ServerErrorKind::Err if error.message().starts_with("unknown command") => {
            Some(Lack::Unknown)
        }
        _ => None,
    }
}

/// Whether an error answering a native form means the server did not run
/// it and never will on this connection: [`lack`], or a "syntax error"
/// (a server whose `SET` has no `IFEQ`).
pub(crate) fn refusal(error: &ServerError) -> Option<Lack> {
    lack(error).or_else(|| {
        (error.kind() == ServerErrorKind::Err && error.message().starts_with("syntax error"))
            .then_some(Lack::Unknown)
    })
}

/// What a connection knows of one native command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Known {
    /// Not probed yet: tried if it is the best form left.
    Unknown,
    /// The server has it and the user may run it.
    Present,
    /// Not here.
    Absent(Lack),
}

/// What a connection knows of the native commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NativeRecord {
    known: [Known; FORMS],
}

impl NativeRecord {
    /// Nothing known yet.
    pub(crate) const UNKNOWN: NativeRecord = NativeRecord {
        known: [Known::Unknown; FORMS],
    };

    /// None used (`Builder::native_commands(false)`).
    pub(crate) const UNUSED: NativeRecord = NativeRecord {
        known: [Known::Absent(Lack::Unknown); FORMS],
    };

    pub(crate) fn get(self, form: Native) -> Known {
        self.known[form as usize]
    }

    pub(crate) fn set(&mut self, form: Native, known: Known) {
        self.known[form as usize] = known;
    }

    /// Whether every form has been probed.
    pub(crate) fn is_complete(self) -> bool {
        !self.known.contains(&Known::Unknown)
    }

    /// The native release to use: a present one, else one not probed yet.
    pub(crate) fn release(self) -> Option<Native> {
        self.best(&Native::RELEASES)
    }

    /// The native extension to use, if it may be there.
    pub(crate) fn extend(self) -> Option<Native> {
        self.best(&[Native::SetIfEq])
    }

    /// The native form of a set's acquisition, if it may be there.
    pub(crate) fn acquire_set(self) -> Option<Native> {
        self.best(&[Native::MSetEx])
    }

    fn best(self, forms: &[Native]) -> Option<Native> {
        let with = |k: Known| forms.iter().copied().find(|&f| self.get(f) == k);
        with(Known::Present).or_else(|| with(Known::Unknown))
    }

    /// Whether a native release is known to work.
    pub(crate) fn can_release(self) -> bool {
        Native::RELEASES
            .iter()
            .any(|&f| self.get(f) == Known::Present)
    }

    /// What the record lacks to lock without scripts, if anything, named
    /// for the error.
    pub(crate) fn lacking(self) -> Option<&'static str> {
        if self.release().is_none() {
            Some(RELEASE_NEEDS)
        } else if self.extend().is_none() {
            Some(EXTEND_NEEDS)
        } else {
            None
        }
    }
}

/// How a master releases or extends locks, as its connections found (see
/// [`NodeHealth::release_form`](crate::NodeHealth::release_form)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CommandForm {
    /// A Lua script, by `EVALSHA`.
    Script,
    /// `DELIFEQ key value` (Valkey 9.0+).
    DelIfEq,
    /// `DELEX key IFEQ value` (Redis 8.4+).
    DelExIfEq,
    /// `SET key value IFEQ value PX ttl` (Valkey 8.1+, Redis 8.4+).
    SetIfEq,
    /// `MSETEX numkeys key value … NX PX ttl` (Valkey 9.1+, Redis 8.4+):
    /// a set's acquisition.
    MSetEx,
}

impl CommandForm {
    pub(crate) fn of(native: Native) -> CommandForm {
        match native {
            Native::DelIfEq => CommandForm::DelIfEq,
            Native::DelEx => CommandForm::DelExIfEq,
            Native::SetIfEq => CommandForm::SetIfEq,
            Native::MSetEx => CommandForm::MSetEx,
        }
    }

    /// A small code for an atomic (0 is "not known").
    pub(crate) fn code(form: Option<CommandForm>) -> u8 {
        match form {
            None => 0,
            Some(CommandForm::Script) => 1,
            Some(CommandForm::DelIfEq) => 2,
            Some(CommandForm::DelExIfEq) => 3,
            Some(CommandForm::SetIfEq) => 4,
            Some(CommandForm::MSetEx) => 5,
        }
    }

    /// The form of a [`CommandForm::code`].
    pub(crate) fn from_code(code: u8) -> Option<CommandForm> {
        match code {
            1 => Some(CommandForm::Script),
            2 => Some(CommandForm::DelIfEq),
            3 => Some(CommandForm::DelExIfEq),
            4 => Some(CommandForm::SetIfEq),
            5 => Some(CommandForm::MSetEx),
            _ => None,
        }
    }
}

impl fmt::Display for CommandForm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CommandForm::Script => "script",
            CommandForm::DelIfEq => Native::DelIfEq.name(),
            CommandForm::DelExIfEq => Native::DelEx.name(),
            CommandForm::SetIfEq => Native::SetIfEq.name(),
            CommandForm::MSetEx => Native::MSetEx.name(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judged(form: Native, line: &[u8]) -> Known {
        form.judge_probe(&Reply::Error(line))
    }

    #[test]
    fn the_probes_read_refusals_of_the_command_only() {
        use Known::*;
        // What Valkey 9.1, Valkey 8.1 and Redis 7.0 answer.
        assert_eq!(Native::DelIfEq.judge_probe(&Reply::Integer(0)), Present);
        let unknown = b"ERR unknown command 'DELIFEQ', with args beginning with: 'k' 'v' ";
        assert_eq!(judged(Native::DelIfEq, unknown), Absent(Lack::Unknown));
        let expire = b"ERR invalid expire time in 'set' command";
        assert_eq!(judged(Native::SetIfEq, expire), Present);
        assert_eq!(
            judged(Native::SetIfEq, b"ERR syntax error"),
            Absent(Lack::Unknown)
        );
        let forbidden = b"NOPERM User w has no permissions to run the 'delifeq' command";
        assert_eq!(judged(Native::DelIfEq, forbidden), Absent(Lack::Forbidden));
        // The key's refusal comes after the command's checks.
        let key = b"NOPERM No permissions to access a key";
        assert_eq!(judged(Native::DelEx, key), Present);
    }

    #[test]
    fn the_probes_change_nothing() {
        let mut out = Vec::new();
        for form in Native::ALL {
            form.encode_probe(&mut out);
        }
        let text = String::from_utf8_lossy(&out);
        assert!(text.contains("DELIFEQ") && text.contains("IFEQ"), "{text}");
        // DELEX is never sent without IFEQ.
        assert!(text.contains("DELEX\r\n$18\r\nredlock-sync:probe\r\n$4\r\nIFEQ"));
        assert!(text.ends_with("PX\r\n$1\r\n0\r\n"), "{text}");
        // MSETEX with one pair and a zero TTL, refused before it sets.
        assert!(text.contains("*7\r\n$6\r\nMSETEX\r\n$1\r\n1\r\n$18\r\nredlock-sync:probe"));
    }

    #[test]
    fn a_cluster_nodes_msetex_counts_only_if_refused_for_its_keys_slots() {
        use Known::*;
        let slots = CLUSTER_PROBE_KEYS.map(crate::cluster::key_slot);
        assert_ne!(slots[0], slots[1], "two slots");
        let mut out = Vec::new();
        Native::encode_cluster_set_probe(&mut out);
        let text = String::from_utf8_lossy(&out);
        assert!(
            text.starts_with("*9\r\n$6\r\nMSETEX\r\n$1\r\n2\r\n"),
            "{text}"
        );
        assert!(text.ends_with("PX\r\n$1\r\n0\r\n"), "{text}");
        let judged = |line: &[u8]| Native::judge_cluster_set_probe(&Reply::Error(line));
        let crossslot = b"CROSSSLOT Keys in request don't hash to the same slot";
        assert_eq!(judged(crossslot), Present);
        // Valkey 9.1.2: the keys' slots never checked.
        let expire = b"ERR invalid expire time in 'msetex' command";
        assert_eq!(judged(expire), Absent(Lack::Unknown));
        let unknown = b"ERR unknown command 'MSETEX', with args beginning with: ";
        assert_eq!(judged(unknown), Absent(Lack::Unknown));
        let forbidden = b"NOPERM User w has no permissions to run the 'msetex' command";
        assert_eq!(judged(forbidden), Absent(Lack::Forbidden));
        let set = Native::judge_cluster_set_probe(&Reply::Integer(1));
        assert_eq!(set, Absent(Lack::Unknown));
    }

    #[test]
    fn the_record_prefers_what_is_present() {
        let mut record = NativeRecord::UNKNOWN;
        assert_eq!(record.release(), Some(Native::DelIfEq));
        assert!(!record.can_release() && !record.is_complete());
        record.set(Native::DelIfEq, Known::Absent(Lack::Unknown));
        record.set(Native::DelEx, Known::Present);
        record.set(Native::SetIfEq, Known::Absent(Lack::Unknown));
        assert_eq!(record.acquire_set(), Some(Native::MSetEx));
        assert!(!record.is_complete());
        record.set(Native::MSetEx, Known::Absent(Lack::Unknown));
        assert_eq!(record.acquire_set(), None);
        assert_eq!(record.release(), Some(Native::DelEx));
        assert_eq!(record.extend(), None);
        assert!(record.can_release() && record.is_complete());
        assert_eq!(record.lacking(), Some(EXTEND_NEEDS));
        for code in 0..7 {
            let form = CommandForm::from_code(code);
            assert_eq!(CommandForm::code(form), if code < 6 { code } else { 0 });
        }
    }
}
