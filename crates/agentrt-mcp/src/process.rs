//! A stdio server's process (design §24): started with only the
//! environment the operator named, in a process group of its own (on
//! Linux, under our supervisor when the server description names one, see
//! [`supervise`](mod@crate::supervise)), and stopped in stages: its stdin
//! closed, then SIGTERM to its group, then SIGKILL, each stage waiting a
//! bounded time for it to exit.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWrite};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

use crate::server::Server;

/// How long close waits for a server to exit after closing its stdin,
/// before it sends SIGTERM.
pub const SHUTDOWN_EOF_WAIT: Duration = Duration::from_secs(2);

/// How long close waits for a server to exit after SIGTERM, before it
/// kills it.
pub const SHUTDOWN_TERM_WAIT: Duration = Duration::from_secs(2);

/// How long close waits for a server to be gone once it is killed (and,
/// under a supervisor, again before the supervisor itself is SIGKILLed).
pub const SHUTDOWN_KILL_WAIT: Duration = Duration::from_secs(2);

/// How much of a child's stderr is kept for errors.
const STDERR_TAIL: usize = 4096;

/// A started server: its process, and the two ends the protocol runs on.
pub(crate) struct Started {
    pub(crate) process: ServerProcess,
    pub(crate) stdin: SharedStdin,
    pub(crate) stdout: ChildStdout,
}

/// A stdio server's process (or its supervisor's), the tail of its
/// stderr, and what stops it.
pub(crate) struct ServerProcess {
    child: tokio::sync::Mutex<ChildState>,
    stdin: SharedStdin,
    stderr: Arc<Mutex<Vec<u8>>>,
    /// The process group the child leads (its pid), on Unix.
    group: Option<i32>,
    /// The write end of the supervisor's lifeline: dropping it makes the
    /// supervisor kill everything and exit (Linux, supervised only).
    lifeline: Mutex<Option<Lifeline>>,
}

/// The write end of a supervisor's lifeline.
#[cfg(unix)]
type Lifeline = std::os::fd::OwnedFd;
/// No lifeline without a supervisor (Linux only).
#[cfg(not(unix))]
type Lifeline = std::convert::Infallible;

/// The child and whether it was stopped for good.
struct ChildState {
    child: Child,
    stopped: bool,
}

