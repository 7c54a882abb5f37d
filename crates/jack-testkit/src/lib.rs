//! Test support shared by xrunlab's JACK tests: starts a real `jackd -d dummy` of the test's own,
//! stops it by pid when dropped (also when the test fails), and makes tests take turns; runs on
//! test threads.
#![deny(missing_docs)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The tests of one binary take turns: libjack's server registry holds 8 servers, and
/// two shared cores make a rate measurement meaningless beside an overload test.
pub fn take_turn() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether a JACK server answers under `name`.
pub fn serves(name: &str) -> bool {
    Command::new("jack_lsp")
        .args(["-s", name])
        .stderr(Stdio::null())
        .output()
        .is_ok_and(|o| {
            o.status.success() && String::from_utf8_lossy(&o.stdout).contains("system:playback_1")
        })
}

/// A `jackd -d dummy` of our own at 48 kHz; stopped (SIGTERM, then SIGKILL) when dropped,
/// with the sockets and semaphores a killed server leaves in /dev/shm removed.
pub struct TestServer {
    name: String,
    child: Child,
    log: PathBuf,
}

/// Why [`TestServer::start_named`] did not start a server: the name is in use.
#[derive(Debug, thiserror::Error)]
pub enum NameTaken {
    /// A server of that name answers already.
    #[error("a server named {0} is already running")]
    Running(String),
    /// jackd exited saying the name is active or the registry is full; its output.
    #[error("{0}")]
    Refused(String),
}

impl TestServer {
    /// Starts a server with `period` frames under the first free name `{prefix}-0..3`:
    /// libjack's registry frees a killed server's entry only when a server of the same
    /// name starts again, so a small fixed set of names keeps it from filling up.
    pub fn start(prefix: &str, period: u32) -> TestServer {
        let mut last_log = String::new();
        for slot in 0..4 {
            match TestServer::start_named(&format!("{prefix}-{slot}"), period) {
                Ok(server) => return server,
                Err(e) => last_log = e.to_string(),
            }
        }
        panic!("no test JACK server could be started:\n{last_log}");
    }

