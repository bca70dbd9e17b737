//! What one connection can do, learned by its handshake and its replies:
//! which scripts the server has cached, whether `ECHO` can tag commands,
//! and whether (and how) it can release and extend locks, which is checked
//! before an acquisition goes out on it ([`Capabilities`]).
//!
//! A lock is worth taking only where it can be released. Releases and
//! extensions run Lua scripts, by `EVALSHA` (and by `EVAL` when the
//! server's script cache lacks them, and always for the release after a
//! failed acquisition), so an ACL user without scripting rights
//! (`-@scripting`) could set keys it can never delete. Every new
//! connection's handshake therefore probes both commands, in a form that
//! runs nothing: `EVALSHA` and `EVAL` with a key count of one and no key.
//! A server checks the ACL (`NOPERM`) and whether it knows the command
//! (`unknown command`: renamed or disabled) before it looks at the
//! arguments, which it then refuses, so no script is looked up, compiled or
//! run. Any answer but those two means the command may run.
//!
//! A connection whose probes find a command missing fails its set-up with
//! [`NodeError::CannotRelease`], naming what to grant, and is closed, as
//! when a password is refused: nothing is ever sent on it, the master is
//! failing in the health view, and the next connection probes again, so
//! that granting the right is enough. A release or extension refused
//! later for the same reason (the ACL changed while the connection was
//! open) ends the connection the same way, at its first refusal.
//!
//! The record, [`Releasing`], is per connection and starts over with each
//! one. Servers with native compare-and-delete (see `native`) release
//! without scripts: a connection that has one may lock whatever its script
//! rights, and a handle that never runs scripts (`Builder::allow_scripts`)
//! locks only through connections that have the native forms.

use super::fence::FenceCheck;
use super::native::{
    lack, CommandForm, Known, Lack, Native, NativeRecord, EXTEND_NEEDS, RELEASE_NEEDS, SET_NEEDS,
};
use super::scripts::ScriptId;
use crate::error::{CannotRelease, NodeError, ServerError};
use crate::resp::{encode_command, Arg, Reply};

/// What the connection can do, learned from its handshake and its replies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Capabilities {
    /// The scripts known to be in the server's script cache (a bit per
    /// [`ScriptId`]), so that EVALSHA works: loaded by the handshake, or
    /// sent by body once. An ACL may forbid SCRIPT but allow EVAL; a
    /// `SCRIPT FLUSH` empties the cache (the NOSCRIPT answer clears the bit).
    pub(crate) cached: u32,
    /// `ECHO` answered the handshake's probe, so commands can be tagged
    /// with it. Until that is known, commands use the tagged scripts.
    pub(crate) echo: bool,
    /// Whether the connection may run scripts (their rights, see
    /// [`Releasing`]): no acquisition goes out on one that can release
    /// neither by script nor natively.
    pub(crate) releasing: Releasing,
    /// What the handshake's probe of the fence domain found (fenced
    /// handles only): whether this connection's round-1 grants count.
    pub(crate) fence: FenceCheck,
    /// Which native compare-and-delete and compare-and-set commands the
    /// server has (see `native`).
    pub(crate) native: NativeRecord,
    /// Whether scripts may be used at all (`Builder::allow_scripts`): the
    /// handle's setting, not learned.
    pub(crate) scripts: bool,
    /// Whether the server is a node of a cluster voter: a release's notice
    /// and a waiter's message go by `SPUBLISH` there (sharded pub/sub, see
    /// `handle::notify`), so releases run the sharded script
    /// ([`ScriptId::sharded`]). Known from the configuration, not learned.
    pub(crate) sharded: bool,
    /// A Sentinel voter's master whose handshake's `ROLE` has not said
    /// "master" yet: no acquisition goes out here until it has.
    pub(crate) role_pending: bool,
}

