//! A persistent thread pool for splitting one kernel call into tasks (`std` only; no_std
//! targets run everything on the caller's thread).
//!
//! `threads - 1` workers sleep on a condition variable; [`parallel_for`] publishes a job (a
//! borrowed closure and a task count), every thread — the caller included — takes task indices
//! from one atomic counter, and the caller returns only after every worker has left the job,
//! which is what makes lending the closure to other threads sound. The thread count is
//! `BURNC_THREADS` (default 1), or [`set_threads`] before the first parallel call.
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};

type Task<'a> = &'a (dyn Fn(usize) + Sync);

struct Job {
    /// The closure, its lifetime erased: valid until the publishing call returns (see above).
    f: Task<'static>,
    tasks: usize,
    next: AtomicUsize,
}

struct State {
    job: Option<&'static Job>,
    generation: u64,
    /// Workers asleep on `wake` (the caller skips the wake-up call when none is).
    sleeping: usize,
}

struct Pool {
    threads: usize,
    /// `State::generation`, readable without the lock: what spinning workers watch.
    published: AtomicU64,
    state: Mutex<State>,
    wake: Condvar,
    /// Workers inside the current job: raised under the `state` lock while the job is
    /// published, lowered (without the lock) when a worker leaves it.
    busy: AtomicUsize,
}

static POOL: OnceLock<Pool> = OnceLock::new();
static REQUESTED: AtomicUsize = AtomicUsize::new(0);

/// Use `n` threads (the caller's included). Takes effect only before the pool first runs.
pub fn set_threads(n: usize) {
    REQUESTED.store(n.max(1), Ordering::Relaxed);
}

/// Threads parallel calls use.
pub fn threads() -> usize {
    pool().threads
}

fn pool() -> &'static Pool {
    POOL.get_or_init(|| {
        let mut n = REQUESTED.load(Ordering::Relaxed);
        if n == 0 {
            n = std::env::var("BURNC_THREADS").ok().and_then(|v| v.trim().parse().ok()).unwrap_or(1);
        }
        let n = n.clamp(1, 256);
        let p = Pool { threads: n, published: AtomicU64::new(0), state: Mutex::new(State { job: None, generation: 0, sleeping: 0 }), wake: Condvar::new(), busy: AtomicUsize::new(0) };
        #[cfg(target_os = "linux")]
        // SAFETY: a plain query of the calling thread's CPU.
        let here = unsafe { libc::sched_getcpu() };
        for i in 1..n {
            std::thread::spawn(move || {
                #[cfg(target_os = "linux")]
                leave_cpu(here, i - 1);
                #[cfg(not(target_os = "linux"))]
                let _ = i;
                worker()
            });
        }
        p
    })
}

/// Move the calling worker (the `nth`) off CPU `cpu`, where the pool's creator runs, onto
/// the nth other CPU it may use, then give it back its whole mask (no pinning: the scheduler
/// stays free to move it later). A new thread starts on its creator's CPU, and the load
/// balancer took longer than a short process lives to separate them: a 2-thread harness run
/// of 10 inferences in a fresh process (how `scripts/bench.py` measures) ran MobileNetV3 in
/// 1.08–1.13 ms, the same binary over 500 inferences in 0.66–0.70.
#[cfg(target_os = "linux")]
fn leave_cpu(cpu: libc::c_int, nth: usize) {
    let size = core::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: plain system calls on the calling thread's own affinity mask, with masks that
    // live on this stack.
    unsafe {
        let mut mask: libc::cpu_set_t = core::mem::zeroed();
        if cpu < 0 || libc::sched_getaffinity(0, size, &mut mask) != 0 {
            return;
        }
        let others: std::vec::Vec<usize> = (0..libc::CPU_SETSIZE as usize).filter(|&c| c != cpu as usize && libc::CPU_ISSET(c, &mask)).collect();
        let Some(&target) = others.get(nth % others.len().max(1)) else { return };
        let mut one: libc::cpu_set_t = core::mem::zeroed();
        libc::CPU_SET(target, &mut one);
        if libc::sched_setaffinity(0, size, &one) == 0 {
            libc::sched_setaffinity(0, size, &mask);
        }
    }
}

fn run_tasks(job: &Job) {
    loop {
        let i = job.next.fetch_add(1, Ordering::Relaxed);
        if i >= job.tasks {
            break;
        }
        (job.f)(i);
    }
}

/// How long a worker polls for the next job before it sleeps: a model's parallel calls come
/// tens to hundreds of microseconds apart, and a sleeping worker takes about 10 µs (a futex
/// wake-up, more on a busy VM) to join, longer than many of the ops are worth splitting for.
const SPIN_US: u64 = 300;