    /// A server under `name`; `Err` when the name is taken (with jackd's output when jackd
    /// said so).
    pub fn start_named(name: &str, period: u32) -> Result<TestServer, NameTaken> {
        if serves(name) {
            return Err(NameTaken::Running(name.to_owned()));
        }
        let name = name.to_owned();
        let period = period.to_string();
        // jackd's output goes to a file so that a failed start can show why.
        let log = std::env::temp_dir().join(format!("{name}-{}.log", std::process::id()));
        let log_file = std::fs::File::create(&log).expect("jackd log file");
        let log_err = log_file.try_clone().expect("jackd log file");
        let child = Command::new("jackd")
            .args([
                "-n", &name, "-R", "-d", "dummy", "-r", "48000", "-p", &period,
            ])
            .stdin(Stdio::null())
            .stdout(log_file)
            .stderr(log_err)
            .spawn()
            .expect(
                "jackd could not be started: install jackd2 (apt-get install jackd2; test.sh does)",
            );
        let mut server = TestServer { name, child, log };
        let t0 = Instant::now();
        loop {
            // Ready only if our own jackd is still alive: a server already
            // running under this name answers too, while ours gives up.
            if serves(&server.name) && matches!(server.child.try_wait(), Ok(None)) {
                return Ok(server);
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                let log = std::fs::read_to_string(&server.log).unwrap_or_default();
                assert!(
                    log.contains("already active") || log.contains("Too many servers"),
                    "jackd -n {} exited before it was ready: {status}\n{log}",
                    server.name
                );
                return Err(NameTaken::Refused(log));
            }
            assert!(
                t0.elapsed() < Duration::from_secs(5),
                "jackd -n {} not ready after 5 s",
                server.name
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The server's name (`jackd -n NAME`, `JACK_DEFAULT_SERVER`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The server's process id.
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Sends `sig` to the server.
    pub fn signal(&self, sig: libc::c_int) {
        // SAFETY: kill with a pid we spawned and still own (not yet reaped).
        unsafe { libc::kill(self.child.id() as libc::pid_t, sig) };
    }

    /// Kills the server at once, as a crash would.
    pub fn kill(&self) {
        self.signal(libc::SIGKILL);
    }

    /// A JACK tool (e.g. `jack_bufsize`) run against this server; its standard output.
    pub fn tool(&self, program: &str, args: &[&str]) -> String {
        let out = Command::new(program)
            .args(args)
            .env("JACK_DEFAULT_SERVER", &self.name)
            .output()
            .unwrap_or_else(|e| panic!("{program}: {e}"));
        assert!(
            out.status.success(),
            "{program} {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.signal(libc::SIGTERM);
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(2) && matches!(self.child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(10));
        }
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = std::fs::remove_file(&self.log);
        // A killed server leaves its sockets and semaphores in /dev/shm; their names
        // carry the server name between underscores.
        let tag = format!("_{}_", self.name);
        for entry in std::fs::read_dir("/dev/shm")
            .into_iter()
            .flatten()
            .flatten()
        {
            if entry.file_name().to_string_lossy().contains(&tag) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
}

/// A test binary of this crate (`xrunlab-late-client`, `xrunlab-rt-hog`), found in the target
/// directory of the running test. Cargo builds a package's binaries only for that package's own
/// tests, so test.sh builds them first; a missing one fails the test with the command.
fn test_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    // target/<profile>/deps/<test> -> target/<profile>/<name>
    let path = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(|dir| dir.join(name))
        .expect("the test binary lies in target/<profile>/deps");
    assert!(
        path.exists(),
        "{} is missing: build it with `cargo build -p xrunlab-jack-testkit --bins` (test.sh does)",
        path.display()
    );
    path
}

/// The `xrunlab-late-client` test binary: a JACK client that runs long every Nth cycle.
pub fn late_client() -> PathBuf {
    test_binary("xrunlab-late-client")
}

/// The `xrunlab-rt-hog` test binary: a SCHED_FIFO process that spins on one CPU at a steady
/// interval.
pub fn rt_hog() -> PathBuf {
    test_binary("xrunlab-rt-hog")
}

/// A PipeWire build to test against: the system's (Debian 12's 0.3.65), or the newer one that
/// test.sh unpacks under `target/pw-1.4/root` (1.4.2 from bookworm-backports, what most users
/// run), run from its tree through `LD_LIBRARY_PATH`, `SPA_PLUGIN_DIR`, `PIPEWIRE_MODULE_DIR`
/// and `PIPEWIRE_CONFIG_DIR`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PipeWireBuild {
    /// `pipewire` and `pw-jack` from PATH.
    System,
    /// An unpacked tree (the root of `dpkg -x` of its packages).
    Unpacked(PathBuf),
}

impl PipeWireBuild {
    /// The unpacked newer build: `XRUNLAB_PIPEWIRE_1_4` or `<workspace>/target/pw-1.4/root`;
    /// panics with the command that makes it when it is missing, so a test never passes
    /// without having run against it.
    pub fn newer() -> PipeWireBuild {
        let root = std::env::var_os("XRUNLAB_PIPEWIRE_1_4")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/pw-1.4/root")
            });
        assert!(
            root.join("usr/bin/pipewire").exists(),
            "PipeWire 1.4 is not unpacked at {}: run `bash tests/pipewire-1.4.sh` (test.sh does)",
            root.display()
        );
        PipeWireBuild::Unpacked(root)
    }

    /// Both builds: every live PipeWire test runs on each.
    pub fn all() -> Vec<PipeWireBuild> {
        vec![PipeWireBuild::System, PipeWireBuild::newer()]
    }

    fn lib_dir(root: &Path) -> PathBuf {
        root.join("usr/lib/x86_64-linux-gnu")
    }

    /// The environment a client of this build needs (its libraries and plugins), besides the
    /// daemon's runtime directory.
    pub fn client_env(&self) -> Vec<(&'static str, PathBuf)> {
        match self {
            PipeWireBuild::System => Vec::new(),
            PipeWireBuild::Unpacked(root) => {
                let lib = Self::lib_dir(root);
                vec![
                    ("LD_LIBRARY_PATH", lib.clone()),
                    ("SPA_PLUGIN_DIR", lib.join("spa-0.2")),
                    ("PIPEWIRE_MODULE_DIR", lib.join("pipewire-0.3")),
                    ("PIPEWIRE_CONFIG_DIR", root.join("usr/share/pipewire")),
                ]
            }
        }
    }

    /// `1.4` for the unpacked tree, `system` for the other: for test messages.
    pub fn label(&self) -> &'static str {
        match self {
            PipeWireBuild::System => "system",
            PipeWireBuild::Unpacked(_) => "1.4",
        }
    }
}