impl Capabilities {
    /// Before the handshake has answered: the preloaded scripts are loaded
    /// first, in the same write, so they count as cached (unless `scripts`
    /// is off: nothing is loaded then); ECHO is unknown, and so are the
    /// native commands, unless `native` is off (none is used then).
    /// `sharded`: the server is a cluster voter's node.
    pub(crate) fn before_handshake(scripts: bool, native: bool, sharded: bool) -> Capabilities {
        let preloaded = ScriptId::preloaded(sharded)
            .iter()
            .fold(0, |bits, id| bits | id.bit());
        Capabilities {
            cached: if scripts { preloaded } else { 0 },
            echo: false,
            releasing: Releasing::Unknown,
            fence: FenceCheck::Unprobed,
            native: if native {
                NativeRecord::UNKNOWN
            } else {
                NativeRecord::UNUSED
            },
            scripts,
            sharded,
            role_pending: false,
        }
    }

    /// The script this connection runs for script `id` (a release's
    /// sharded twin on a cluster node: see [`ScriptId::sharded`]).
    #[inline]
    pub(crate) fn script_for(self, id: ScriptId) -> ScriptId {
        if self.sharded {
            id.sharded()
        } else {
            id
        }
    }

    /// Whether commands go out untagged, followed by `ECHO tag`: once ECHO
    /// answered the probe, and always without scripts (the tagged forms
    /// are scripts).
    pub(crate) fn echoes(self) -> bool {
        self.echo || !self.scripts
    }

    /// The native form the plain script `id` takes here, if any.
    pub(crate) fn native_for(self, id: ScriptId) -> Option<Native> {
        match id {
            ScriptId::Release | ScriptId::ReleaseSharded => self.native.release(),
            ScriptId::Extend => self.native.extend(),
            ScriptId::AcquireSet => self.native.acquire_set(),
            _ => None,
        }
    }

    /// The native form of a run (see [`Form::Run`](super::Form::Run)) that
    /// the set's plain script `id` takes here, if any: where no script can
    /// run, because the handle runs none or because the server refused them
    /// to this user (the handshake's probes); else the set's one atomic
    /// script is used. (A set taken by `MSETEX` on a server that refuses
    /// scripts must still be released and extended there.)
    pub(crate) fn run_for(self, id: ScriptId) -> Option<Native> {
        let scripts_run = self.scripts && !matches!(self.releasing, Releasing::Impossible(_));
        match id {
            _ if scripts_run => None,
            ScriptId::ReleaseSet | ScriptId::ReleaseSetSharded => self.native.release(),
            ScriptId::ExtendSet => self.native.extend(),
            _ => None,
        }
    }

    /// Whether an acquisition must wait for the handshake's answers before
    /// it goes out here: without scripts, the tagged acquisition script
    /// that guards a new connection cannot be used (see [`Releasing`]);
    /// and a Sentinel voter's master must first say it is one (`ROLE`).
    pub(crate) fn awaits_rights(self) -> bool {
        (!self.scripts && !self.native.is_complete()) || self.role_pending
    }

    /// The error for an acquisition on this connection, if none may go
    /// out on it: it could release the key neither natively nor by script
    /// (or, without scripts, could not extend it or tag the command).
    pub(crate) fn refusal(self) -> Option<NodeError> {
        if self.scripts {
            if self.native.can_release() {
                return None;
            }
            return self.releasing.refusal();
        }
        if !self.native.is_complete() {
            return None; // see `awaits_rights`
        }
        let lacking = self.native.lacking().or((!self.echo).then_some("ECHO"));
        lacking.map(|what| NodeError::CannotRelease(CannotRelease::NativeMissing(what)))
    }

    /// The forms a release and an extension take here, as far as the
    /// handshake and the replies have shown (for the health view).
    pub(crate) fn forms(self) -> (Option<CommandForm>, Option<CommandForm>) {
        let form = |id| match self.native_for(id) {
            Some(native) if self.echoes() && self.native.get(native) == Known::Present => {
                Some(CommandForm::of(native))
            }
            _ if self.scripts && self.releasing == Releasing::Scripts => Some(CommandForm::Script),
            _ => None,
        };
        (form(ScriptId::Release), form(ScriptId::Extend))
    }