/// Starts `argv` for `server`: only the environment
/// [`Server::child_env`] names, stdio piped, in a process group of its
/// own. On Linux, under the supervisor that [`Server::supervisor`] names
/// (with a lifeline), or else with a parent-death SIGKILL.
pub(crate) fn start(server: &Server, argv: &[String]) -> Result<Started, String> {
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| "the command is empty".to_owned())?;
    let supervisor = supervisor_prefix(server);
    #[cfg(target_os = "linux")]
    let lifeline = match supervisor {
        Some(_) => Some(std::io::pipe().map_err(|e| format!("cannot make a lifeline: {e}"))?),
        None => None,
    };
    let mut command = match supervisor {
        Some((supervisor, prefix_args)) => {
            let mut command = Command::new(supervisor);
            command.args(prefix_args);
            #[cfg(target_os = "linux")]
            if let Some((reader, _)) = &lifeline {
                use std::os::fd::AsRawFd;
                command
                    .arg(crate::supervise::LIFELINE_OPTION)
                    .arg(reader.as_raw_fd().to_string());
            }
            command.arg("--").arg(program).args(args);
            command
        }
        None => {
            let mut command = Command::new(program);
            command.args(args);
            command
        }
    };
    command
        .env_clear()
        // The OS's own strings: a variable that is not UTF-8 is passed
        // through or left out by name, never a panic.
        .envs(server.child_env(std::env::vars_os()))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        // Under a supervisor, the lifeline's end kills: a SIGKILL of the
        // supervisor alone would leave the server behind.
        .kill_on_drop(supervisor.is_none());
    #[cfg(unix)]
    command.process_group(0);
    #[cfg(target_os = "linux")]
    match &lifeline {
        Some((reader, _)) => {
            use std::os::fd::AsRawFd;
            let fd = reader.as_raw_fd();
            // SAFETY: between fork and exec only fcntl, async-signal-safe:
            // the lifeline's read end (close-on-exec, like every
            // descriptor std makes) is passed on to the supervisor.
            unsafe {
                command.pre_exec(move || {
                    if libc::fcntl(fd, libc::F_SETFD, 0) == -1 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        // SAFETY: between fork and exec only prctl, async-signal-safe:
        // the server dies when the thread that started it does.
        None => unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        },
    }
    let mut child = command
        .spawn()
        .map_err(|e| format!("cannot start {:?}: {e}", command.as_std().get_program()))?;
    #[cfg(target_os = "linux")]
    let lifeline = lifeline.map(|(reader, writer)| {
        // Our copy of the read end goes; the supervisor has its own.
        drop(reader);
        std::os::fd::OwnedFd::from(writer)
    });
    #[cfg(not(target_os = "linux"))]
    let lifeline: Option<Lifeline> = None;
    let group = child.id().and_then(|p| i32::try_from(p).ok());
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err("the child's pipes are missing".into());
    };
    let stdin = SharedStdin::new(stdin);
    Ok(Started {
        process: ServerProcess {
            child: tokio::sync::Mutex::new(ChildState {
                child,
                stopped: false,
            }),
            stdin: stdin.clone(),
            stderr: keep_stderr_tail(stderr),
            group: if cfg!(unix) { group } else { None },
            lifeline: Mutex::new(lifeline),
        },
        stdin,
        stdout,
    })
}

/// The supervisor's program and first arguments, as the description
/// names them, where a supervisor runs (Linux); `None` elsewhere.
fn supervisor_prefix(server: &Server) -> Option<(&String, &[String])> {
    if !cfg!(target_os = "linux") {
        return None;
    }
    server
        .supervisor
        .as_deref()
        .and_then(<[String]>::split_first)
        .filter(|(program, _)| !program.is_empty())
}

impl ServerProcess {
    /// The child's id while it runs: the server's, or its supervisor's.
    pub(crate) async fn id(&self) -> Option<u32> {
        self.child.lock().await.child.id()
    }

    /// The tail of the child's stderr.
    pub(crate) fn stderr(&self) -> &Arc<Mutex<Vec<u8>>> {
        &self.stderr
    }

    /// Closes the server's stdin (the first stage of [`ServerProcess::stop`]).
    pub(crate) fn close_stdin(&self) {
        self.stdin.close();
    }

    /// Stops the server in stages (design §24): its stdin closed, up
    /// to [`SHUTDOWN_EOF_WAIT`] for it to exit; SIGTERM to its group, up
    /// to [`SHUTDOWN_TERM_WAIT`]; then killed (see [`ServerProcess::kill`]).
    /// Whatever stage it exits in, its group is SIGKILLed last, so a
    /// descendant that outlived it dies too. Safe to call twice and
    /// concurrently: a second call waits for the first and does nothing.
    pub(crate) async fn stop(&self) {
        let mut state = self.child.lock().await;
        if state.stopped {
            return;
        }
        self.stdin.close();
        if !exited_within(&mut state.child, SHUTDOWN_EOF_WAIT).await {
            #[cfg(unix)]
            self.signal_group(libc::SIGTERM);
            if !exited_within(&mut state.child, SHUTDOWN_TERM_WAIT).await {
                self.kill_child(&mut state.child).await;
            }
        }
        self.finish(&mut state);
    }

    /// Kills the server at once (a failed handshake): under a supervisor,
    /// the lifeline's end (the supervisor SIGKILLs the server's group and
    /// every descendant, then exits), up to [`SHUTDOWN_KILL_WAIT`]; then
    /// SIGKILL to the child's group, up to [`SHUTDOWN_KILL_WAIT`].
    pub(crate) async fn kill(&self) {
        let mut state = self.child.lock().await;
        if state.stopped {
            return;
        }
        self.stdin.close();
        self.kill_child(&mut state.child).await;
        self.finish(&mut state);
    }

    async fn kill_child(&self, child: &mut Child) {
        if self.end_lifeline() && exited_within(child, SHUTDOWN_KILL_WAIT).await {
            return;
        }
        #[cfg(unix)]
        self.signal_group(libc::SIGKILL);
        let _ = child.start_kill();
        let _ = exited_within(child, SHUTDOWN_KILL_WAIT).await;
    }

    /// The last of every stop: the group SIGKILLed (a group id stays
    /// reserved while any member lives, so this reaches only what the
    /// server left behind) and the lifeline ended.
    fn finish(&self, state: &mut ChildState) {
        #[cfg(unix)]
        self.signal_group(libc::SIGKILL);
        self.end_lifeline();
        state.stopped = true;
    }

    /// Ends the supervisor's lifeline; whether there was one.
    fn end_lifeline(&self) -> bool {
        self.lifeline
            .lock()
            .map(|mut l| l.take().is_some())
            .unwrap_or(false)
    }

    /// Sends `signal` to the group the child leads.
    #[cfg(unix)]
    fn signal_group(&self, signal: libc::c_int) {
        if let Some(group) = self.group {
            // SAFETY: kill has no memory preconditions; a negative pid
            // names the group.
            unsafe {
                libc::kill(-group, signal);
            }
        }
    }
}

/// Whether `child` exits (and is reaped) within `bound`; a child that
/// cannot be waited for counts as gone.
async fn exited_within(child: &mut Child, bound: Duration) -> bool {
    tokio::time::timeout(bound, child.wait()).await.is_ok()
}

/// A child's stdin, shared by the protocol's transport and close, which
/// closes it whoever else holds it.
#[derive(Clone)]
pub(crate) struct SharedStdin {
    state: Arc<Mutex<StdinState>>,
}

struct StdinState {
    stdin: Option<ChildStdin>,
    /// A write that waits for room, woken when stdin is closed.
    waiting: Option<Waker>,
}

impl SharedStdin {
    fn new(stdin: ChildStdin) -> SharedStdin {
        SharedStdin {
            state: Arc::new(Mutex::new(StdinState {
                stdin: Some(stdin),
                waiting: None,
            })),
        }
    }

    /// Closes the child's stdin (the server sees its end); a write after
    /// fails.
    pub(crate) fn close(&self) {
        let (stdin, waiting) = match self.state.lock() {
            Ok(mut s) => (s.stdin.take(), s.waiting.take()),
            Err(_) => return,
        };
        drop(stdin);
        if let Some(waker) = waiting {
            waker.wake();
        }
    }

    fn poll_with<T>(
        &self,
        cx: &mut Context<'_>,
        f: impl FnOnce(Pin<&mut ChildStdin>, &mut Context<'_>) -> Poll<std::io::Result<T>>,
    ) -> Poll<std::io::Result<T>> {
        let Ok(mut state) = self.state.lock() else {
            return Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into()));
        };
        let Some(stdin) = state.stdin.as_mut() else {
            return Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into()));
        };
        let polled = f(Pin::new(stdin), cx);
        if polled.is_pending() {
            state.waiting = Some(cx.waker().clone());
        }
        polled
    }
}

impl AsyncWrite for SharedStdin {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.poll_with(cx, |stdin, cx| stdin.poll_write(cx, buf))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.poll_with(cx, |stdin, cx| stdin.poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.poll_with(cx, |stdin, cx| stdin.poll_shutdown(cx))
    }
}

/// Keeps the last [`STDERR_TAIL`] bytes of a child's stderr; the handle
/// is dropped by the reader when the pipe closes.
fn keep_stderr_tail(mut stderr: ChildStderr) -> Arc<Mutex<Vec<u8>>> {
    let tail = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&tail);
    tokio::spawn(async move {
        let mut buf = [0u8; 1024];
        while let Ok(n) = stderr.read(&mut buf).await {
            if n == 0 {
                break;
            }
            if let Ok(mut t) = kept.lock() {
                t.extend_from_slice(&buf[..n]);
                let excess = t.len().saturating_sub(STDERR_TAIL);
                t.drain(..excess);
            }
        }
    });
    tail
}
