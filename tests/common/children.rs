//! Processes a test starts die with the test. A test binary that is killed
//! (by `timeout`, by hand, by CI's deadline) runs no destructor, so a
//! `Drop` that stops its children is not enough: a `serve` left running
//! holds its ports and, worse, a control plane left running holds the
//! machine's memory for hours.
//!
//! - A child of the binary under test is started with
//!   `PR_SET_PDEATHSIG = SIGKILL`: the kernel kills it when its parent
//!   goes. The kernel means the parent *thread*, and a test's thread ends
//!   with the test (a tokio blocking thread even sooner), so children are
//!   forked from one thread that lives as long as the process.
//! - A control plane outlives the script that starts it, so each one has
//!   a janitor: a shell in its own session that waits on a pipe this
//!   process holds, and stops the plane when the pipe closes, whether the
//!   test dropped it or died.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};

type Request = (Command, mpsc::Sender<io::Result<Child>>);

/// Starts `command` as a child that is killed when this process ends,
/// however it ends.
pub fn spawn(command: Command) -> io::Result<Child> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<Request>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (requests, incoming) = mpsc::channel::<Request>();
        std::thread::Builder::new()
            .name("child-spawner".into())
            .spawn(move || {
                for (mut command, reply) in incoming {
                    let _ = reply.send(spawn_here(&mut command));
                }
            })
            .expect("the spawner thread starts");
        Mutex::new(requests)
    });
    let (reply, child) = mpsc::channel();
    spawner
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .send((command, reply))
        .map_err(|_| io::Error::other("the spawner thread is gone"))?;
    child
        .recv()
        .map_err(|_| io::Error::other("the spawner thread is gone"))?
}

/// Forks on this thread, with the parent-death signal set in the child.
fn spawn_here(command: &mut Command) -> io::Result<Child> {
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: between fork and exec the closure calls only prctl, getppid
    // and raise, which are async-signal-safe, and allocates nothing.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) < 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent died before the signal was armed: follow it now.
            if libc::getppid() != parent {
                libc::raise(libc::SIGKILL);
            }
            Ok(())
        })
    };
    command.spawn()
}

/// Runs `stop` once the returned guard is dropped or this process ends,
/// from a shell in its own session (so a signal to this process group does
/// not take it too). Dropping the guard runs `stop` and waits for it.
pub struct Janitor {
    pipe: Option<ChildStdin>,
    shell: Child,
}

impl Janitor {
    /// `stop` is run as `stop[0] stop[1..]`.
    pub fn arm(stop: &[&std::ffi::OsStr]) -> io::Result<Janitor> {
        let mut command = Command::new("sh");
        command
            .arg("-c")
            // Blocks until the pipe closes (EOF: the writer is gone).
            .arg(r#"while read -r _; do :; done; exec "$@""#)
            .arg("janitor")
            .args(stop)
            .stdin(Stdio::piped())
            .stdout(Stdio::null());
        // SAFETY: setsid is async-signal-safe and allocates nothing.
        unsafe {
            command.pre_exec(|| {
                if libc::setsid() < 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            })
        };
        let mut shell = command.spawn()?;
        Ok(Janitor {
            pipe: shell.stdin.take(),
            shell,
        })
    }
}

impl Drop for Janitor {
    fn drop(&mut self) {
        drop(self.pipe.take());
        let _ = self.shell.wait();
    }
}
