use super::*;
use crate::conn::Resolve;
use crate::events::HandleEvent;
use std::collections::HashMap;
use std::io;

fn at(last: u8, port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, last], port))
}

#[test]
fn after_a_failed_connect_the_next_address_of_the_name_is_preferred() {
    let (a, b, c) = (at(1, 7), at(2, 7), at(3, 7));
    let free = |_| false;
    let found = [a, b, c];
    assert_eq!(
        choose(&found, Some(b), Why::Unreachable, free),
        Choice::Use(c)
    );
    assert_eq!(
        choose(&found, Some(c), Why::Unreachable, free),
        Choice::Use(a),
        "round the list"
    );
    // The only address: kept (the server may be restarting).
    assert_eq!(choose(&[a], Some(a), Why::Unreachable, free), Choice::Keep);
    // Not listed any more: the resolver's first.
    assert_eq!(
        choose(&[b, c], Some(a), Why::Unreachable, free),
        Choice::Use(b)
    );
    // A topology refresh keeps what the name still lists.
    assert_eq!(choose(&found, Some(b), Why::Refresh, free), Choice::Keep);
    assert_eq!(choose(&[c], Some(b), Why::Refresh, free), Choice::Use(c));
    assert_eq!(choose(&found, None, Why::New, free), Choice::Use(a));
}

#[test]
fn an_address_another_voter_has_is_skipped_and_never_taken() {
    let (a, b, c) = (at(1, 7), at(2, 7), at(3, 7));
    let taken = |x| x == b;
    assert_eq!(
        choose(&[b, c], Some(a), Why::Unreachable, taken),
        Choice::Use(c)
    );
    assert_eq!(
        choose(&[b], Some(a), Why::Unreachable, taken),
        Choice::Taken(b)
    );
    assert_eq!(choose(&[b], None, Why::New, taken), Choice::Taken(b));
}

/// A resolver whose answers the test sets, counting each lookup per name;
/// while its gate is shut, every lookup waits.
#[derive(Default)]
struct Table {
    names: Mutex<HashMap<String, io::Result<Vec<SocketAddr>>>>,
    asked: Mutex<Vec<String>>,
    shut: Mutex<bool>,
    opened: std::sync::Condvar,
}

impl Table {
    fn set(&self, name: &str, answer: io::Result<Vec<SocketAddr>>) {
        self.names.lock().unwrap().insert(name.into(), answer);
    }

    fn asked(&self, name: &str) -> usize {
        self.asked
            .lock()
            .unwrap()
            .iter()
            .filter(|n| *n == name)
            .count()
    }

    fn gate(&self, shut: bool) {
        *self.shut.lock().unwrap() = shut;
        self.opened.notify_all();
    }
}

impl Resolve for Arc<Table> {
    fn resolve(&self, host: &str, _port: u16) -> io::Result<Vec<SocketAddr>> {
        self.asked.lock().unwrap().push(host.into());
        let mut shut = self.shut.lock().unwrap();
        while *shut {
            shut = self.opened.wait(shut).unwrap();
        }
        drop(shut);
        match self.names.lock().unwrap().get(host) {
            Some(Ok(found)) => Ok(found.clone()),
            Some(Err(e)) => Err(io::Error::new(e.kind(), e.to_string())),
            None => Err(io::Error::new(io::ErrorKind::NotFound, "unknown name")),
        }
    }
}

/// The changes told, as lines.
#[derive(Default)]
struct Told(Mutex<Vec<String>>);

impl HandleEvent for Told {
    fn handle_master(&self, event: MasterEvent<'_>) {
        let line = match event.change() {
            MasterChange::Readdressed { node, from, to } => {
                format!("{} {}: {node} {from} -> {to}", event.index(), event.node())
            }
            MasterChange::Unresolved { node, reason, kept } => {
                format!(
                    "{} {}: {node} unresolved ({reason}), kept {kept:?}",
                    event.index(),
                    event.node()
                )
            }
            other => format!("{other:?}"),
        };
        self.0.lock().unwrap().push(line);
    }
}

fn lookups(table: &Arc<Table>, told: &Arc<Told>) -> Arc<Lookups> {
    let lookups = Lookups::new(
        Resolver(Arc::new(Arc::clone(table))),
        Hook::new(Arc::clone(told) as Arc<dyn HandleEvent>),
    );
    lookups.name_groups(vec![(0, "m0".into()), (1, "m1".into())]);
    lookups
}

