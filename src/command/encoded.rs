//! A round's command encoded once, in every form a connection may send it
//! (`SET`, a script by digest or by body, plain or tagged, a native form),
//! each prepared lazily for the connections that need it.

use super::kind::{Command, Form};
use super::many::SetCommand;
use super::native::{self, Native};
use super::reencode::encode_script_head;
use super::rights::Capabilities;
use super::scripts::ScriptId;
use crate::resp::{encode_args, encode_array_header, Arg};
use crate::value::LABEL_RANGE;
use std::fmt;

/// Bytes a script call's arguments have room for from its first use.
const TAIL_ROOM: usize = 512;

/// Bytes every other form (`SET`, `ECHO`, a script's head, a native form)
/// of a session's own command has room for from the start (see
/// [`Encoded::with_room`]). Longer names grow a form once.
const FORM_ROOM: usize = 192;

/// A form's buffer that grew past this (a long name) is shrunk back to it
/// by [`Encoded::trim`]: names and channels of up to 1 KiB fit.
const KEPT_FORM_CAPACITY: usize = 4096;

/// The arguments of one script call, after its name.
#[derive(Default)]
struct ScriptCall {
    id: Option<ScriptId>,
    tail: Vec<u8>,
    args: usize,
    /// `*argc EVALSHA digest`, the start of the usual call.
    head_by_digest: Vec<u8>,
    /// The same for the script's sharded twin (a release on a cluster
    /// node: see `ScriptId::sharded`), if it has one.
    head_sharded: Vec<u8>,
}

