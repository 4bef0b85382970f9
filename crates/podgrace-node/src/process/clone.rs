//! Starting a child without copying podgrace's address space: `clone(2)` with `CLONE_VM |
//! CLONE_VFORK`, as glibc's `posix_spawn` does, the child running on a stack of its own in
//! podgrace's memory until it execs. A `fork` (what `std::process::Command` does once a
//! `pre_exec` step is given) copies the page tables of the whole process and its exec then
//! tears that copy down again: measured with `perf` while 100 pods started, `copy_page_range`
//! and `unmap_page_range` were most of the spawner threads' time, and they grow with podgrace's
//! size (every pod makes it bigger), so each start cost more than the one before. With
//! `CLONE_VM` a start costs the same at 1 pod and at 1,000.
//!
//! The child only makes system calls on memory the parent prepared (no allocation, no lock):
//! standard streams, working directory, `PR_SET_PDEATHSIG`, the container's cgroup and
//! `oom_score_adj`, its session, the mount and network namespace steps of its placement, then
//! `execve` over the `PATH` candidates as `execvp` tries them. An error is left in
//! [`ChildArgs::error`] for the parent, which the child's exit wakes (`CLONE_VFORK`). Every
//! signal is blocked around the `clone`, and the child sets each caught signal back to its
//! default before it unblocks them, so no handler of podgrace ever runs on the child's stack.
//! A container's PID and mount namespaces come with the `clone` itself (`CLONE_NEWPID |
//! CLONE_NEWNS`), and its pidfd too (`CLONE_PIDFD`).
//!
//! Upstream's equivalents: glibc `sysdeps/unix/sysv/linux/spawni.c` (`__spawni_child`), runc's
//! `nsexec`.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicI32, Ordering};

use rustix::event::{poll, PollFd, PollFlags};
use rustix::mount::{
    mount, mount_change, unmount, MountFlags, MountPropagationFlags, UnmountFlags,
};
use rustix::process::{set_parent_process_death_signal, Pid, Signal};
use rustix::thread::{move_into_link_name_space, LinkNameSpaceType};

use super::spawner::ChildSetup;

/// The child's stack: the steps below need a few KiB; a debug build more.
const STACK_BYTES: usize = 256 * 1024;

/// What the child does between the `clone` and the `execve`, by placement.
pub(crate) enum ChildSteps<'a> {
    /// A container's entry process. `namespaced`: PID 1 of the new PID namespace with a new
    /// mount namespace (both from the `clone`), `/` made private, its own `/proc`, and
    /// `/run/netns` unmounted (the named network namespaces of other pods: a copy of their
    /// mounts in this container's namespace would keep those namespaces, and their veth
    /// pairs, alive as long as this container lives). Otherwise a host process.
    Container {
        namespaced: bool,
        netns: Option<BorrowedFd<'a>>,
    },
    /// A process inside a running container (its PID namespace entered by the spawner thread
    /// before the `clone`).
    Exec {
        mntns: Option<BorrowedFd<'a>>,
        netns: Option<BorrowedFd<'a>>,
        /// The container's process group to join (fallback mode).
        pgid: Option<i32>,
    },
}

/// Everything the child reads, prepared by the parent.
struct ChildArgs<'a> {
    /// The program's paths to try, in order (`PATH` lookup done by the parent).
    candidates: &'a [CString],
    argv: &'a [*const c_char],
    envp: &'a [*const c_char],
    /// `["/bin/sh", <candidate>, argv[1..]..., NULL]` for a file without an interpreter line
    /// (`ENOEXEC`), as `execvp` runs it; slot 1 is filled in by the child.
    sh_argv: *mut *const c_char,
    cwd: Option<&'a CStr>,
    stdin: BorrowedFd<'a>,
    stdout: BorrowedFd<'a>,
    stderr: BorrowedFd<'a>,
    /// podgrace itself: a child that finds it gone before exec does not start.
    self_pidfd: BorrowedFd<'a>,
    setup: Option<&'a ChildSetup>,
    steps: ChildSteps<'a>,
    /// The errno of the step that failed (0: none; the child exec'd).
    error: AtomicI32,
}

/// A child that exec'd: its pid, its pidfd, and the read ends of its stdout and stderr.
pub(crate) struct Started {
    pub pid: i32,
    pub pidfd: OwnedFd,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
}