    /// The error for a release or extension that has no form left on this
    /// connection (its native form was refused, and scripts are off or
    /// forbidden).
    pub(crate) fn no_form_left(self, id: ScriptId) -> NodeError {
        if id == ScriptId::AcquireSet && !self.scripts {
            // Nothing was sent: the master fails this round only.
            return NodeError::CannotLockSets(SET_NEEDS);
        }
        match (self.scripts, self.releasing.refusal()) {
            (true, Some(refusal)) => refusal,
            _ => NodeError::CannotRelease(CannotRelease::NativeMissing(match id {
                ScriptId::Extend | ScriptId::ExtendTagged => EXTEND_NEEDS,
                _ => RELEASE_NEEDS,
            })),
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

/// How a connection releases and extends locks, as far as its handshake
/// has found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Releasing {
    /// The probes have not answered yet. Commands go out meanwhile (they
    /// are pipelined with the handshake): the first acquisition on a new
    /// connection is itself a script (see `command`), which a server that
    /// refuses scripts refuses too, so it sets no key there.
    Unknown,
    /// With the Lua scripts.
    Scripts,
    /// Not at all: what is missing so far (the connection is closed once
    /// every probe has answered).
    Impossible(Missing),
}

/// One probe of the handshake, in the order they are sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Probe {
    /// `EVALSHA <no such digest> 1`: the usual release and extension.
    Evalsha,
    /// `EVAL <a comment> 1`: scripts by body.
    Eval,
}

impl Probe {
    /// Every probe, in the order the handshake sends them.
    pub(crate) const ALL: [Probe; 2] = [Probe::Evalsha, Probe::Eval];

    /// Appends the probe's command: a key count of one and no key, which a
    /// server that may run the command refuses as an argument error.
    pub(crate) fn encode(self, out: &mut Vec<u8>) {
        let (command, script): (&[u8], &[u8]) = match self {
            Probe::Evalsha => (b"EVALSHA", &[b'0'; 40]),
            Probe::Eval => (b"EVAL", b"-- redlock-sync probe: never run"),
        };
        encode_command(
            out,
            &[Arg::Bytes(command), Arg::Bytes(script), Arg::Uint(1)],
        );
    }

    /// What the probe's answer says is missing, if anything.
    pub(crate) fn judge(self, reply: &Reply<'_>) -> Option<Lack> {
        match reply {
            Reply::Error(line) => lack(&ServerError::from_line(line)),
            _ => None,
        }
    }
}

/// The commands found missing, and why.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Missing {
    evalsha: Option<Lack>,
    eval: Option<Lack>,
}

impl Missing {
    /// The error that says what is missing and what to do.
    pub(crate) fn error(self) -> CannotRelease {
        let names = |lack: Lack| match (self.evalsha == Some(lack), self.eval == Some(lack)) {
            (true, true) => "EVALSHA and EVAL",
            (true, false) => "EVALSHA",
            _ => "EVAL",
        };
        if self.evalsha == Some(Lack::Forbidden) || self.eval == Some(Lack::Forbidden) {
            CannotRelease::ScriptsForbidden(names(Lack::Forbidden))
        } else {
            CannotRelease::ScriptsDisabled(names(Lack::Unknown))
        }
    }
}

impl Releasing {
    /// The record after `probe` answered, finding `lack` (or nothing).
    pub(crate) fn probed(self, probe: Probe, lack: Option<Lack>) -> Releasing {
        let mut missing = match self {
            Releasing::Impossible(missing) => missing,
            Releasing::Unknown | Releasing::Scripts => Missing::default(),
        };
        match probe {
            Probe::Evalsha => missing.evalsha = lack,
            Probe::Eval => missing.eval = lack,
        }
        if missing == Missing::default() {
            Releasing::Scripts
        } else {
            Releasing::Impossible(missing)
        }
    }

    /// The error for an acquisition on a connection with this record and
    /// no native release, if none may go out on it.
    pub(crate) fn refusal(self) -> Option<NodeError> {
        match self {
            Releasing::Impossible(missing) => Some(NodeError::CannotRelease(missing.error())),
            Releasing::Unknown | Releasing::Scripts => None,
        }
    }
}

