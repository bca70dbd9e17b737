//! A set's resources looked at without taking them
//! (`Redlock::inspect_many`): one batch round, one `PTTL` (and `GETRANGE`
//! of the holder label) per resource per master, pipelined, each resource
//! decided as `Redlock::inspect` decides one ([`SetInspection`]).

use crate::command::Command;
use crate::error::Error;
use crate::events::call::name_resources;
use crate::events::Resources;
use crate::handle::Shared;
use crate::lock::inspect::{inspection, Inspection};
use crate::names::Names;
use crate::quorum::{Decision, NodeSet, Rule};
use crate::round::BatchOp;
use std::time::{Duration, Instant};

/// What a look at several resources found: one [`Inspection`] per
/// resource (see [`Redlock::inspect_many`](crate::Redlock::inspect_many)).
///
/// ```no_run
/// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
/// let seen = redlock.inspect_many(["account:17", "account:42"])?;
/// for (resource, inspection) in seen.iter() {
///     println!("{}: {inspection}", resource.escape_ascii());
/// }
/// # Ok::<(), redlock_sync::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct SetInspection {
    /// By resource, sorted, each once.
    resources: Vec<(Vec<u8>, Inspection)>,
}

impl SetInspection {
    /// The inspection of `resource`, if it was one of those looked at.
    ///
    /// ```no_run
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// let seen = redlock.inspect_many(["a", "b"])?;
    /// assert!(seen.get("a").is_some() && seen.get("c").is_none());
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn get(&self, resource: impl AsRef<[u8]>) -> Option<&Inspection> {
        let resource = resource.as_ref();
        self.resources
            .binary_search_by(|(name, _)| name[..].cmp(resource))
            .ok()
            .map(|i| &self.resources[i].1)
    }

    /// Each resource with its inspection, sorted by name, each once.
    ///
    /// ```no_run
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// for (resource, seen) in redlock.inspect_many(["b", "a"])?.iter() {
    ///     println!("{}: held {}", resource.escape_ascii(), seen.is_held());
    /// }
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&[u8], &Inspection)> + '_ {
        self.resources.iter().map(|(name, seen)| (&name[..], seen))
    }

    /// Whether every resource is free (absent from a quorum of masters,
    /// see [`Inspection::is_free`]): a set acquisition now could take them.
    ///
    /// ```no_run
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// if redlock.inspect_many(["a", "b"])?.is_free() {
    ///     println!("a and b are both free");
    /// }
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn is_free(&self) -> bool {
        self.resources.iter().all(|(_, seen)| seen.is_free())
    }

    /// The holder label that a quorum of masters shows for every resource
    /// (see [`Inspection::holder_label`]), if one holder's label is agreed
    /// for all of them: a set held by one holder, or single locks of one.
    ///
    /// ```no_run
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// if let Some(holder) = redlock.inspect_many(["a", "b"])?.held_by_one_holder() {
    ///     println!("a and b are held by {holder}");
    /// }
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn held_by_one_holder(&self) -> Option<&str> {
        let mut labels = self.resources.iter().map(|(_, seen)| seen.holder_label());
        let first = labels.next()??;
        labels.all(|label| label == Some(first)).then_some(first)
    }
}

/// One batch round of `PTTL` and `GETRANGE` of the holder label per
/// resource on every master, each resource decided as `inspect` decides
/// one; names checked (and bounded) as a set's before any I/O.
pub(crate) fn inspect_many<I, R>(shared: &Shared, resources: I) -> Result<SetInspection, Error>
where
    I: IntoIterator<Item = R>,
    R: AsRef<[u8]>,
{
    let mut names = Names::default();
    names.fill(resources, Shared::check_resource)?;
    name_resources(Resources::set(names.keys()));
    let everyone = NodeSet::all(shared.voters.len());
    let ops: Vec<BatchOp<'_>> = names
        .keys()
        .iter()
        .map(|resource| BatchOp {
            command: Command::Inspect {
                resource,
                holder: true,
            },
            to: everyone,
            others: None,
            skip: NodeSet::EMPTY,
        })
        .collect();
    let mut session = shared.pool.take();
    let start = Instant::now();
    let deadline = start + shared.node_timeout;
    let results = session.run_batch(shared.masters(), &ops, Rule::Everyone, deadline);
    let elapsed: Duration = start.elapsed();
    shared.pool.give_back(session);
    let mut seen = Vec::with_capacity(names.len());
    for (op, resource) in names.keys().iter().enumerate() {
        let report = results.report(op, &shared.voters);
        if results.tally(op).decision(Rule::Everyone) != Decision::Reached {
            return Err(Error::NoQuorum(report));
        }
        let pttls: Vec<_> = (0..shared.voters.len())
            .map(|i| results.pttl(op, i))
            .collect();
        seen.push((resource.to_vec(), inspection(&report, &pttls, elapsed)));
    }
    Ok(SetInspection { resources: seen })
}
