//! The supervisor on Linux: a child subreaper that starts the server in
//! a process group of its own, then waits on one `poll` for its signals
//! (read from a signalfd) and for the end of its lifeline.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::{Duration, Instant};

use super::SupervisorArgs;

/// The signals passed on to the server's group.
const FORWARDED: [libc::c_int; 3] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP];

/// How long the supervisor keeps killing and reaping once its lifeline
/// ends (a process in uninterruptible sleep may take a moment to die).
const KILL_BOUND: Duration = Duration::from_secs(5);

/// Why the supervisor could not start the server.
#[derive(Debug, thiserror::Error)]
enum StartError {
    /// The lifeline's descriptor is not open.
    #[error("the lifeline {fd} is not open: {source}")]
    Lifeline {
        fd: i32,
        #[source]
        source: std::io::Error,
    },
    /// A system call of the set-up failed.
    #[error("{step}: {source}")]
    Setup {
        step: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// The server's program could not be started.
    #[error("cannot start {program:?}: {source}")]
    Spawn {
        program: OsString,
        #[source]
        source: std::io::Error,
    },
}

impl StartError {
    /// The exit status that says so: 127 for a program that cannot start
    /// (as a shell says it), 2 otherwise.
    fn code(&self) -> i32 {
        match self {
            StartError::Spawn { .. } => 127,
            _ => 2,
        }
    }
}

/// `-1` from a system call as the error it set.
fn check(ret: libc::c_int, step: &'static str) -> Result<libc::c_int, StartError> {
    if ret == -1 {
        Err(StartError::Setup {
            step,
            source: std::io::Error::last_os_error(),
        })
    } else {
        Ok(ret)
    }
}

/// Runs the supervisor to its end; its exit status.
pub(super) fn run(args: SupervisorArgs) -> i32 {
    match Supervisor::start(args) {
        Ok(mut supervisor) => supervisor.watch(),
        Err(e) => {
            eprintln!("agentrt-mcp supervisor: {e}");
            e.code()
        }
    }
}

/// A running supervisor.
struct Supervisor {
    /// The lifeline's read end.
    lifeline: OwnedFd,
    /// The blocked signals, readable.
    signals: OwnedFd,
    /// The server's pid, which is also its process group's id.
    server: libc::pid_t,
    /// How the server ended, once it was reaped.
    server_status: Option<libc::c_int>,
}

/// The signal set the supervisor blocks and reads.
fn watched_signals() -> Result<libc::sigset_t, StartError> {
    // SAFETY: a sigset_t is plain data; sigemptyset initializes it.
    let mut mask: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `mask` is a valid sigset_t for both calls.
    unsafe {
        check(libc::sigemptyset(&mut mask), "sigemptyset")?;
        for signal in [libc::SIGCHLD, libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            check(libc::sigaddset(&mut mask, signal), "sigaddset")?;
        }
    }
    Ok(mask)
}

impl Supervisor {
    fn start(args: SupervisorArgs) -> Result<Supervisor, StartError> {
        let fd = args.lifeline;
        // Ours alone: the server does not inherit it. SAFETY: fcntl on a
        // descriptor number has no memory preconditions.
        if unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } == -1 {
            return Err(StartError::Lifeline {
                fd,
                source: std::io::Error::last_os_error(),
            });
        }
        // SAFETY: the descriptor is open (fcntl succeeded) and was handed
        // to this process to own.
        let lifeline = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: prctl with integer arguments only.
        check(
            unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) },
            "prctl(PR_SET_CHILD_SUBREAPER)",
        )?;
        // Blocked before the server starts, so no SIGCHLD is lost: they
        // wait in the signalfd. This process has one thread.
        let mask = watched_signals()?;
        // SAFETY: `mask` is initialized; the old mask is not asked for.
        check(
            unsafe { libc::sigprocmask(libc::SIG_BLOCK, &mask, std::ptr::null_mut()) },
            "sigprocmask",
        )?;
        // SAFETY: `mask` is initialized; -1 asks for a new descriptor.
        let signals = check(
            unsafe { libc::signalfd(-1, &mask, libc::SFD_CLOEXEC) },
            "signalfd",
        )?;
        // SAFETY: signalfd returned a new descriptor this process owns.
        let signals = unsafe { OwnedFd::from_raw_fd(signals) };

        let (program, rest) = args.argv.split_first().ok_or(StartError::Spawn {
            program: OsString::new(),
            source: std::io::ErrorKind::InvalidInput.into(),
        })?;
        let mut command = Command::new(program);
        command.args(rest).process_group(0);
        // SAFETY: between fork and exec only sigemptyset and sigprocmask,
        // both async-signal-safe: the server starts with no signal blocked.
        unsafe {
            command.pre_exec(|| {
                let mut empty: libc::sigset_t = std::mem::zeroed();
                if libc::sigemptyset(&mut empty) == -1
                    || libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut()) == -1
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().map_err(|source| StartError::Spawn {
            program: program.clone(),
            source,
        })?;
        let server = libc::pid_t::try_from(child.id()).map_err(|_| StartError::Spawn {
            program: program.clone(),
            source: std::io::ErrorKind::InvalidData.into(),
        })?;
        // Dropping std's handle neither kills nor waits: the loop reaps.
        drop(child);
        close_own_stdio();
        Ok(Supervisor {
            lifeline,
            signals,
            server,
            server_status: None,
        })
    }

    /// Waits for signals and the lifeline until no child is left, or the
    /// lifeline ends; the exit status.
    fn watch(&mut self) -> i32 {
        loop {
            let mut fds = [
                libc::pollfd {
                    fd: self.signals.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
                // No event asked: a pipe's end is reported all the same.
                libc::pollfd {
                    fd: self.lifeline.as_raw_fd(),
                    events: 0,
                    revents: 0,
                },
            ];
            // SAFETY: `fds` is an array of two initialized pollfds.
            let ready = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
            if ready == -1 {
                if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                self.kill_all();
                return self.status();
            }
            if fds[1].revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
                // The process that started us is gone, or closed us down.
                self.kill_all();
                return self.status();
            }
            if fds[0].revents & libc::POLLIN != 0 {
                for signal in self.read_signals() {
                    if FORWARDED.contains(&signal) {
                        self.forward(signal);
                    }
                }
            }
            if self.reap() {
                return self.status();
            }
        }
    }

    /// The signals waiting in the signalfd.
    fn read_signals(&self) -> Vec<libc::c_int> {
        const BATCH: usize = 16;
        let size = std::mem::size_of::<libc::signalfd_siginfo>();
        // SAFETY: signalfd_siginfo is plain data; zeroes are a valid value.
        let mut infos: [libc::signalfd_siginfo; BATCH] = unsafe { std::mem::zeroed() };
        // SAFETY: the buffer is `BATCH * size` writable bytes; poll said
        // the descriptor is readable, so this does not block.
        let read = unsafe {
            libc::read(
                self.signals.as_raw_fd(),
                infos.as_mut_ptr().cast(),
                BATCH * size,
            )
        };
        let count = usize::try_from(read).map_or(0, |n| n / size);
        infos
            .iter()
            .take(count)
            .filter_map(|info| libc::c_int::try_from(info.ssi_signo).ok())
            .collect()
    }

    /// Passes `signal` on to the server's group, and to each child that
    /// was re-parented here from outside it. Once: the supervisor is not
    /// in the server's group, so it never receives its own.
    fn forward(&self, signal: libc::c_int) {
        // SAFETY: kill has no memory preconditions; a negative pid names
        // the server's group (still reserved while any member lives).
        unsafe {
            libc::kill(-self.server, signal);
        }
        for pid in children() {
            // SAFETY: as above, on one process.
            unsafe {
                if libc::getpgid(pid) != self.server {
                    libc::kill(pid, signal);
                }
            }
        }
    }

    /// Reaps every child that ended, noting the server's status; whether
    /// no child is left.
    fn reap(&mut self) -> bool {
        loop {
            let mut status: libc::c_int = 0;
            // SAFETY: `status` is a valid out pointer.
            let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            match pid {
                0 => return false,
                -1 => {
                    let e = std::io::Error::last_os_error();
                    if e.kind() == std::io::ErrorKind::Interrupted {
                        continue;
                    }
                    // ECHILD: nothing left to wait for.
                    return true;
                }
                pid => {
                    if pid == self.server {
                        self.server_status = Some(status);
                    }
                }
            }
        }
    }

    /// SIGKILLs the server's group and every child (each one re-parented
    /// here is killed in turn, so its own children come here next), and
    /// reaps them, within [`KILL_BOUND`].
    fn kill_all(&mut self) {
        let deadline = Instant::now() + KILL_BOUND;
        loop {
            // SAFETY: kill has no memory preconditions.
            unsafe {
                libc::kill(-self.server, libc::SIGKILL);
            }
            for pid in children() {
                // SAFETY: as above; the group first, so that what it
                // started dies with it.
                unsafe {
                    let group = libc::getpgid(pid);
                    if group > 1 && group != libc::getpgrp() {
                        libc::kill(-group, libc::SIGKILL);
                    }
                    libc::kill(pid, libc::SIGKILL);
                }
            }
            let mut status: libc::c_int = 0;
            // SAFETY: `status` is a valid out pointer.
            let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            match pid {
                0 => {
                    if Instant::now() >= deadline {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                -1 => {
                    if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                        return;
                    }
                }
                pid => {
                    if pid == self.server {
                        self.server_status = Some(status);
                    }
                }
            }
        }
    }

    /// The server's exit status, as a shell gives it: its code, or 128 +
    /// the signal that ended it; 128 + SIGKILL when it was never reaped.
    fn status(&self) -> i32 {
        match self.server_status {
            Some(s) if libc::WIFEXITED(s) => libc::WEXITSTATUS(s),
            Some(s) if libc::WIFSIGNALED(s) => 128 + libc::WTERMSIG(s),
            _ => 128 + libc::SIGKILL,
        }
    }
}

/// The supervisor's children (re-parented descendants among them), from
/// `/proc`; empty when it cannot be read.
fn children() -> Vec<libc::pid_t> {
    let me = std::process::id();
    std::fs::read_to_string(format!("/proc/self/task/{me}/children"))
        .unwrap_or_default()
        .split_ascii_whitespace()
        .filter_map(|pid| pid.parse().ok())
        .collect()
}

/// Points this process's stdin, stdout and stderr at /dev/null, so the
/// server alone holds the pipes: it sees the end of its input when the
/// connection closes it, and the connection sees the end of its output
/// when it exits.
fn close_own_stdio() {
    // SAFETY: open with a NUL-terminated path, dup2 and close on
    // descriptor numbers: no memory preconditions beyond the path.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        if null == -1 {
            // Without /dev/null, closing is still better than holding.
            for fd in 0..3 {
                libc::close(fd);
            }
            return;
        }
        for fd in 0..3 {
            libc::dup2(null, fd);
        }
        if null > 2 {
            libc::close(null);
        }
    }
}