/// If `error`, the answer to a release, an extension or any script, shows
/// that scripts cannot run on the connection any more (its ACL changed
/// while it was open): what is missing, and the error for the command.
pub(crate) fn refused_script(error: &ServerError) -> Option<(Lack, NodeError)> {
    lack(error).map(|lack| {
        (
            lack,
            NodeError::CannotRelease(CannotRelease::Refused(error.clone())),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resp::{decode, Decoded};

    fn judged(probe: Probe, line: &[u8]) -> Option<Lack> {
        probe.judge(&Reply::Error(line))
    }

    #[test]
    fn the_probes_run_nothing_and_read_only_refusals() {
        let mut out = Vec::new();
        Probe::Evalsha.encode(&mut out);
        Probe::Eval.encode(&mut out);
        let mut commands = Vec::new();
        let mut rest = &out[..];
        while let Ok(Decoded::Complete(reply, used)) = decode(rest) {
            commands.push(format!("{reply:?}"));
            rest = &rest[used..];
        }
        assert_eq!(commands.len(), 2, "{commands:?}");
        assert!(commands[0].contains("EVALSHA") && commands[1].contains("EVAL"));
        // What Redis 7 and Valkey answer.
        for probe in Probe::ALL {
            let allowed = b"ERR Number of keys can't be greater than number of args";
            assert_eq!(judged(probe, allowed), None);
            assert_eq!(judged(probe, b"NOSCRIPT No matching script."), None);
            for refusal in [
                &b"NOPERM this user has no permissions to run the 'eval' command"[..],
                b"NOPERM User u has no permissions to run the 'evalsha' command",
            ] {
                assert_eq!(judged(probe, refusal), Some(Lack::Forbidden));
            }
            let renamed = b"ERR unknown command 'EVAL', with args beginning with: '1' ";
            assert_eq!(judged(probe, renamed), Some(Lack::Unknown));
            // A key or channel refusal is about the key, not the command.
            let key =
                b"NOPERM this user has no permissions to access one of the keys used as arguments";
            assert_eq!(judged(probe, key), None);
            assert_eq!(probe.judge(&Reply::Simple(b"OK")), None);
        }
    }

    #[test]
    fn the_record_names_what_is_missing() {
        let after = |evalsha, eval| {
            Releasing::Unknown
                .probed(Probe::Evalsha, evalsha)
                .probed(Probe::Eval, eval)
        };
        assert_eq!(after(None, None), Releasing::Scripts);
        assert_eq!(after(None, None).refusal(), None);
        let forbidden = Some(Lack::Forbidden);
        let shown = |record: Releasing| record.refusal().expect("refused").to_string();
        let both = shown(after(forbidden, forbidden));
        assert!(both.contains("may not run EVALSHA and EVAL"), "{both}");
        assert!(both.contains("ACL SETUSER <user> +evalsha +eval"), "{both}");
        assert!(shown(after(None, forbidden)).contains("may not run EVAL;"));
        assert!(shown(after(forbidden, None)).contains("may not run EVALSHA;"));
        let disabled = shown(after(Some(Lack::Unknown), None));
        assert!(disabled.contains("no EVALSHA command"), "{disabled}");
        // Forbidden before the last probe: no acquisition goes out already.
        let half = Releasing::Unknown.probed(Probe::Evalsha, forbidden);
        assert!(half.refusal().is_some());
        assert!(NodeError::CannotRelease(CannotRelease::ScriptsForbidden("EVAL")).is_permanent());
    }

    #[test]
    fn a_refused_script_ends_the_connection_only_for_a_command_right() {
        let refused = ServerError::from_line(
            b"NOPERM this user has no permissions to run the 'evalsha' command",
        );
        let (_, error) = refused_script(&refused).expect("a missing right");
        assert!(error.to_string().contains("+evalsha +eval"), "{error}");
        let key = ServerError::from_line(b"NOPERM No permissions to access a key");
        assert_eq!(refused_script(&key), None);
        let busy = ServerError::from_line(b"BUSY Redis is busy running a script");
        assert_eq!(refused_script(&busy), None);
    }
}
