//! The feature `tracing`: the span each public call runs in (its
//! resource, operation, outcome, masters agreed, error) and the events
//! the `log` feature's lines are made of, recorded against real servers by
//! a layer of the test's own over `tracing-subscriber`'s registry; and
//! never a lock value or a password in a field.
//! (`cargo test --features tracing --test tracing`.)

mod support;

use redlock_sync::{Redlock, WithLockError};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Mutex, MutexGuard, Once};
use std::thread;
use std::time::{Duration, Instant};
use support::{Cluster, Proxy, RedisServer};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// A span as recorded: its name, parent, fields (as last recorded).
#[derive(Clone, Debug)]
struct SpanSeen {
    id: u64,
    name: &'static str,
    target: String,
    parent: Option<u64>,
    fields: BTreeMap<&'static str, String>,
    closed: bool,
    /// Its place in `SPANS`, which tells spans with reused ids apart.
    index: usize,
}

/// An event as recorded, with the span it happened in.
#[derive(Clone, Debug)]
struct EventSeen {
    level: Level,
    fields: BTreeMap<&'static str, String>,
    /// The index (in `SPANS`) of the span it happened in.
    span: Option<usize>,
}

static SPANS: Mutex<Vec<SpanSeen>> = Mutex::new(Vec::new());
static EVENTS: Mutex<Vec<EventSeen>> = Mutex::new(Vec::new());

/// Fields written out: strings as they are, everything else as `Debug`
/// shows it (a `%` field's `Display`).
struct Fields<'a>(&'a mut BTreeMap<&'static str, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name(), value.to_string());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name(), format!("{value:?}"));
    }
}

/// The index of the open span `id`.
fn open_span(spans: &[SpanSeen], id: &Id) -> Option<usize> {
    spans
        .iter()
        .rev()
        .find(|s| s.id == id.into_u64() && !s.closed)
        .map(|s| s.index)
}

struct Capture;

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        let parent = ctx
            .span(id)
            .and_then(|span| span.parent().map(|p| p.id().into_u64()));
        let mut spans = SPANS.lock().unwrap();
        let index = spans.len();
        spans.push(SpanSeen {
            id: id.into_u64(),
            name: attrs.metadata().name(),
            target: attrs.metadata().target().to_string(),
            parent,
            fields,
            closed: false,
            index,
        });
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        let mut spans = SPANS.lock().unwrap();
        if let Some(i) = open_span(&spans, id) {
            values.record(&mut Fields(&mut spans[i].fields));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        let current = ctx.event_span(event).map(|span| span.id());
        let spans = SPANS.lock().unwrap();
        let span = current.and_then(|id| open_span(&spans, &id));
        drop(spans);
        EVENTS.lock().unwrap().push(EventSeen {
            level: *event.metadata().level(),
            fields,
            span,
        });
    }

    fn on_close(&self, id: Id, _: Context<'_, S>) {
        let mut spans = SPANS.lock().unwrap();
        if let Some(i) = open_span(&spans, &id) {
            spans[i].closed = true;
        }
    }
}

/// Installs the capture for the whole process (the renewal thread's events
/// too), and lets one test at a time look.
fn capture() -> MutexGuard<'static, ()> {
    static INSTALL: Once = Once::new();
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    INSTALL.call_once(|| {
        let subscriber = tracing_subscriber::registry().with(Capture);
        tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
    });
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn spans() -> Vec<SpanSeen> {
    SPANS.lock().unwrap().clone()
}

fn events() -> Vec<EventSeen> {
    EVENTS.lock().unwrap().clone()
}

/// The spans named `name` on `resource`, in the order they opened.
fn spans_on(name: &str, resource: &str) -> Vec<SpanSeen> {
    spans()
        .into_iter()
        .filter(|s| {
            s.name == name && s.fields.get("resource").map(String::as_str) == Some(resource)
        })
        .collect()
}

