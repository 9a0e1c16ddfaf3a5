//! A busy machine for tests that must hold on one: a CPU hog, a busy loop pinned to each of
//! this process's CPUs but the first, and a ticker, a thread that wakes every few
//! microseconds on one CPU, each until it is dropped. A test run beside another process that
//! kept the other core busy is what showed a CPU-bound command's longer run as "more calls":
//! its runs take more timer interrupts and preemptions, and wait longer in them.
//!
//! Their threads are the test process's own, never the traced command's, so the tracer does
//! not follow them; each is stopped and joined on drop, a panicking test's included.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

pub struct CpuHog {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    /// The CPUs busy.
    pub cpus: Vec<usize>,
}

impl CpuHog {
    /// A busy loop on every allowed CPU but the first (none on a single-CPU machine: the
    /// test then runs as it would without it, which the caller can see in `cpus`).
    pub fn on_other_cores() -> CpuHog {
        let cpus: Vec<usize> = super::allowed_cpus().into_iter().skip(1).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let threads = cpus
            .iter()
            .map(|&cpu| {
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    pin_to(cpu);
                    let mut x = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        // Work the optimiser cannot drop, with a load of the flag per round.
                        for _ in 0..10_000 {
                            x = std::hint::black_box(
                                x.wrapping_mul(6364136223846793005).wrapping_add(1),
                            );
                        }
                    }
                })
            })
            .collect();
        CpuHog {
            stop,
            threads,
            cpus,
        }
    }
}

/// Pin the calling thread to `cpu`.
fn pin_to(cpu: usize) {
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    unsafe { libc::CPU_SET(cpu, &mut set) };
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    assert_eq!(rc, 0, "pinning the hog to CPU {cpu}");
}

impl Drop for CpuHog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// A neighbour that wakes every `TICK` on one CPU: each wake-up is a timer interrupt there
/// and, while another task runs there, a preemption of it. A command pinned to that CPU takes
/// tens of thousands of both per second of its run, each a few microseconds of its kernel
/// time: a kernel time per run that grows with the run's length by an amount the samples see.
pub struct Ticker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// How often the ticker wakes.
pub const TICK: std::time::Duration = std::time::Duration::from_micros(10);

impl Ticker {
    pub fn on_cpu(cpu: usize) -> Ticker {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            pin_to(cpu);
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(TICK);
            }
        });
        Ticker {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