/// The polling time: `BURNC_SPIN_US` (microseconds; 0 sleeps at once, for machines shared with
/// other work) or [`SPIN_US`].
fn spin() -> std::time::Duration {
    static SPIN: OnceLock<std::time::Duration> = OnceLock::new();
    *SPIN.get_or_init(|| {
        let us = std::env::var("BURNC_SPIN_US").ok().and_then(|v| v.trim().parse().ok()).unwrap_or(SPIN_US);
        std::time::Duration::from_micros(us)
    })
}

fn worker() {
    // A worker only ever runs tasks: a parallel call from inside one runs serially here (it
    // would otherwise wait for the gate its own caller holds, forever).
    IN_TASK.with(|c| c.set(true));
    let p = pool();
    let mut seen = 0u64;
    loop {
        // Poll for a new job first (no lock, no system call) …
        let spin = spin();
        let t0 = std::time::Instant::now();
        'spin: while p.published.load(Ordering::Acquire) == seen {
            for _ in 0..64 {
                std::hint::spin_loop();
                if p.published.load(Ordering::Acquire) != seen {
                    break 'spin;
                }
            }
            if t0.elapsed() > spin {
                break;
            }
            // Let another process's thread have this core meanwhile, if one is waiting for
            // it (on a shared machine, plain spinning slowed ShuffleNet 6.2 → 9.6 ms).
            std::thread::yield_now();
        }
        let job = {
            let mut st = p.state.lock().unwrap_or_else(|e| e.into_inner());
            if st.generation == seen {
                // … then sleep until one is published.
                st.sleeping += 1;
                while st.generation == seen {
                    st = p.wake.wait(st).unwrap_or_else(|e| e.into_inner());
                }
                st.sleeping -= 1;
            }
            seen = st.generation;
            // Joining under the lock: the caller clears the job under it before waiting for
            // `busy` to reach zero, so a worker never joins a finished job.
            if st.job.is_some() {
                p.busy.fetch_add(1, Ordering::AcqRel);
            }
            st.job
        };
        if let Some(job) = job {
            run_tasks(job);
            p.busy.fetch_sub(1, Ordering::Release);
        }
    }
}

/// Run `f(0) … f(tasks − 1)`, spread over the pool's threads; returns when all have run.
/// Calls from inside a task (nested) run serially on that thread.
pub fn parallel_for(tasks: usize, f: &(dyn Fn(usize) + Sync)) {
    let p = pool();
    if tasks <= 1 || p.threads == 1 || IN_TASK.with(|c| c.get()) {
        (0..tasks).for_each(f);
        return;
    }
    // One job at a time: a second caller thread waits here.
    static GATE: Mutex<()> = Mutex::new(());
    let _gate = GATE.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: the job (and the closure it borrows) is unpublished and every worker has left it
    // (busy == 0) before this function returns, so no worker touches it after its lifetime.
    let f_static: Task<'static> = unsafe { std::mem::transmute::<Task<'_>, Task<'static>>(f) };
    let job = Job { f: f_static, tasks, next: AtomicUsize::new(0) };
    let job_ref: &'static Job = unsafe { &*(&job as *const Job) };
    {
        let mut st = p.state.lock().unwrap_or_else(|e| e.into_inner());
        st.job = Some(job_ref);
        st.generation += 1;
        p.published.store(st.generation, Ordering::Release);
        if st.sleeping > 0 {
            p.wake.notify_all();
        }
    }
    IN_TASK.with(|c| c.set(true));
    run_tasks(&job);
    IN_TASK.with(|c| c.set(false));
    let mut st = p.state.lock().unwrap_or_else(|e| e.into_inner());
    st.job = None;
    drop(st);
    // Wait for the workers still in the job: they are finishing their last task, so poll
    // (a condition variable's wake-up would add its latency to every call), yielding when
    // it takes long (another process holds the core).
    let t0 = std::time::Instant::now();
    while p.busy.load(Ordering::Acquire) > 0 {
        std::hint::spin_loop();
        if t0.elapsed() > spin() {
            std::thread::yield_now();
        }
    }
}

std::thread_local! {
    static IN_TASK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    #[test]
    fn every_task_runs_once() {
        set_threads(2);
        for round in 0..200 {
            let hits: Vec<AtomicUsize> = (0..37).map(|_| AtomicUsize::new(0)).collect();
            parallel_for(37, &|i| {
                hits[i].fetch_add(1, Ordering::Relaxed);
            });
            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1), "round {round}");
        }
    }
}
