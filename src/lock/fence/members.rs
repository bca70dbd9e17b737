//! Whether a fenced handle names the masters its fence domain was
//! initialised on (docs/fencing.md, "Members"). Tokens are unique only if
//! any two quorums share a master (assumption A2): two clients of one
//! domain that name different sets of masters may each find a quorum, and
//! count the same token. So each anchor records the domain's id (drawn by
//! `fence_init`), how many masters it was initialised on, and which of
//! them it is; a handle refuses, with a configuration error, masters that
//! are not all members of one domain, or as many as it names, or one
//! member under two names.
//!
//! What the probes of the session's connections found is checked: every
//! master whose grant counts toward a token has answered its probe first
//! (on the same connection), so a master that is not a member never counts
//! unchecked; one that did not answer yet is checked by a later call.

use crate::error::{ConfigError, Error};
use crate::handle::Shared;
use crate::round::Session;

/// The configuration error if the masters this handle names are not the
/// members of one fence domain, as the session's connections' probes found
/// them; `None` when nothing found says so.
pub(crate) fn misnamed(shared: &Shared, session: &Session) -> Option<Error> {
    let named = shared.nodes.len();
    let name = |i: usize| shared.nodes[i].name.clone();
    let known = |i: usize| session.fence_check(i).membership();
    for i in 0..named {
        let Some(this) = known(i) else {
            continue;
        };
        if this.members as usize != named {
            return Some(Error::Config(ConfigError::FenceMasterCount {
                configured: named,
                initialised: this.members as usize,
            }));
        }
        for j in 0..i {
            let Some(that) = known(j) else {
                continue;
            };
            let (first, second) = (name(j), name(i));
            if that.domain_id != this.domain_id {
                return Some(Error::Config(ConfigError::FenceMastersDiffer {
                    first,
                    second,
                }));
            }
            if that.member == this.member {
                return Some(Error::Config(ConfigError::FenceMasterTwice {
                    first,
                    second,
                }));
            }
        }
    }
    None
}
