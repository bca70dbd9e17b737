//! The commands of a lock on several resources (`SetCommand`): each one
//! script call per master over all the set's keys (`src/many/*.lua`), so
//! that a master grants, extends or releases the whole set or nothing of
//! it, in one atomic step. Their replies count as the single lock's
//! scripts' do (1 yes, 0 no; tagged `2 * tag + status`).
//!
//! A set of one is never sent as a set command: it is the single lock's
//! (see `lock::many`), on the same key.

use super::channel::channel_of;
use super::scripts::ScriptId;
use crate::names::{Keys, Names};
use crate::resp::{encode_args, Arg};

/// A command over every key of a set, with the set's one value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SetCommand<'a> {
    /// Every key set with `value` and `ttl_ms` if none exists; else none.
    Acquire {
        keys: Keys<'a>,
        value: &'a [u8],
        ttl_ms: u64,
    },
    /// Every key that holds `value` deleted; with `notify`, the notice
    /// (`.0`) published on the channel of each key deleted (`.1`: one per
    /// key, in the keys' order; an empty one for a key nobody can listen
    /// on).
    Release {
        keys: Keys<'a>,
        value: &'a [u8],
        notify: Option<(&'a [u8], Keys<'a>)>,
    },
    /// Every key's TTL set to `ttl_ms` if every key holds `value` (or,
    /// with `repair`, is absent: then set); else nothing.
    Extend {
        keys: Keys<'a>,
        value: &'a [u8],
        ttl_ms: u64,
        repair: bool,
    },
    /// A fenced set's round 1 (`src/fence/acquire_set.lua`): every key set
    /// with `value` and `ttl_ms` if none exists, and then the counter of
    /// the fence domain (the hash `domain`) raised once; else nothing.
    FenceAcquire {
        keys: Keys<'a>,
        domain: &'a [u8],
        value: &'a [u8],
        ttl_ms: u64,
    },
    /// A fenced set's write-back (`src/fence/write_back_set.lua`): the
    /// counter raised to `token` while every key holds `value`, in `epoch`.
    WriteBack {
        keys: Keys<'a>,
        domain: &'a [u8],
        value: &'a [u8],
        token: u64,
        epoch: u64,
    },
}

