//! One client kind as a scenario's workers drive it side by side: a
//! client per thread, one client shared by every thread, or (rslock) one
//! lock manager shared by tasks on a multi-thread tokio runtime. Each
//! worker makes pairs back to back on names of its own for one time window.

use crate::clients::{Client, Pair, SharedClient};
use crate::measure::Window;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

/// The workers of one client kind in a scenario.
pub enum Workers {
    /// Each worker its own client on its own thread (one alone runs on the
    /// caller's thread).
    PerThread(Vec<Box<dyn Client>>),
    /// One client, shared by `threads` threads.
    Shared {
        client: Box<dyn SharedClient>,
        threads: usize,
    },
    /// rslock: one `LockManager`, shared by `tasks` tasks.
    Tasks { rslock: RslockTasks, tasks: usize },
}

impl Workers {
    /// How many workers run side by side.
    pub fn count(&self) -> usize {
        match self {
            Workers::PerThread(clients) => clients.len(),
            Workers::Shared { threads, .. } => *threads,
            Workers::Tasks { tasks, .. } => *tasks,
        }
    }

    /// Runs every worker for `window`, worker `i` on `names[i]`; their
    /// windows merged. Workers that share a client start together (a
    /// barrier), so that each window covers all of them at work.
    pub fn run(&mut self, names: &[Arc<Vec<String>>], ttl: Duration, window: Duration) -> Window {
        match self {
            Workers::PerThread(clients) => match clients.as_mut_slice() {
                [client] => Window::run(client.as_mut(), &names[0], ttl, window),
                clients => Window::merge(thread::scope(|scope| {
                    let handles: Vec<_> = clients
                        .iter_mut()
                        .zip(names)
                        .map(|(client, names)| {
                            scope.spawn(|| Window::run(client.as_mut(), names, ttl, window))
                        })
                        .collect();
                    join_all(handles)
                })),
            },
            Workers::Shared { client, threads } => {
                let client: &dyn SharedClient = client.as_ref();
                let threads = *threads;
                let start = Barrier::new(threads);
                Window::merge(thread::scope(|scope| {
                    let handles: Vec<_> = names[..threads]
                        .iter()
                        .map(|names| {
                            let start = &start;
                            scope.spawn(move || {
                                start.wait();
                                let pair = |name: &str, ttl| client.pair(name, ttl);
                                Window::run_shared(pair, names, ttl, window, threads)
                            })
                        })
                        .collect();
                    join_all(handles)
                }))
            }
            Workers::Tasks { rslock, tasks } => rslock.run(&names[..*tasks], ttl, window),
        }
    }

    /// Whether a client is stuck (see `Client::hangs`).
    pub fn hangs(&self) -> bool {
        match self {
            Workers::PerThread(clients) => clients.iter().any(|client| client.hangs()),
            _ => false,
        }
    }
}

fn join_all(handles: Vec<thread::ScopedJoinHandle<'_, Window>>) -> Vec<Window> {
    handles
        .into_iter()
        .map(|handle| handle.join().expect("a client thread panicked"))
        .collect()
}

/// rslock 0.10.0 as an async program shares it: one `LockManager` (one
/// multiplexed connection per master, which pipelines the commands of
/// every task) used by many tasks of a multi-thread tokio runtime with a
/// worker per CPU. One attempt per pair; no timeout setting of its own
/// (redis-rs's default: 500 ms per response).
pub struct RslockTasks {
    runtime: tokio::runtime::Runtime,
    manager: rslock::LockManager,
}

impl RslockTasks {
    pub fn connect(urls: Vec<String>) -> Result<RslockTasks, String> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("tokio runtime: {e}"))?;
        let mut manager = rslock::LockManager::new(urls);
        // One attempt (the delay must not be zero: it bounds a random sample).
        manager.set_retry(1, Duration::from_millis(1));
        Ok(RslockTasks { runtime, manager })
    }

    /// One task per entry of `names`, all started together, for `window`.
    fn run(&mut self, names: &[Arc<Vec<String>>], ttl: Duration, window: Duration) -> Window {
        let tasks = names.len();
        let start = Arc::new(tokio::sync::Barrier::new(tasks));
        let manager = &self.manager;
        let windows = self.runtime.block_on(async {
            let handles: Vec<_> = names
                .iter()
                .map(|names| {
                    let manager = manager.clone();
                    let names = Arc::clone(names);
                    let start = Arc::clone(&start);
                    tokio::spawn(async move {
                        start.wait().await;
                        let mut window_of_task = Window::with_capacity(4096);
                        let started = Instant::now();
                        for name in names.iter().cycle() {
                            window_of_task.record(pair(&manager, name, ttl).await);
                            if started.elapsed() >= window {
                                break;
                            }
                        }
                        window_of_task.finish(started);
                        window_of_task
                    })
                })
                .collect();
            let mut windows = Vec::with_capacity(handles.len());
            for handle in handles {
                windows.push(handle.await.expect("an rslock task panicked"));
            }
            windows
        });
        Window::merge(windows)
    }
}

/// One rslock pair: `lock`, then the release (which reports nothing).
async fn pair(manager: &rslock::LockManager, resource: &str, ttl: Duration) -> Pair {
    let started = Instant::now();
    let Ok(lock) = manager.lock(resource, ttl).await else {
        return Pair::acquire_failed(started);
    };
    let acquired = Instant::now();
    manager.unlock(&lock).await;
    Pair::released(started, acquired, true)
}