/// The one span named `name` on `resource`.
fn the_span(name: &str, resource: &str) -> SpanSeen {
    let found = spans_on(name, resource);
    assert_eq!(found.len(), 1, "{name} on {resource}: {:#?}", spans());
    found.into_iter().next().unwrap()
}

/// The events that happened in the span at `index`.
fn events_in(index: usize) -> Vec<EventSeen> {
    events()
        .into_iter()
        .filter(|e| e.span == Some(index))
        .collect()
}

/// A count of masters that agreed: a round decides at quorum (2 of 3),
/// so the third answer may not be awaited.
fn a_quorum(fields: &BTreeMap<&'static str, String>) -> bool {
    matches!(field(fields, "masters_agreed"), Some("2" | "3"))
}

fn field<'a>(fields: &'a BTreeMap<&'static str, String>, name: &str) -> Option<&'a str> {
    fields.get(name).map(String::as_str)
}

/// Waits up to `within` for `done`; says whether it came.
fn eventually(within: Duration, done: impl Fn() -> bool) -> bool {
    let until = Instant::now() + within;
    while !done() {
        if Instant::now() > until {
            return false;
        }
        thread::sleep(Duration::from_millis(10));
    }
    true
}

const TTL: Duration = Duration::from_secs(10);

#[test]
fn each_call_runs_in_a_span_that_says_how_it_ended() {
    let _turn = capture();
    let cluster = Cluster::start(3);
    let redlock = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(Duration::from_millis(500))
        .build()
        .expect("valid configuration");

    let mut lock = redlock.lock("trace:a", TTL).expect("free");
    assert!(redlock
        .try_lock("trace:a", TTL)
        .expect("no error")
        .is_none());
    lock.extend(TTL).expect("extended");
    lock.unlock().expect("released");

    let span = the_span("lock", "trace:a");
    assert_eq!(span.target, "redlock_sync");
    assert_eq!(field(&span.fields, "operation"), Some("acquire"));
    assert_eq!(field(&span.fields, "outcome"), Some("succeeded"));
    assert!(a_quorum(&span.fields), "{span:#?}");
    assert_eq!(field(&span.fields, "error"), None);
    assert!(span.closed);
    // Its round's event, inside it.
    let inside = events_in(span.index);
    let round = inside
        .iter()
        .find(|e| field(&e.fields, "message") == Some("round ended"))
        .unwrap_or_else(|| panic!("no round event in the lock span: {inside:#?}"));
    assert_eq!(round.level, Level::DEBUG);
    assert_eq!(field(&round.fields, "operation"), Some("acquire"));
    assert_eq!(field(&round.fields, "resource"), Some("trace:a"));
    assert_eq!(field(&round.fields, "outcome"), Some("succeeded"));
    assert_eq!(
        field(&round.fields, "masters_agreed"),
        field(&span.fields, "masters_agreed"),
        "the span's count is its round's"
    );
    assert!(field(&round.fields, "elapsed_us").is_some());
    assert!(field(&round.fields, "validity_ms").is_some());

    let span = the_span("try_lock", "trace:a");
    assert_eq!(field(&span.fields, "outcome"), Some("contended"));
    assert_eq!(field(&span.fields, "masters_agreed"), Some("0"));
    assert!(field(&span.fields, "error").is_some_and(|e| e.contains("held")));

    let span = the_span("extend", "trace:a");
    assert_eq!(field(&span.fields, "operation"), Some("extend"));
    assert_eq!(field(&span.fields, "outcome"), Some("succeeded"));
    assert!(a_quorum(&span.fields), "{span:#?}");

    let span = the_span("unlock", "trace:a");
    assert_eq!(field(&span.fields, "operation"), Some("release"));
    assert_eq!(field(&span.fields, "outcome"), Some("succeeded"));
    assert!(a_quorum(&span.fields), "{span:#?}");

    // A dropped lock's release has a span of its own.
    drop(redlock.lock("trace:dropped", TTL).expect("free"));
    let span = the_span("drop", "trace:dropped");
    assert_eq!(field(&span.fields, "operation"), Some("release"));
    assert_eq!(field(&span.fields, "outcome"), Some("succeeded"));

    // A call on the masters: no resource, no round event.
    redlock.ping().expect("a quorum answers");
    let ping = spans()
        .into_iter()
        .rev()
        .find(|s| s.name == "ping")
        .expect("a ping span");
    assert_eq!(field(&ping.fields, "resource"), None);
    assert_eq!(field(&ping.fields, "outcome"), Some("succeeded"));
    assert_eq!(field(&ping.fields, "masters_agreed"), None);

    redlock.inspect("trace:a").expect("answered");
    let span = the_span("inspect", "trace:a");
    assert_eq!(field(&span.fields, "outcome"), Some("succeeded"));
}