impl<'a> SetCommand<'a> {
    /// The set's keys.
    pub(crate) fn keys(&self) -> Keys<'a> {
        match *self {
            SetCommand::Acquire { keys, .. }
            | SetCommand::Release { keys, .. }
            | SetCommand::Extend { keys, .. }
            | SetCommand::FenceAcquire { keys, .. }
            | SetCommand::WriteBack { keys, .. } => keys,
        }
    }

    /// The fence domain's hash, for the fenced forms.
    pub(crate) fn domain_mut(&mut self) -> Option<&mut &'a [u8]> {
        match self {
            SetCommand::FenceAcquire { domain, .. } | SetCommand::WriteBack { domain, .. } => {
                Some(domain)
            }
            _ => None,
        }
    }

    /// The command as a voter of the single-cluster mode sends it: each
    /// key written as `prefix` then the key, into `keys` (so that every key
    /// of the set is in the voter's one slot), and a release's channels
    /// those of the written keys, into `channels` (an empty channel stays
    /// empty: nobody listens for that key). Both are cleared first; their
    /// room is kept, so a warm session does not allocate here.
    pub(crate) fn with_key_prefix<'k>(
        &self,
        prefix: &[u8],
        keys: &'k mut Names,
        channels: &'k mut Names,
    ) -> SetCommand<'k>
    where
        'a: 'k,
    {
        keys.clear();
        for key in self.keys().iter() {
            keys.push_with(|out| {
                out.extend_from_slice(prefix);
                out.extend_from_slice(key);
            });
        }
        // One prefix before every key keeps them sorted and distinct.
        let keys: &'k Names = keys;
        if let SetCommand::Release {
            notify: Some((_, theirs)),
            ..
        } = *self
        {
            channels.clear();
            for (key, theirs) in keys.keys().iter().zip(theirs.iter()) {
                channels.push_with(|out| {
                    if !theirs.is_empty() {
                        channel_of(key, out);
                    }
                });
            }
        }
        let channels: &'k Names = channels;
        self.over(keys.keys(), channels.keys())
    }

    /// The same command over `keys` in place of its own, and, for a
    /// release that tells waiters, `channels` (one per key, in the keys'
    /// order) in place of its channels; its other arguments unchanged (a
    /// fenced form's domain is the caller's to rewrite: see
    /// `Command::with_keys`).
    pub(crate) fn over<'k>(&self, keys: Keys<'k>, channels: Keys<'k>) -> SetCommand<'k>
    where
        'a: 'k,
    {
        match *self {
            SetCommand::Acquire { value, ttl_ms, .. } => SetCommand::Acquire {
                keys,
                value,
                ttl_ms,
            },
            SetCommand::Release { value, notify, .. } => SetCommand::Release {
                keys,
                value,
                notify: notify.map(|(notice, _)| (notice, channels)),
            },
            SetCommand::Extend {
                value,
                ttl_ms,
                repair,
                ..
            } => SetCommand::Extend {
                keys,
                value,
                ttl_ms,
                repair,
            },
            SetCommand::FenceAcquire {
                domain,
                value,
                ttl_ms,
                ..
            } => SetCommand::FenceAcquire {
                keys,
                domain,
                value,
                ttl_ms,
            },
            SetCommand::WriteBack {
                domain,
                value,
                token,
                epoch,
                ..
            } => SetCommand::WriteBack {
                keys,
                domain,
                value,
                token,
                epoch,
            },
        }
    }

    /// The plain script and its tagged twin.
    pub(crate) fn scripts(&self) -> (Option<ScriptId>, Option<ScriptId>) {
        let (plain, tagged) = match self {
            SetCommand::Acquire { .. } => (ScriptId::AcquireSet, ScriptId::AcquireSetTagged),
            SetCommand::Release { .. } => (ScriptId::ReleaseSet, ScriptId::ReleaseSetTagged),
            SetCommand::Extend { .. } => (ScriptId::ExtendSet, ScriptId::ExtendSetTagged),
            SetCommand::FenceAcquire { .. } => {
                (ScriptId::FenceAcquireSet, ScriptId::FenceAcquireSetTagged)
            }
            SetCommand::WriteBack { .. } => (ScriptId::WriteBackSet, ScriptId::WriteBackSetTagged),
        };
        (Some(plain), Some(tagged))
    }

    /// The fenced forms' arguments: the keys then the domain's hash as the
    /// last key, the rest, and the tag last (`src/fence/*_set.lua`, whose
    /// argument order is the single lock's fence scripts').
    fn encode_fenced(&self, tag: Option<u64>, out: &mut Vec<u8>) -> usize {
        let keys = self.keys();
        encode_args(out, &[Arg::Uint(keys.len() as u64 + 1)]);
        for key in keys.iter() {
            encode_args(out, &[Arg::Bytes(key)]);
        }
        let rest = match *self {
            SetCommand::FenceAcquire {
                domain,
                value,
                ttl_ms,
                ..
            } => {
                encode_args(
                    out,
                    &[Arg::Bytes(domain), Arg::Bytes(value), Arg::Uint(ttl_ms)],
                );
                3
            }
            SetCommand::WriteBack {
                domain,
                value,
                token,
                epoch,
                ..
            } => {
                encode_args(
                    out,
                    &[
                        Arg::Bytes(domain),
                        Arg::Bytes(value),
                        Arg::Uint(token),
                        Arg::Uint(epoch),
                    ],
                );
                4
            }
            _ => 0,
        };
        if let Some(tag) = tag {
            encode_args(out, &[Arg::Uint(tag)]);
        }
        1 + keys.len() + rest + usize::from(tag.is_some())
    }

    /// Appends the script's arguments after its name (key count, keys,
    /// the mode: `p` for plain or the tag, then the rest); returns how many
    /// it wrote.
    pub(crate) fn encode_script_args(&self, tag: Option<u64>, out: &mut Vec<u8>) -> usize {
        if matches!(
            self,
            SetCommand::FenceAcquire { .. } | SetCommand::WriteBack { .. }
        ) {
            return self.encode_fenced(tag, out);
        }
        let keys = self.keys();
        encode_args(out, &[Arg::Uint(keys.len() as u64)]);
        for key in keys.iter() {
            encode_args(out, &[Arg::Bytes(key)]);
        }
        let mode = match tag {
            Some(tag) => Arg::Uint(tag),
            None => Arg::Bytes(b"p"),
        };
        let rest = match *self {
            SetCommand::Acquire { value, ttl_ms, .. } => {
                encode_args(out, &[mode, Arg::Bytes(value), Arg::Uint(ttl_ms)]);
                3
            }
            SetCommand::Release {
                value,
                notify: None,
                ..
            } => {
                encode_args(out, &[mode, Arg::Bytes(value)]);
                2
            }
            SetCommand::Release {
                value,
                notify: Some((notice, channels)),
                ..
            } => {
                debug_assert_eq!(channels.len(), keys.len(), "one channel per key");
                encode_args(out, &[mode, Arg::Bytes(value), Arg::Bytes(notice)]);
                for channel in channels.iter() {
                    encode_args(out, &[Arg::Bytes(channel)]);
                }
                3 + channels.len()
            }
            SetCommand::Extend {
                value,
                ttl_ms,
                repair,
                ..
            } => {
                let repair: &[u8] = if repair { b"1" } else { b"0" };
                encode_args(
                    out,
                    &[
                        mode,
                        Arg::Bytes(value),
                        Arg::Uint(ttl_ms),
                        Arg::Bytes(repair),
                    ],
                );
                4
            }
            SetCommand::FenceAcquire { .. } | SetCommand::WriteBack { .. } => 0,
        };
        1 + keys.len() + rest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_commands_script_arguments_list_every_key_then_the_mode() {
        let mut names = Names::default();
        names.fill(["b", "a"], |_| Ok(())).unwrap();
        let acquire = SetCommand::Acquire {
            keys: names.keys(),
            value: b"v",
            ttl_ms: 500,
        };
        let mut out = Vec::new();
        assert_eq!(acquire.encode_script_args(None, &mut out), 6);
        assert_eq!(
            out,
            b"$1\r\n2\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\np\r\n$1\r\nv\r\n$3\r\n500\r\n"
        );
        out.clear();
        let mut channels = Names::default();
        channels.fill(["ca", "cb"], |_| Ok(())).unwrap();
        let release = SetCommand::Release {
            keys: names.keys(),
            value: b"v",
            notify: Some((b"rN", channels.keys())),
        };
        assert_eq!(release.encode_script_args(Some(7), &mut out), 8);
        assert!(out.starts_with(b"$1\r\n2\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\n7\r\n"));
        assert!(out.ends_with(b"$2\r\nrN\r\n$2\r\nca\r\n$2\r\ncb\r\n"));
        let extend = SetCommand::Extend {
            keys: names.keys(),
            value: b"v",
            ttl_ms: 9,
            repair: true,
        };
        out.clear();
        assert_eq!(extend.encode_script_args(None, &mut out), 7);
        assert!(out.ends_with(b"$1\r\np\r\n$1\r\nv\r\n$1\r\n9\r\n$1\r\n1\r\n"));
        assert_eq!(
            extend.scripts(),
            (Some(ScriptId::ExtendSet), Some(ScriptId::ExtendSetTagged))
        );
    }

    #[test]
    fn a_prefixed_set_has_every_key_in_the_prefixs_slot_and_their_channels() {
        use crate::cluster::key_slot;
        let mut names = Names::default();
        names.fill(["b", "a", "c"], |_| Ok(())).unwrap();
        let mut theirs = Names::default();
        for channel in [&b"ca"[..], b"", b"cc"] {
            theirs.push_with(|out| out.extend_from_slice(channel));
        }
        let release = SetCommand::Release {
            keys: names.keys(),
            value: b"v",
            notify: Some((b"rN", theirs.keys())),
        };
        let (mut keys, mut channels) = (Names::default(), Names::default());
        let SetCommand::Release {
            keys: written,
            value,
            notify: Some((notice, written_channels)),
        } = release.with_key_prefix(b"{06S}", &mut keys, &mut channels)
        else {
            panic!("a release stays a release with its notice");
        };
        let written: Vec<&[u8]> = written.iter().collect();
        assert_eq!(written, [&b"{06S}a"[..], b"{06S}b", b"{06S}c"]);
        assert!(written.iter().all(|k| key_slot(k) == key_slot(b"{06S}")));
        assert_eq!((value, notice), (&b"v"[..], &b"rN"[..]));
        let mut expected_a = Vec::new();
        channel_of(b"{06S}a", &mut expected_a);
        let mut expected_c = Vec::new();
        channel_of(b"{06S}c", &mut expected_c);
        let written_channels: Vec<&[u8]> = written_channels.iter().collect();
        assert_eq!(written_channels, [&expected_a[..], b"", &expected_c[..]]);
        // The other forms keep their arguments, with the written keys.
        let extend = SetCommand::Extend {
            keys: names.keys(),
            value: b"v",
            ttl_ms: 9,
            repair: true,
        };
        let SetCommand::Extend {
            keys: written,
            ttl_ms: 9,
            repair: true,
            ..
        } = extend.with_key_prefix(b"{x}", &mut keys, &mut channels)
        else {
            panic!("an extension stays an extension");
        };
        assert_eq!(written.get(2), Some(&b"{x}c"[..]));
    }

    /// Where the server has `MSETEX` (Valkey 9.1, Redis 8.4), a set's
    /// acquisition is that one command, the plain script's arguments kept
    /// to go again by script if the server refuses it; without it, and
    /// without scripts, it has no form (the master fails: `CannotLockSets`).
    #[test]
    fn a_sets_acquisition_is_msetex_where_the_server_has_it() {
        use crate::command::native::{Known, Lack, Native};
        use crate::command::Command;
        use crate::command::{encode_native_from_script_args, Capabilities, Encoded, Form};
        let mut names = Names::default();
        names.fill(["b", "a"], |_| Ok(())).unwrap();
        let acquire = Command::Set(SetCommand::Acquire {
            keys: names.keys(),
            value: b"v",
            ttl_ms: 500,
        });
        let mut caps = Capabilities::before_handshake(true, true, false);
        caps.echo = true;
        for form in Native::ALL {
            caps.native.set(form, Known::Present);
        }
        let mut encoded = Encoded::default();
        encoded.reset(&acquire, 4);
        encoded.prepare(&acquire, caps);
        let form = encoded.form(caps);
        assert_eq!(
            form,
            Some(Form::Native {
                form: Native::MSetEx,
                id: ScriptId::AcquireSet,
                notice: false
            })
        );
        let msetex: &[u8] = b"*9\r\n$6\r\nMSETEX\r\n$1\r\n2\r\n$1\r\na\r\n$1\r\nv\r\n\
            $1\r\nb\r\n$1\r\nv\r\n$2\r\nNX\r\n$2\r\nPX\r\n$3\r\n500\r\n";
        assert_eq!(encoded.native(Native::MSetEx, false), msetex);
        // Built again from the script's arguments: the same bytes.
        let (tail, args) = encoded.script_args(ScriptId::AcquireSet);
        assert_eq!(args, 6);
        let mut again = Vec::new();
        encode_native_from_script_args(Native::MSetEx, ScriptId::AcquireSet, tail, &mut again);
        assert_eq!(again, msetex);
        // Without MSETEX: the script, or, without scripts, no form at all.
        caps.native
            .set(Native::MSetEx, Known::Absent(Lack::Unknown));
        let script = encoded.form(caps);
        assert!(matches!(
            script,
            Some(Form::ScriptThenEcho {
                id: ScriptId::AcquireSet,
                ..
            })
        ));
        caps.scripts = false;
        assert_eq!(encoded.form(caps), None);
        let error = caps.no_form_left(ScriptId::AcquireSet);
        assert!(
            matches!(error, crate::error::NodeError::CannotLockSets(_)),
            "{error}"
        );
        assert!(error.to_string().contains("MSETEX"), "{error}");
    }

    #[test]
    fn a_fenced_sets_scripts_take_the_domains_hash_as_their_last_key_and_the_tag_last() {
        let mut names = Names::default();
        names.fill(["b", "a"], |_| Ok(())).unwrap();
        let acquire = SetCommand::FenceAcquire {
            keys: names.keys(),
            domain: b"d",
            value: b"v",
            ttl_ms: 500,
        };
        let mut out = Vec::new();
        // The key count, three keys (a, b, the hash), value, TTL.
        assert_eq!(acquire.encode_script_args(None, &mut out), 6);
        assert_eq!(
            out,
            b"$1\r\n3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nd\r\n$1\r\nv\r\n$3\r\n500\r\n"
        );
        let write_back = SetCommand::WriteBack {
            keys: names.keys(),
            domain: b"d",
            value: b"v",
            token: 42,
            epoch: 9,
        };
        out.clear();
        assert_eq!(write_back.encode_script_args(Some(7), &mut out), 8);
        assert!(out.starts_with(b"$1\r\n3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nd\r\n"));
        assert!(out.ends_with(b"$1\r\nv\r\n$2\r\n42\r\n$1\r\n9\r\n$1\r\n7\r\n"));
        assert_eq!(
            acquire.scripts(),
            (
                Some(ScriptId::FenceAcquireSet),
                Some(ScriptId::FenceAcquireSetTagged)
            )
        );
        assert!(ScriptId::FenceAcquireSet.reads() && !ScriptId::WriteBackSet.reads());
        assert!(ScriptId::FenceAcquireSetTagged.is_fence_round_one());
        for id in [ScriptId::FenceAcquireSet, ScriptId::WriteBackSet] {
            let digest = id.script().digest;
            assert!(digest.len() == 40 && digest.iter().all(u8::is_ascii_hexdigit));
        }
        let mut command = crate::command::Command::Set(acquire);
        assert!(command.names_domain() && command.is_acquisition());
        command = crate::command::Command::Set(write_back);
        assert!(command.names_domain() && !command.is_acquisition());
    }
}
