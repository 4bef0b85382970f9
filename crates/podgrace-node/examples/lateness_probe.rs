//! The workload of `bench_lateness` (`bench/stop.sh`): a probe that runs as a container's PID 1
//! (or under an init), says when it runs, stamps every SIGTERM on arrival, and never exits on
//! its own, so that only SIGKILL ends it.
//!
//! ```text
//! lateness_probe SOCKET ID
//! ```
//!
//! It connects to the unix stream socket `SOCKET` (the harness's), writes `S ID PID NS` once
//! running (PID as its PID namespace numbers it) and `T ID NS` on each SIGTERM, where `NS` is `CLOCK_MONOTONIC` in nanoseconds, read
//! as soon as `sigwaitinfo` returns. The connection stays open for the life of the process: the
//! harness sees the process die when its end of the socket reads end-of-file (the kernel closes
//! a dying process's files before anything else can notice its exit).
//!
//! SIGTERM is blocked and taken with `sigwaitinfo`: no handler, no runtime, no thread. A blocked
//! signal is never ignored, so this also holds as PID 1 of a PID namespace (where a signal
//! with the default action is dropped).
#![allow(unsafe_code)] // the signal mask, sigwaitinfo and clock_gettime (libc)

use std::io::Write;
use std::os::unix::net::UnixStream;

/// `CLOCK_MONOTONIC`, nanoseconds.
fn now_ns() -> i128 {
    // SAFETY: clock_gettime writes the timespec it is given.
    let mut t: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    i128::from(t.tv_sec) * 1_000_000_000 + i128::from(t.tv_nsec)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [socket, id] = args.as_slice() else {
        eprintln!("usage: lateness_probe SOCKET ID");
        std::process::exit(2);
    };
    // SIGTERM blocked before anything else, so one that comes early waits to be taken.
    // SAFETY: plain libc calls on a local signal set.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
    let mut conn = match UnixStream::connect(socket) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("lateness_probe: connecting to {socket}: {e}");
            std::process::exit(1);
        }
    };
    let _ = writeln!(conn, "S {id} {} {}", std::process::id(), now_ns());
    loop {
        // SAFETY: `set` is a valid signal set; no siginfo is asked for.
        let sig = unsafe { libc::sigwaitinfo(&set, std::ptr::null_mut()) };
        if sig == libc::SIGTERM {
            let at = now_ns();
            let _ = writeln!(conn, "T {id} {at}");
        }
    }
}