impl ScriptCall {
    fn set(&mut self, id: Option<ScriptId>, command: &Command<'_>, tag: Option<u64>) {
        self.tail.clear();
        // Room for any of the lock's scripts with names of usual length,
        // taken on the first call: a fenced write-back's arguments are
        // longer than round 1's, and a write-back may first come long
        // after the warm-up (a counter behind under load); growing then
        // would allocate in steady state. (A no-op once there.)
        self.tail.reserve(TAIL_ROOM);
        let args = match id {
            Some(_) => command.encode_script_args(tag, &mut self.tail),
            None => 0,
        };
        // The head depends only on the script and the number of arguments,
        // which rarely change from one round to the next.
        if (id, args) != (self.id, self.args) {
            self.head_by_digest.clear();
            self.head_sharded.clear();
            if let Some(id) = id {
                encode_script_head(id, true, args, &mut self.head_by_digest);
                if id.sharded() != id {
                    encode_script_head(id.sharded(), true, args, &mut self.head_sharded);
                }
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
    /// `SET NX` or fencing's round 1: sets a key.
    is_acquire: bool,
    /// `SET NX`, whose plain form is no script.
    is_set: bool,
    /// Sets a key or its TTL (an acquisition, fencing's round 1 and
    /// write-back, an extension): the replica guard waits for it.
    is_guarded: bool,
    /// A script without a tagged form: always followed by `ECHO`.
    echo_only: bool,
    is_ping: bool,
    is_inspect: bool,
    /// An inspection that also reads the holder label.
    reads_holder: bool,
    is_publish: bool,
    /// Whether the pieces for connections with ECHO are encoded this round.
    with_echo: bool,
    /// Whether `spublish` is encoded this round.
    with_spublish: bool,
    /// Whether the tagged script's call is encoded this round.
    with_tag: bool,
    /// `SET ... NX PX` (an acquisition), `PING tag`, `PTTL` (and
    /// `GETRANGE` of the holder label) or `PUBLISH`.
    plain: Vec<u8>,
    /// `SPUBLISH`: a `PUBLISH` for a cluster node.
    spublish: Vec<u8>,
    /// `ECHO tag` (`PING tag` after `PTTL`).
    echo: Vec<u8>,
    /// The plain script's call (release, extend), followed by `echo`.
    script: ScriptCall,
    /// The tagged script's call, for connections without ECHO.
    tagged: ScriptCall,
    /// Whether the command is a release with a notice.
    notice: bool,
    /// The native forms (by [`Native`]), a release with a notice followed
    /// by `PUBSUB NUMSUB` of its channel, then the same with `PUBSUB
    /// SHARDNUMSUB` for a cluster node (see [`Encoded::native_index`]);
    /// `native_ready` has a bit for each encoded this round.
    native: [Vec<u8>; 2 * Native::ALL.len()],
    native_ready: u8,
    /// How many replies a set's run (see [`Form::Run`]) is owed, and how
    /// many per key.
    run: (u16, u8),
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
        self.is_acquire = matches!(
            command,
            Command::Acquire { .. }
                | Command::FenceAcquire { .. }
                | Command::Set(SetCommand::Acquire { .. } | SetCommand::FenceAcquire { .. })
        );
        self.is_set = matches!(command, Command::Acquire { .. });
        self.is_guarded = matches!(
            command,
            Command::Acquire { .. }
                | Command::FenceAcquire { .. }
                | Command::WriteBack { .. }
                | Command::Extend { .. }
                | Command::Set(
                    SetCommand::Acquire { .. }
                        | SetCommand::Extend { .. }
                        | SetCommand::FenceAcquire { .. }
                        | SetCommand::WriteBack { .. }
                )
        );
        self.echo_only = matches!(command.scripts(), (Some(_), None));
        self.is_ping = matches!(command, Command::Ping);
        self.is_inspect = matches!(command, Command::Inspect { .. });
        self.reads_holder = matches!(command, Command::Inspect { holder: true, .. });
        self.is_publish = matches!(command, Command::Publish { .. });
        self.with_echo = false;
        self.with_spublish = false;
        self.with_tag = false;
        self.notice = matches!(
            command,
            Command::Release {
                notify: Some(_),
                ..
            }
        );
        self.native_ready = 0;
    }

    /// An `Encoded` whose every form has its room (see [`FORM_ROOM`]):
    /// about 3 KiB, for a session's own command, so that a form it first
    /// needs long after the warm-up (a session that had only acquired,
    /// used at last for a release) does not allocate then.
    pub(crate) fn with_room() -> Encoded {
        let mut encoded = Encoded::default();
        encoded.make_room();
        encoded
    }

    /// Shrinks each form's buffer that a long name grew past
    /// [`KEPT_FORM_CAPACITY`], so that a kept `Encoded` does not hold it.
    pub(crate) fn trim(&mut self) {
        let forms = [&mut self.plain, &mut self.spublish, &mut self.echo];
        let calls = [&mut self.script, &mut self.tagged]
            .into_iter()
            .flat_map(|call| {
                [
                    &mut call.tail,
                    &mut call.head_by_digest,
                    &mut call.head_sharded,
                ]
            });
        for form in forms.into_iter().chain(calls).chain(self.native.iter_mut()) {
            if form.capacity() > KEPT_FORM_CAPACITY {
                form.shrink_to(KEPT_FORM_CAPACITY);
            }
        }
    }

    fn make_room(&mut self) {
        self.plain.reserve(FORM_ROOM);
        self.echo.reserve(FORM_ROOM);
        for call in [&mut self.script, &mut self.tagged] {
            call.tail.reserve(TAIL_ROOM);
            call.head_by_digest.reserve(FORM_ROOM);
        }
        for form in &mut self.native {
            form.reserve(FORM_ROOM);
        }
    }

    /// Makes sure the pieces a connection with `caps` sends are encoded.
    /// `command` must be the one given to [`Encoded::reset`].
    pub(crate) fn prepare(&mut self, command: &Command<'_>, caps: Capabilities) {
        let (plain, tagged) = command.scripts();
        if self.is_publish && caps.sharded && !self.with_spublish {
            self.with_spublish = true;
            if let Command::Publish { channel, message } = *command {
                self.spublish.clear();
                native::encode_publish(channel, message, true, &mut self.spublish);
            }
        }
        if caps.echoes() || self.is_ping || self.is_inspect || self.is_publish || self.echo_only {
            if let Some(form) = plain.and_then(|id| caps.native_for(id)) {
                self.prepare_native(command, form, caps.sharded);
            }
            if let Some(form) = plain.and_then(|id| caps.run_for(caps.script_for(id))) {
                self.prepare_run(command, form);
            }
            if self.with_echo {
                return;
            }
            self.with_echo = true;
            self.plain.clear();
            self.echo.clear();
            let carrier: &[u8] = if self.is_inspect { b"PING" } else { b"ECHO" };
            encode_array_header(&mut self.echo, 2);
            encode_args(&mut self.echo, &[Arg::Bytes(carrier), Arg::Uint(self.tag)]);
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
                Command::Inspect { resource, holder } => {
                    encode_array_header(&mut self.plain, 2);
                    encode_args(
                        &mut self.plain,
                        &[Arg::Bytes(b"PTTL"), Arg::Bytes(resource)],
                    );
                    if holder {
                        let (start, end) = LABEL_RANGE;
                        encode_array_header(&mut self.plain, 4);
                        encode_args(
                            &mut self.plain,
                            &[
                                Arg::Bytes(b"GETRANGE"),
                                Arg::Bytes(resource),
                                Arg::Uint(start as u64),
                                Arg::Uint(end as u64),
                            ],
                        );
                    }
                }
                Command::Publish { channel, message } => {
                    native::encode_publish(channel, message, false, &mut self.plain);
                }
                _ => {}
            }
        } else if !self.with_tag {
            self.with_tag = true;
            self.tagged.set(tagged, command, Some(self.tag));
        }
    }

    /// Where native form `form` is kept for a connection to a cluster node
    /// (`sharded`) or not: apart only for a release with a notice, whose
    /// `PUBLISH` is an `SPUBLISH` on a cluster node.
    fn native_index(&self, form: Native, sharded: bool) -> usize {
        form as usize + Native::ALL.len() * usize::from(sharded && self.notice)
    }

    /// Encodes native form `form` of `command` (a release, an extension
    /// or a set's acquisition: `MSETEX`), a release with a notice followed by `PUBSUB NUMSUB` of
    /// its channel (`SHARDNUMSUB` if `sharded`): the notice goes out only if
    /// the delete answered 1 and someone listens (see `conn::notice`).
    fn prepare_native(&mut self, command: &Command<'_>, form: Native, sharded: bool) {
        let index = self.native_index(form, sharded);
        let bit = 1 << index;
        if self.native_ready & bit != 0 {
            return;
        }
        self.native_ready |= bit;
        let out = &mut self.native[index];
        out.clear();
        match *command {
            Command::Release {
                resource,
                value,
                notify,
            } => {
                native::encode_release(form, resource, value, out);
                if let Some((channel, _)) = notify {
                    native::encode_listeners(channel, sharded, out);
                }
            }
            Command::Extend {
                resource,
                value,
                ttl_ms,
            } => native::encode_extend(resource, value, &Arg::Uint(ttl_ms), out),
            Command::Set(SetCommand::Acquire {
                keys,
                value,
                ttl_ms,
            }) => {
                native::encode_msetex_head(keys.len(), out);
                for key in keys.iter() {
                    encode_args(out, &[Arg::Bytes(key), Arg::Bytes(value)]);
                }
                native::encode_msetex_tail(&Arg::Uint(ttl_ms), out);
            }
            _ => unreachable!("only releases, extensions and set acquisitions have native forms"),
        }
    }

    /// Encodes a set's release or extension as a run of native form
    /// `form` (see [`Form::Run`]): per key, `DELIFEQ` (or `DELEX … IFEQ`),
    /// or `SET … IFEQ`, then, if the extension repairs, `SET … NX`.
    fn prepare_run(&mut self, command: &Command<'_>, form: Native) {
        let bit = 1 << (form as usize);
        if self.native_ready & bit != 0 {
            return;
        }
        self.native_ready |= bit;
        let out = &mut self.native[form as usize];
        out.clear();
        let Command::Set(set) = *command else {
            unreachable!("only a set's commands run")
        };
        let per_key = match set {
            SetCommand::Release { keys, value, .. } => {
                for key in keys.iter() {
                    native::encode_release(form, key, value, out);
                }
                1
            }
            SetCommand::Extend {
                keys,
                value,
                ttl_ms,
                repair,
            } => {
                let ttl = Arg::Uint(ttl_ms);
                for key in keys.iter() {
                    native::encode_extend(key, value, &ttl, out);
                    if repair {
                        encode_array_header(out, 6);
                        encode_args(
                            out,
                            &[
                                Arg::Bytes(b"SET"),
                                Arg::Bytes(key),
                                Arg::Bytes(value),
                                Arg::Bytes(b"NX"),
                                Arg::Bytes(b"PX"),
                                ttl,
                            ],
                        );
                    }
                }
                1 + u8::from(repair)
            }
            SetCommand::Acquire { .. }
            | SetCommand::FenceAcquire { .. }
            | SetCommand::WriteBack { .. } => {
                // Fencing needs scripts (`ConfigError::FencingNeedsScripts`).
                unreachable!("a set is acquired, and fenced, in one command")
            }
        };
        // At most 2 * MAX_SET_LEN: a u16 (see `conn::run`).
        self.run = ((set.keys().len() * usize::from(per_key)) as u16, per_key);
    }

    /// How many replies a set's run is owed, and how many per key.
    pub(crate) fn run_len(&self) -> (u16, u8) {
        self.run
    }

    /// The plain script the command runs (a release or an extension).
    pub(crate) fn script_id(&self) -> ScriptId {
        self.script
            .id
            .or(self.tagged.id)
            .unwrap_or(ScriptId::Release)
    }

    /// The command's tag.
    pub(crate) fn tag(&self) -> u64 {
        self.tag
    }

    /// Whether the command sets a key (`SET NX` or its tagged script, or
    /// fencing's round 1).
    pub(crate) fn is_acquire(&self) -> bool {
        self.is_acquire
    }

    /// Whether the command writes what the replica guard (see
    /// `replica_ack`) must see reach the replicas: a key, its TTL, or a
    /// fence counter.
    pub(crate) fn is_guarded(&self) -> bool {
        self.is_guarded
    }

    /// The form the command takes on a connection with `caps`; `None` if
    /// it has none there (scripts are off, and the native form is absent).
    pub(crate) fn form(&self, caps: Capabilities) -> Option<Form> {
        if self.is_ping {
            return Some(Form::Ping);
        }
        if self.is_inspect {
            return Some(Form::PttlThenPing {
                holder: self.reads_holder,
            });
        }
        if self.is_publish {
            return Some(Form::Publish {
                sharded: caps.sharded,
            });
        }
        if caps.echoes() || self.echo_only {
            if self.is_set {
                return Some(Form::SetThenEcho);
            }
            if let Some(id) = self.script.id.map(|id| caps.script_for(id)) {
                if let Some(form) = caps.run_for(id) {
                    return Some(Form::Run { form, id });
                }
                if let Some(form) = caps.native_for(id) {
                    return Some(Form::Native {
                        form,
                        id,
                        notice: self.notice,
                    });
                }
                return caps.scripts.then_some(Form::ScriptThenEcho {
                    id,
                    by_digest: caps.is_cached(id),
                });
            }
        }
        let id = caps.script_for(self.tagged.id.expect("encoded for this connection's form"));
        Some(Form::TaggedScript {
            id,
            by_digest: caps.is_cached(id),
        })
    }

    /// The bytes of native form `form` (and a notice's `PUBSUB NUMSUB`, or
    /// `SHARDNUMSUB` if `sharded`).
    pub(crate) fn native(&self, form: Native, sharded: bool) -> &[u8] {
        &self.native[self.native_index(form, sharded)]
    }

    /// The bytes of `SET ... NX PX`, `PING tag`, `PTTL` or `PUBLISH`.
    pub(crate) fn plain(&self) -> &[u8] {
        &self.plain
    }

    /// The bytes of a `PUBLISH`, or its `SPUBLISH` if `sharded`.
    pub(crate) fn publish(&self, sharded: bool) -> &[u8] {
        if sharded {
            &self.spublish
        } else {
            &self.plain
        }
    }

    /// The bytes of `ECHO tag` (`PING tag` after `PTTL`).
    pub(crate) fn echo(&self) -> &[u8] {
        &self.echo
    }

    /// The arguments of script `id` (or of its sharded twin: the same)
    /// after its name, and how many there are.
    pub(crate) fn script_args(&self, id: ScriptId) -> (&[u8], usize) {
        let call = self.call(id);
        (&call.tail, call.args)
    }

    /// Appends the whole call of script `id`, by digest or by body.
    pub(crate) fn encode_script_call(&self, id: ScriptId, by_digest: bool, out: &mut Vec<u8>) {
        let call = self.call(id);
        if by_digest && id.is_sharded() {
            out.extend_from_slice(&call.head_sharded);
        } else if by_digest {
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
