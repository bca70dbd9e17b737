//! Whether a fenced handle names the masters its fence domain was
//! initialised on (docs/fencing.md, "Members"). Tokens are unique only if
//! any two quorums share a master (assumption A2): two clients of one
//! domain that name different sets of masters may each find a quorum, and
//! count the same token. So each anchor records the domain's id (drawn by
//! `fence_init`), how many masters it was initialised on, and which of
//! them it is; a handle refuses, with a configuration error, masters that
//! are not all members of one domain, or as many as it has, or one member
//! under two names.

use crate::error::{ConfigError, Error};
use crate::handle::Shared;
use crate::quorum::NodeSet;
use crate::round::Session;

/// The configuration error if the masters this handle names are not the
/// members of one fence domain, as the session's connections' probes found
/// them, or two of the masters whose round-1 grants are `agreed` hold the
/// same place in it (a grant says which place: current, where a probe may
/// predate a repair). `None` when nothing says so.
pub(crate) fn misnamed(shared: &Shared, session: &Session, agreed: NodeSet) -> Option<Error> {
    let named = shared.nodes.len();
    let name = |i: usize| shared.nodes[i].name.clone();
    let mut first = None;
    for i in 0..named {
        let Some(membership) = session.fence_check(i).membership() else {
            continue;
        };
        if membership.members as usize != named {
            let initialised = membership.members as usize;
            return Some(Error::Config(ConfigError::FenceMasterCount {
                configured: named,
                initialised,
            }));
        }
        match first {
            None => first = Some((i, membership.domain_id)),
            Some((j, domain_id)) if domain_id != membership.domain_id => {
                return Some(Error::Config(ConfigError::FenceMastersDiffer {
                    first: name(j),
                    second: name(i),
                }));
            }
            Some(_) => {}
        }
    }
    for i in agreed.iter() {
        let member = session.reading(i).member;
        let twin = agreed
            .iter()
            .find(|&j| j > i && member != 0 && session.reading(j).member == member);
        if let Some(j) = twin {
            return Some(Error::Config(ConfigError::FenceMasterTwice {
                first: name(i),
                second: name(j),
            }));
        }
    }
    None
}