/// Waits (at most 10 s) until the cell's lookup is done.
fn settled(cell: &Address) {
    let until = Instant::now() + Duration::from_secs(10);
    while cell.running.load(Ordering::Acquire) != 0 {
        assert!(Instant::now() < until, "lookup never ended");
        thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_moved_name_is_installed_told_and_looked_up_at_most_once_a_second() {
    let (table, told) = (Arc::new(Table::default()), Arc::new(Told::default()));
    let lookups = lookups(&table, &told);
    let cell = Address::new(&lookups, 0, "db:7".into(), Some("db"), 7, Some(at(1, 7)));
    table.set("db", Ok(vec![at(2, 7)]));
    let t0 = Instant::now();
    cell.readdress(Why::Unreachable, t0);
    settled(&cell);
    assert_eq!(cell.current(), Some(at(2, 7)));
    assert_eq!(
        *told.0.lock().unwrap(),
        ["0 m0: db:7 127.0.0.1:7 -> 127.0.0.2:7"]
    );
    // Within the second: no lookup, however often asked.
    table.set("db", Ok(vec![at(3, 7)]));
    for ms in [0, 1, 500, 999] {
        cell.readdress(Why::Unreachable, t0 + Duration::from_millis(ms));
    }
    settled(&cell);
    assert_eq!(table.asked("db"), 1);
    assert_eq!(cell.current(), Some(at(2, 7)));
    // A second after the lookup ended: looked up again.
    cell.readdress(Why::Unreachable, Instant::now() + RESOLVE_EVERY);
    settled(&cell);
    assert_eq!(table.asked("db"), 2);
    assert_eq!(cell.current(), Some(at(3, 7)));
}

/// A lookup thread that starts late (a loaded machine; here the resolver
/// is held for a second) must not let the next lookup in right after it:
/// the second counts from when the lookup ended, not from its claim (two
/// lookups 10 ms apart were seen under load).
#[test]
fn the_second_between_lookups_counts_from_the_end_of_the_last() {
    let (table, told) = (Arc::new(Table::default()), Arc::new(Told::default()));
    let lookups = lookups(&table, &told);
    let cell = Address::new(&lookups, 0, "db:7".into(), Some("db"), 7, Some(at(1, 7)));
    table.set("db", Ok(vec![at(2, 7)]));
    table.gate(true);
    let t0 = Instant::now();
    cell.readdress(Why::Unreachable, t0);
    thread::sleep(RESOLVE_EVERY);
    table.gate(false);
    settled(&cell);
    assert_eq!(table.asked("db"), 1);
    // A second after the claim, moments after the lookup ended.
    cell.readdress(Why::Unreachable, t0 + RESOLVE_EVERY);
    settled(&cell);
    assert_eq!(table.asked("db"), 1, "looked up again right after");
}

#[test]
fn a_name_that_stops_resolving_keeps_its_address_and_says_so_once() {
    let (table, told) = (Arc::new(Table::default()), Arc::new(Told::default()));
    let lookups = lookups(&table, &told);
    let cell = Address::new(&lookups, 1, "db:7".into(), Some("db"), 7, Some(at(1, 7)));
    // Each time a second after the last claim and after the last lookup
    // ended.
    let mut when = Instant::now();
    let mut ask = || {
        cell.readdress(Why::Unreachable, when);
        settled(&cell);
        when = (when + RESOLVE_EVERY).max(Instant::now() + RESOLVE_EVERY);
    };
    for _ in 0..3 {
        ask();
    }
    assert_eq!(table.asked("db"), 3);
    assert_eq!(cell.current(), Some(at(1, 7)));
    assert_eq!(
        *told.0.lock().unwrap(),
        ["1 m1: db:7 unresolved (unknown name), kept Some(127.0.0.1:7)"]
    );
    // Found again, unmoved: nothing to tell; failing again is told again.
    table.set("db", Ok(vec![at(1, 7)]));
    ask();
    table.set("db", Ok(vec![]));
    ask();
    let lines = told.0.lock().unwrap();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[1].contains("unresolved (no addresses)"), "{lines:?}");
}

#[test]
fn an_address_of_another_voters_server_is_refused() {
    let (table, told) = (Arc::new(Table::default()), Arc::new(Told::default()));
    let lookups = lookups(&table, &told);
    let _other = Address::new(&lookups, 0, "a:7".into(), Some("a"), 7, Some(at(1, 7)));
    let cell = Address::new(&lookups, 1, "b:7".into(), Some("b"), 7, Some(at(2, 7)));
    // Of its own voter (a cluster's nodes), an address may repeat.
    let sibling = Address::new(&lookups, 1, "c:7".into(), Some("c"), 7, Some(at(3, 7)));
    table.set("b", Ok(vec![at(1, 7)]));
    let t0 = Instant::now();
    cell.readdress(Why::Unreachable, t0);
    settled(&cell);
    assert_eq!(cell.current(), Some(at(2, 7)));
    let lines = told.0.lock().unwrap().clone();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].starts_with(
            "1 m1: b:7 unresolved (it resolves only to 127.0.0.1:7, the server of another voter"
        ),
        "{lines:?}"
    );
    table.set("c", Ok(vec![at(2, 7)]));
    sibling.readdress(Why::Refresh, t0);
    settled(&sibling);
    assert_eq!(sibling.current(), Some(at(2, 7)));
}