/// A private PipeWire daemon (no session manager; its dummy driver drives the graph) in a
/// runtime directory of its own, killed when dropped. Clients reach it through
/// [`TestPipeWire::socket`] or with the environment of [`TestPipeWire::env`].
pub struct TestPipeWire {
    runtime_dir: PathBuf,
    child: Child,
    quantum: String,
    build: PipeWireBuild,
}

impl TestPipeWire {
    /// Starts the system's `pipewire` with `PIPEWIRE_QUANTUM=QUANTUM/48000`; panics with the
    /// install command when PipeWire is missing.
    pub fn start(quantum: u32) -> TestPipeWire {
        TestPipeWire::start_build(&PipeWireBuild::System, quantum)
    }

    /// Starts `build`'s `pipewire` with `PIPEWIRE_QUANTUM=QUANTUM/48000`.
    pub fn start_build(build: &PipeWireBuild, quantum: u32) -> TestPipeWire {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let runtime_dir =
            std::env::temp_dir().join(format!("xrunlab-pw-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&runtime_dir).expect("runtime dir");
        let quantum = format!("{quantum}/48000");
        let program = match build {
            PipeWireBuild::System => PathBuf::from("pipewire"),
            PipeWireBuild::Unpacked(root) => root.join("usr/bin/pipewire"),
        };
        let child = Command::new(&program)
            .envs(build.client_env())
            .env("XDG_RUNTIME_DIR", &runtime_dir)
            .env("PIPEWIRE_QUANTUM", &quantum)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "{} could not be started ({e}): apt-get install pipewire pipewire-jack \
                     (test.sh does)",
                    program.display()
                )
            });
        let pw = TestPipeWire {
            runtime_dir,
            child,
            quantum,
            build: build.clone(),
        };
        let t0 = Instant::now();
        while !pw.socket().exists() {
            assert!(
                t0.elapsed() < Duration::from_secs(5),
                "pipewire not ready after 5 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        pw
    }

    /// The daemon's runtime directory (its `XDG_RUNTIME_DIR`).
    pub fn runtime_dir(&self) -> &std::path::Path {
        &self.runtime_dir
    }

    /// The environment its clients need: the runtime directory, and the build's libraries.
    pub fn env(&self) -> Vec<(&'static str, PathBuf)> {
        let mut env = self.build.client_env();
        env.push(("XDG_RUNTIME_DIR", self.runtime_dir.clone()));
        env
    }

    /// Which build runs.
    pub fn build(&self) -> &PipeWireBuild {
        &self.build
    }

    /// The daemon's socket.
    pub fn socket(&self) -> PathBuf {
        self.runtime_dir.join("pipewire-0")
    }

    /// The daemon's process id.
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// `program ARGS` as a JACK client of this daemon: through `pw-jack` for the system's
    /// build, and with the unpacked build's libjack first on the library path for the other
    /// (its `pw-jack` script names the system's directory).
    pub fn pw_jack(&self, program: &std::path::Path) -> Command {
        let mut c = match &self.build {
            PipeWireBuild::System => {
                let mut c = Command::new("pw-jack");
                c.arg(program);
                c
            }
            PipeWireBuild::Unpacked(root) => {
                let lib = PipeWireBuild::lib_dir(root);
                let mut c = Command::new(program);
                c.envs(self.build.client_env());
                c.env(
                    "LD_LIBRARY_PATH",
                    format!(
                        "{}:{}",
                        lib.join("pipewire-0.3/jack").display(),
                        lib.display()
                    ),
                );
                c
            }
        };
        c.env("XDG_RUNTIME_DIR", &self.runtime_dir)
            .env("PIPEWIRE_QUANTUM", &self.quantum);
        c
    }

    /// Kills the daemon at once, as a crash would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for TestPipeWire {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.runtime_dir);
    }
}