#[test]
fn with_lock_holds_the_acquisition_the_work_and_the_release() {
    let _turn = capture();
    let cluster = Cluster::start(3);
    let redlock = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(Duration::from_millis(500))
        .build()
        .expect("valid configuration");
    let answer = redlock
        .with_lock("trace:with", TTL, Duration::from_secs(60), |_lease| {
            tracing::info!(step = 1, "the work");
            42
        })
        .expect("ran");
    assert_eq!(answer, 42);

    let outer = the_span("with_lock", "trace:with");
    assert_eq!(field(&outer.fields, "outcome"), Some("succeeded"));
    let lock = the_span("lock", "trace:with");
    assert_eq!(lock.parent, Some(outer.id), "{lock:#?} in {outer:#?}");
    let unlock = the_span("unlock", "trace:with");
    assert_eq!(unlock.parent, Some(outer.id));
    assert!(
        events_in(outer.index)
            .iter()
            .any(|e| field(&e.fields, "message") == Some("the work")),
        "the work's own event is in the with_lock span"
    );

    // Work whose lock was deleted behind it: the span says it was lost.
    let lost = redlock.with_lock("trace:with-lost", TTL, Duration::from_secs(60), |_lease| {
        for server in &cluster.servers {
            server.cmd(&["DEL", "trace:with-lost"]);
        }
        7
    });
    assert!(
        matches!(lost, Err(WithLockError::Lost { result: 7, .. })),
        "{lost:?}"
    );
    let outer = the_span("with_lock", "trace:with-lost");
    assert_eq!(field(&outer.fields, "outcome"), Some("lost"));
    assert!(field(&outer.fields, "error").is_some(), "{outer:#?}");
}

#[test]
fn try_with_lock_runs_in_a_span_that_says_contended_or_succeeded() {
    let _turn = capture();
    let cluster = Cluster::start(3);
    let redlock = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(Duration::from_millis(500))
        .build()
        .expect("valid configuration");

    let held = redlock.lock("trace:try-held", TTL).expect("free");
    let ran = redlock
        .try_with_lock("trace:try-held", TTL, Duration::from_secs(60), |_lease| 1)
        .expect("no error");
    assert_eq!(ran, None, "held by another: the work did not run");
    held.unlock().expect("released");
    let span = the_span("try_with_lock", "trace:try-held");
    assert_eq!(field(&span.fields, "operation"), Some("acquire"));
    assert_eq!(field(&span.fields, "outcome"), Some("contended"));
    assert!(span.closed);

    let ran = redlock
        .try_with_lock("trace:try-free", TTL, Duration::from_secs(60), |_lease| 2)
        .expect("no error");
    assert_eq!(ran, Some(2));
    let outer = the_span("try_with_lock", "trace:try-free");
    assert_eq!(field(&outer.fields, "outcome"), Some("succeeded"));
    assert!(a_quorum(&outer.fields), "{outer:#?}");
    let unlock = the_span("unlock", "trace:try-free");
    assert_eq!(unlock.parent, Some(outer.id), "{unlock:#?} in {outer:#?}");
    assert!(
        events_in(outer.index)
            .iter()
            .any(|e| field(&e.fields, "message") == Some("round ended")
                && field(&e.fields, "operation") == Some("acquire")),
        "the acquisition's round is in the try_with_lock span"
    );
}

