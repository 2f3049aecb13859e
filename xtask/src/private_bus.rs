//! A dbus-daemon of a test's own, on a socket in a temporary directory,
//! and callers that are not root: for sky-dbus's tests and the install
//! test (which reads the installed bus policy with it). Here, not in
//! sky-dbus behind a feature: a dev-dependency's feature would give the
//! product's crates another feature set under `cargo test`, and every
//! crate above them would be compiled twice.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct PrivateBus {
    child: Child,
    address: String,
    _dir: tempfile::TempDir,
}

impl PrivateBus {
    /// A bus of `kind` (`system`, `custom`) whose configuration is
    /// `policy` (the `<policy>` and `<includedir>` elements). Panics with
    /// what dbus-daemon said if it refuses the configuration.
    pub fn start(kind: &str, policy: &str) -> PrivateBus {
        let dir = tempfile::tempdir().expect("a temporary directory");
        // An unprivileged caller must reach the socket.
        std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .expect("the directory's mode");
        let socket = dir.path().join("bus");
        let conf = dir.path().join("bus.conf");
        std::fs::write(
            &conf,
            format!(
                "<busconfig>\n<type>{kind}</type>\n<listen>unix:path={}</listen>\n\
                 <auth>EXTERNAL</auth>\n{policy}\n</busconfig>\n",
                socket.display()
            ),
        )
        .expect("writing the bus configuration");
        let mut child = Command::new("dbus-daemon")
            .arg(format!("--config-file={}", conf.display()))
            .args(["--nofork", "--nopidfile"])
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("dbus-daemon (package dbus-daemon) runs the test bus");
        let started = Instant::now();
        while !socket.exists() {
            if let Ok(Some(status)) = child.try_wait() {
                let mut err = String::new();
                if let Some(stderr) = child.stderr.as_mut() {
                    let _ = std::io::Read::read_to_string(stderr, &mut err);
                }
                panic!("dbus-daemon refused its configuration ({status}): {err}");
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "dbus-daemon made no socket"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        PrivateBus {
            child,
            address: format!("unix:path={}", socket.display()),
            _dir: dir,
        }
    }

    /// The bus's address, as D-Bus clients take it.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// `dbus-send --bus=THIS --print-reply --dest=DEST PATH METHOD ARGS`
    /// by a caller that is not root: as nobody (setpriv) when the test runs
    /// as root, as CI's do, else as the user running it. Its answer's
    /// first string, or everything it said.
    pub fn call_unprivileged(
        &self,
        dest: &str,
        path: &str,
        method: &str,
        args: &[&str],
    ) -> Result<String, String> {
        let mut cmd = if am_root() {
            let mut c = Command::new("setpriv");
            c.args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "dbus-send",
            ]);
            c
        } else {
            Command::new("dbus-send")
        };
        let out = cmd
            .arg(format!("--bus={}", self.address))
            .args(["--print-reply", &format!("--dest={dest}"), path, method])
            .args(args)
            .output()
            .expect("dbus-send (package dbus-bin) calls the service");
        let said = String::from_utf8_lossy(&out.stdout);
        match said.lines().find_map(|l| l.trim().strip_prefix("string ")) {
            Some(answer) if out.status.success() => Ok(answer.trim_matches('"').to_string()),
            _ => Err(format!("{said}{}", String::from_utf8_lossy(&out.stderr))),
        }
    }
}

impl Drop for PrivateBus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn am_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}