#[test]
fn lookups_run_away_from_the_caller_and_at_most_four_at_once() {
    let (table, told) = (Arc::new(Table::default()), Arc::new(Told::default()));
    let lookups = lookups(&table, &told);
    // Every lookup hangs until the gate opens (a DNS server that does not
    // answer).
    table.gate(true);
    let cells: Vec<_> = (0..5u8)
        .map(|k| {
            let name = format!("n{k}");
            table.set(&name, Ok(vec![at(10 + k, 7)]));
            Address::new(&lookups, 1, format!("{name}:7"), Some(&name), 7, None)
        })
        .collect();
    let t0 = Instant::now();
    for cell in &cells {
        cell.readdress(Why::New, t0);
    }
    // The caller did not wait for the lookups, which hang.
    assert!(t0.elapsed() < Duration::from_secs(5));
    assert!(cells.iter().all(|c| c.current().is_none()));
    // Four run; the fifth was dropped (its next failure asks again).
    assert_eq!(lookups.running.load(Ordering::Acquire), MAX_LOOKUPS);
    assert_eq!(cells[4].running.load(Ordering::Acquire), 0);
    table.gate(false);
    for cell in &cells {
        settled(cell);
    }
    assert!(cells[..4].iter().all(|c| c.current().is_some()));
    assert_eq!(cells[4].current(), None);
    assert_eq!(table.asked("n4"), 0);
    cells[4].readdress(Why::Unreachable, t0);
    settled(&cells[4]);
    assert_eq!(cells[4].current(), Some(at(14, 7)));
    // A node without a host name is never looked up.
    let fixed = Address::new(&lookups, 0, "127.0.0.1:7".into(), None, 7, Some(at(1, 7)));
    fixed.readdress(Why::Unreachable, t0);
    assert_eq!(fixed.running.load(Ordering::Acquire), 0);
    // Every place was given back.
    assert_eq!(lookups.running.load(Ordering::Acquire), 0);
    // A node met by name that resolves is no move: nothing told.
    assert!(told.0.lock().unwrap().is_empty());
}

/// A hook slow to take a lookup's outcome: the lookup counts as running
/// until it has been told (the tests read what was told once a lookup
/// has settled; `a_panicking_resolver_is_a_failed_lookup` once found
/// nothing told, under load).
#[test]
fn a_lookup_ends_only_once_its_outcome_is_told() {
    struct Slow(Told);
    impl HandleEvent for Slow {
        fn handle_master(&self, event: MasterEvent<'_>) {
            thread::sleep(Duration::from_millis(100));
            self.0.handle_master(event);
        }
    }
    let table = Arc::new(Table::default());
    let slow = Arc::new(Slow(Told::default()));
    let lookups = Lookups::new(
        Resolver(Arc::new(Arc::clone(&table))),
        Hook::new(Arc::clone(&slow) as Arc<dyn HandleEvent>),
    );
    lookups.name_groups(vec![(0, "m0".into())]);
    let cell = Address::new(&lookups, 0, "db:7".into(), Some("db"), 7, Some(at(1, 7)));
    table.set("db", Ok(vec![at(2, 7)]));
    cell.readdress(Why::Unreachable, Instant::now());
    settled(&cell);
    assert_eq!(slow.0 .0.lock().unwrap().len(), 1, "settled before told");
    assert_eq!(lookups.running.load(Ordering::Acquire), 0);
}

#[test]
fn a_panicking_resolver_is_a_failed_lookup() {
    struct Panics;
    impl Resolve for Panics {
        fn resolve(&self, _: &str, _: u16) -> io::Result<Vec<SocketAddr>> {
            panic!("resolver bug")
        }
    }
    let told = Arc::new(Told::default());
    let lookups = Lookups::new(
        Resolver(Arc::new(Panics)),
        Hook::new(Arc::clone(&told) as Arc<dyn HandleEvent>),
    );
    lookups.name_groups(vec![(0, "m0".into())]);
    let cell = Address::new(&lookups, 0, "db:7".into(), Some("db"), 7, Some(at(1, 7)));
    cell.readdress(Why::Unreachable, Instant::now());
    settled(&cell);
    assert_eq!(cell.current(), Some(at(1, 7)));
    assert!(told.0.lock().unwrap()[0].contains("the resolver panicked"));
    assert_eq!(lookups.running.load(Ordering::Acquire), 0);
}