/// One server given as two voters (the second through a proxy): the later
/// is refused, an error event that names it and the refusal.
#[test]
fn a_voter_refused_as_not_independent_is_an_error_event() {
    let _turn = capture();
    let shared = RedisServer::start();
    let proxy = Proxy::start(shared.addr(), |_| false);
    let other = RedisServer::start();
    let refused = proxy.url().trim_start_matches("redis://").to_string();
    let redlock = Redlock::builder()
        .nodes([shared.url(), proxy.url(), other.url()])
        .node_timeout(Duration::from_secs(2))
        .build()
        .expect("valid configuration");
    let lock = redlock
        .try_lock("trace:voters", TTL)
        .expect("no error")
        .expect("two independent voters");
    // Every voter's connection set up (the lock round returned at quorum).
    let _ = redlock.ping();
    lock.unlock().expect("released");
    let told = |e: &EventSeen| {
        field(&e.fields, "message") == Some("master refused as a voter")
            && field(&e.fields, "master") == Some(refused.as_str())
    };
    assert!(
        eventually(Duration::from_secs(5), || events().iter().any(told)),
        "{:#?}",
        events()
    );
    let event = events().into_iter().find(told).expect("seen");
    assert_eq!(event.level, Level::ERROR);
    assert_eq!(field(&event.fields, "change"), Some("not_a_voter"));
    assert!(
        field(&event.fields, "error").is_some_and(|e| e.contains("same server")),
        "{event:#?}"
    );
}

#[test]
fn failures_are_warned_and_a_failed_call_says_why() {
    let _turn = capture();
    let mut cluster = Cluster::start(3);
    let redlock = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(Duration::from_millis(300))
        .lock_wait(Duration::ZERO)
        .build()
        .expect("valid configuration");

    // A lease lost: its key deleted behind it (told on the renewal thread).
    let lease = redlock
        .lock("trace:lease", Duration::from_secs(1))
        .expect("free")
        .keep_alive(Duration::from_secs(60))
        .expect("renewed");
    for server in &cluster.servers {
        server.cmd(&["DEL", "trace:lease"]);
    }
    assert!(lease.wait_ended(Duration::from_secs(10)).is_some());
    let lost = |e: &EventSeen| {
        field(&e.fields, "message") == Some("lease lost")
            && field(&e.fields, "resource") == Some("trace:lease")
    };
    assert!(
        eventually(Duration::from_secs(5), || events().iter().any(lost)),
        "{:#?}",
        events()
    );
    let event = events().into_iter().find(lost).unwrap();
    assert_eq!(event.level, Level::WARN);
    assert_eq!(field(&event.fields, "reason"), Some("lost"));
    assert!(field(&event.fields, "error").is_some());
    drop(lease);

    // Two masters down: each warned once, and the lock fails for want of
    // a quorum.
    let ports = [cluster.servers[1].port(), cluster.servers[2].port()];
    cluster.servers[1].kill();
    cluster.servers[2].kill();
    let error = redlock.try_lock("trace:down", TTL).expect_err("no quorum");
    assert!(error.is_no_quorum(), "{error}");
    for port in ports {
        let master = format!("127.0.0.1:{port}");
        let down: Vec<EventSeen> = events()
            .into_iter()
            .filter(|e| {
                field(&e.fields, "master") == Some(master.as_str())
                    && field(&e.fields, "change") == Some("down")
            })
            .collect();
        assert_eq!(down.len(), 1, "{master}: {:#?}", events());
        assert_eq!(down[0].level, Level::WARN);
        assert!(field(&down[0].fields, "error").is_some());
    }
    let span = the_span("try_lock", "trace:down");
    assert_eq!(field(&span.fields, "outcome"), Some("no_quorum"));
    // The live master's answer, if the round still awaited it once two
    // had failed.
    assert!(
        matches!(field(&span.fields, "masters_agreed"), Some("0" | "1")),
        "{span:#?}"
    );
    let why = field(&span.fields, "error").expect("the error");
    assert!(why.contains("127.0.0.1"), "{why}");
}