thread_local! {
    /// Each spawner thread's child stack, reused: the child is done with it once it has exec'd
    /// or exited, which is when `clone` returns to the parent.
    static STACK: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The program's candidate paths, as `execvp` tries them: the name itself when it holds a
/// `/`, otherwise each directory of `path` (an empty entry is the working directory).
fn candidates(program: &str, path: &str) -> io::Result<Vec<CString>> {
    let nul = |e: std::ffi::NulError| io::Error::new(io::ErrorKind::InvalidInput, e);
    if program.contains('/') {
        return Ok(vec![CString::new(program).map_err(nul)?]);
    }
    path.split(':')
        .map(|dir| {
            let dir = if dir.is_empty() { "." } else { dir };
            CString::new(format!("{}/{program}", dir.trim_end_matches('/'))).map_err(nul)
        })
        .collect()
}

/// Starts `argv` with `env` (`PATH` from it: the caller sets one) and the standard streams
/// `stdin` and two new pipes, after `steps`, and returns once it has exec'd.
///
/// # Errors
/// The errno of the step that failed, in the child (the child has been reaped then) or of the
/// `clone` itself; `InvalidInput` for a NUL byte in an argument.
pub(crate) fn spawn(
    argv: &[String],
    env: &[(String, String)],
    cwd: Option<&std::path::Path>,
    stdin: BorrowedFd<'_>,
    self_pidfd: BorrowedFd<'_>,
    setup: Option<&ChildSetup>,
    steps: ChildSteps<'_>,
) -> io::Result<Started> {
    let nul = |e: std::ffi::NulError| io::Error::new(io::ErrorKind::InvalidInput, e);
    let program = argv
        .first()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "empty command"))?;
    // One value per name, the last given, in name order, as `std::process::Command` passes
    // its environment; `PATH` defaults to containerd's.
    let mut vars: std::collections::BTreeMap<&str, &str> =
        env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let path = *vars.entry("PATH").or_insert(super::spawner::DEFAULT_PATH);
    let candidates = candidates(program, path)?;
    let args: Vec<CString> = argv
        .iter()
        .map(|a| CString::new(a.as_str()).map_err(nul))
        .collect::<io::Result<_>>()?;
    let mut argv_ptrs: Vec<*const c_char> = args.iter().map(|a| a.as_ptr()).collect();
    argv_ptrs.push(std::ptr::null());
    let vars: Vec<CString> = vars
        .iter()
        .map(|(k, v)| CString::new(format!("{k}={v}")).map_err(nul))
        .collect::<io::Result<_>>()?;
    let mut envp: Vec<*const c_char> = vars.iter().map(|v| v.as_ptr()).collect();
    envp.push(std::ptr::null());
    let mut sh_argv: Vec<*const c_char> = vec![c"/bin/sh".as_ptr(), std::ptr::null()];
    sh_argv.extend(args.iter().skip(1).map(|a| a.as_ptr()));
    sh_argv.push(std::ptr::null());
    let cwd = cwd
        .map(|d| CString::new(d.as_os_str().as_encoded_bytes()).map_err(nul))
        .transpose()?;
    let (out_r, out_w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    let (err_r, err_w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    let namespaced = matches!(
        steps,
        ChildSteps::Container {
            namespaced: true,
            ..
        }
    );
    let args = ChildArgs {
        candidates: &candidates,
        argv: &argv_ptrs,
        envp: &envp,
        sh_argv: sh_argv.as_mut_ptr(),
        cwd: cwd.as_deref(),
        stdin,
        stdout: out_w.as_fd(),
        stderr: err_w.as_fd(),
        self_pidfd,
        setup,
        steps,
        error: AtomicI32::new(0),
    };
    let mut flags = libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD | libc::SIGCHLD;
    if namespaced {
        flags |= libc::CLONE_NEWPID | libc::CLONE_NEWNS;
    }
    let mut pidfd: c_int = -1;
    let pid = STACK.with(|stack| {
        let mut stack = stack.borrow_mut();
        if stack.len() < STACK_BYTES {
            stack.resize(STACK_BYTES, 0);
        }
        // The stack grows down from its end, 16-byte aligned as the ABI wants it.
        let top = (stack.as_mut_ptr() as usize + stack.len()) & !15;
        // SAFETY: sigfillset/pthread_sigmask only write the sets given; every signal is blocked
        // on this thread while the child shares its memory, and restored right after.
        let (mut all, mut old) = unsafe {
            (
                std::mem::zeroed::<libc::sigset_t>(),
                std::mem::zeroed::<libc::sigset_t>(),
            )
        };
        unsafe {
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        }
        // SAFETY: `child` only reads `args` and the buffers it points to, which live until
        // `clone` returns; with CLONE_VFORK this thread is suspended until the child has
        // exec'd or exited, so nothing here changes meanwhile, and the child never returns
        // into this frame (it runs on `stack`, which nothing else uses).
        let pid = unsafe {
            libc::clone(
                child,
                top as *mut c_void,
                flags,
                (&args as *const ChildArgs<'_>).cast_mut().cast::<c_void>(),
                &mut pidfd as *mut c_int,
            )
        };
        let clone_error = io::Error::last_os_error();
        // SAFETY: as above.
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        }
        if pid < 0 {
            Err(clone_error)
        } else {
            Ok(pid)
        }
    })?;
    // SAFETY: CLONE_PIDFD stored a new descriptor that nothing else owns.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    let failed = args.error.load(Ordering::SeqCst);
    // The child has its own copies of the write ends (or is gone): the reads see EOF once it
    // closes them.
    drop((out_w, err_w));
    if failed != 0 {
        // The child exited with the error: collect it here (the caller holds the reaper's
        // spawn gate, so no sweep takes it first).
        let _ = rustix::process::waitid(
            rustix::process::WaitId::PidFd(pidfd.as_fd()),
            rustix::process::WaitIdOptions::EXITED,
        );
        return Err(io::Error::from_raw_os_error(failed));
    }
    Ok(Started {
        pid,
        pidfd,
        stdout: out_r,
        stderr: err_r,
    })
}

/// The child: runs the steps, execs; on a failure leaves the errno and exits 127.
extern "C" fn child(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the parent's `ChildArgs`, alive and unchanged until this child exits or
    // execs (CLONE_VFORK suspends the parent's thread until then).
    let a = unsafe { &*(arg as *const ChildArgs<'_>) };
    let errno = match steps(a) {
        Ok(()) => exec(a),
        Err(e) => e,
    };
    a.error.store(errno.raw_os_error().max(1), Ordering::SeqCst);
    127
}

/// Everything before the exec.
fn steps(a: &ChildArgs<'_>) -> Result<(), rustix::io::Errno> {
    default_signal_handlers();
    dup_onto(a.stdin, 0)?;
    dup_onto(a.stdout, 1)?;
    dup_onto(a.stderr, 2)?;
    if let Some(dir) = a.cwd {
        rustix::process::chdir(dir)?;
    }
    // Die with podgrace, and do not start if podgrace already died (between the clone and
    // the prctl the death signal could not fire).
    set_parent_process_death_signal(Some(Signal::KILL))?;
    let mut fds = [PollFd::from_borrowed_fd(a.self_pidfd, PollFlags::IN)];
    let zero = rustix::event::Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    if poll(&mut fds, Some(&zero))? > 0 {
        return Err(rustix::io::Errno::SRCH);
    }
    if let Some(s) = a.setup {
        for fd in &s.cgroup_procs {
            rustix::io::write(fd, b"0")?;
        }
        if let Some(v) = &s.oom_score_adj {
            let fd = rustix::fs::open(
                c"/proc/self/oom_score_adj",
                rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::CLOEXEC,
                rustix::fs::Mode::empty(),
            )?;
            rustix::io::write(&fd, v)?;
        }
    }
    match &a.steps {
        ChildSteps::Container { namespaced, netns } => {
            // Its own session, as under a container runtime: a Ctrl-C at podgrace's terminal
            // (SIGINT to the foreground process group) must reach podgrace only.
            rustix::process::setsid()?;
            if *namespaced {
                mount_change(
                    c"/",
                    MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
                )?;
                mount(
                    c"proc",
                    c"/proc",
                    c"proc",
                    MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
                    None::<&CStr>,
                )?;
                // Absent (no pod network was ever made) or not a mount point: nothing to do.
                let _ = unmount(c"/run/netns", UnmountFlags::DETACH);
            }
            if let Some(fd) = netns {
                move_into_link_name_space(*fd, Some(LinkNameSpaceType::Network))?;
            }
        }
        ChildSteps::Exec { mntns, netns, pgid } => {
            if let Some(fd) = mntns {
                move_into_link_name_space(*fd, Some(LinkNameSpaceType::Mount))?;
                // Joining a mount namespace resets the working directory to its root.
                rustix::process::chdir(a.cwd.unwrap_or(c"/"))?;
            }
            if let Some(fd) = netns {
                move_into_link_name_space(*fd, Some(LinkNameSpaceType::Network))?;
            }
            // The container's process group (fallback mode), when the kernel lets it be
            // joined; otherwise out of podgrace's session, as the container is. (A group can be
            // joined only within its session, and the container leads a session of its own.)
            let joined = pgid
                .and_then(Pid::from_raw)
                .is_some_and(|g| rustix::process::setpgid(None, Some(g)).is_ok());
            if !joined {
                let _ = rustix::process::setsid();
            }
        }
    }
    // The program starts with no signal blocked, as `std::process::Command` starts it.
    // SAFETY: an empty set, written by sigemptyset, given to pthread_sigmask.
    unsafe {
        let mut none = std::mem::zeroed::<libc::sigset_t>();
        libc::sigemptyset(&mut none);
        libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
    }
    Ok(())
}

/// `execvp`'s search: each candidate in turn; a file the kernel cannot run as a program
/// (`ENOEXEC`) is run by `/bin/sh`; `EACCES` wins over a later "not found".
fn exec(a: &ChildArgs<'_>) -> rustix::io::Errno {
    let mut denied = false;
    let mut last = rustix::io::Errno::NOENT;
    for c in a.candidates {
        // SAFETY: NUL-terminated strings and NULL-terminated arrays of them, prepared by the
        // parent; execve only reads them.
        unsafe { libc::execve(c.as_ptr(), a.argv.as_ptr(), a.envp.as_ptr()) };
        let e = errno();
        match e {
            rustix::io::Errno::NOEXEC => {
                // SAFETY: slot 1 of `sh_argv` is reserved for the script's path.
                unsafe {
                    *a.sh_argv.add(1) = c.as_ptr();
                    libc::execve(c"/bin/sh".as_ptr(), a.sh_argv, a.envp.as_ptr());
                }
                return errno();
            }
            rustix::io::Errno::ACCESS => denied = true,
            rustix::io::Errno::NOENT
            | rustix::io::Errno::NOTDIR
            | rustix::io::Errno::STALE
            | rustix::io::Errno::NODEV
            | rustix::io::Errno::TIMEDOUT => last = e,
            other => return other,
        }
    }
    if denied {
        rustix::io::Errno::ACCESS
    } else {
        last
    }
}

fn errno() -> rustix::io::Errno {
    rustix::io::Errno::from_raw_os_error(io::Error::last_os_error().raw_os_error().unwrap_or(0))
}

/// `src` as descriptor `target`, inherited across the exec (`dup2` clears close-on-exec; when
/// `src` already is `target`, the flag is cleared by hand).
fn dup_onto(src: BorrowedFd<'_>, target: RawFd) -> Result<(), rustix::io::Errno> {
    if src.as_raw_fd() == target {
        return rustix::io::fcntl_setfd(src, rustix::io::FdFlags::empty());
    }
    match target {
        0 => rustix::stdio::dup2_stdin(src),
        1 => rustix::stdio::dup2_stdout(src),
        _ => rustix::stdio::dup2_stderr(src),
    }
}

/// Every signal with a handler back to its default (the child must never run one of
/// podgrace's handlers on its stack), and SIGPIPE too, which Rust programs ignore and
/// `std::process::Command` gives its children back as default.
fn default_signal_handlers() {
    for sig in 1..=64 {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        // SAFETY: sigaction reads and writes only the structures given; SIG_DFL is always a
        // valid disposition.
        unsafe {
            let mut old = std::mem::zeroed::<libc::sigaction>();
            if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 {
                continue;
            }
            let caught = old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN;
            if caught || sig == libc::SIGPIPE {
                let mut dfl = std::mem::zeroed::<libc::sigaction>();
                dfl.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(sig, &dfl, std::ptr::null_mut());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_is_looked_up_in_each_path_directory_in_order() {
        let c = candidates("sh", "/usr/local/bin:/bin/::/usr/bin").unwrap();
        let c: Vec<&str> = c.iter().map(|s| s.to_str().unwrap()).collect();
        assert_eq!(c, ["/usr/local/bin/sh", "/bin/sh", "./sh", "/usr/bin/sh"]);
        let c = candidates("./run.sh", "/bin").unwrap();
        assert_eq!(c[0].to_str().unwrap(), "./run.sh");
        assert_eq!(c.len(), 1);
        assert!(candidates("a\0b", "/bin").is_err());
    }
}