const PASSWORD: &str = "s3cret-pw-7d1e";

#[test]
fn no_field_shows_a_lock_value_or_a_password() {
    let _turn = capture();
    let servers: Vec<RedisServer> = (0..3)
        .map(|_| RedisServer::start_with(&["--requirepass", PASSWORD]).with_admin_auth(&[PASSWORD]))
        .collect();
    let urls: Vec<String> = servers
        .iter()
        .map(|s| format!("redis://:{PASSWORD}@127.0.0.1:{}", s.port()))
        .collect();
    let redlock = Redlock::builder()
        .nodes(urls)
        .node_timeout(Duration::from_millis(500))
        .build()
        .expect("valid configuration");
    let lock = redlock.lock("trace:secret", TTL).expect("free");
    let value = servers[0].get(b"trace:secret").expect("the key");
    let value = String::from_utf8_lossy(&value).into_owned();
    lock.unlock().expect("released");
    assert!(!spans_on("unlock", "trace:secret").is_empty());
    let mut seen = 0;
    for fields in spans()
        .iter()
        .map(|s| &s.fields)
        .chain(events().iter().map(|e| &e.fields))
    {
        for text in fields.values() {
            seen += 1;
            assert!(!text.contains(PASSWORD), "{text}");
            assert!(!text.contains(&value), "{text}");
        }
    }
    assert!(seen > 0);
}

/// Issue 36: a set's calls name the whole set, in their span (an
/// acquisition's and an inspection's recorded once the names are read;
/// a release's at its start) and in their rounds' events, as `{a, b}`;
/// and a set's waiter names it in its `waiting` events.
#[test]
fn a_sets_spans_and_events_name_the_whole_set() {
    let _turn = capture();
    let cluster = Cluster::start(3);
    let redlock = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(Duration::from_millis(500))
        .build()
        .expect("valid configuration");
    let set = redlock
        .try_lock_many(["tset:b", "tset:a"], TTL)
        .expect("no error")
        .expect("free");
    // Held: a contended wait gives up, having waited.
    assert!(redlock
        .try_lock_many_for(["tset:a", "tset:b"], TTL, Duration::from_millis(300))
        .expect("no error")
        .is_none());
    redlock
        .inspect_many(["tset:a", "tset:b"])
        .expect("a quorum answered");
    set.unlock().expect("released");

    let name = "{tset:a, tset:b}";
    let span = the_span("try_lock_many", name);
    assert_eq!(field(&span.fields, "outcome"), Some("succeeded"));
    let round = events_in(span.index)
        .into_iter()
        .find(|e| field(&e.fields, "message") == Some("round ended"))
        .unwrap_or_else(|| panic!("no round event in the span: {span:#?}"));
    assert_eq!(field(&round.fields, "resource"), Some(name));
    let waited = the_span("lock_many", name);
    assert_eq!(field(&waited.fields, "outcome"), Some("contended"));
    let waiting: Vec<EventSeen> = events_in(waited.index)
        .into_iter()
        .filter(|e| field(&e.fields, "message") == Some("waiting"))
        .collect();
    assert!(!waiting.is_empty(), "{waited:#?}");
    for event in &waiting {
        assert_eq!(field(&event.fields, "resource"), Some(name), "{event:#?}");
    }
    the_span("inspect", name);
    let release = the_span("unlock", name);
    let released = events_in(release.index)
        .into_iter()
        .find(|e| field(&e.fields, "message") == Some("round ended"))
        .unwrap_or_else(|| panic!("no round event in the unlock span: {release:#?}"));
    assert_eq!(field(&released.fields, "resource"), Some(name));
}
