//! A throwaway PostgreSQL cluster for the tests: `cargo xtask postgres --
//! CMD ARGS...` and the PostgreSQL step of `cargo xtask test`.
//!
//! A cluster lives in a fresh directory under the temporary directory
//! (mode 0700), listens on a unix socket in it, which it trusts, and on
//! 127.0.0.1 for TLS connections only (a certificate made for `localhost`
//! by a CA made for the cluster, `ca.pem` in the directory), and has a
//! superuser role and a database both named `agentrt`; the tests get its
//! libpq connection strings in `AGENTRT_TEST_POSTGRES` (the socket) and
//! `AGENTRT_TEST_POSTGRES_TLS` (TLS over TCP, verified). PostgreSQL
//! refuses to run as root: as root, its server programs run as the
//! `postgres` system user (`runuser -u postgres --`), who owns the
//! directory. Dropping the [`Cluster`] stops the server and removes the
//! directory; a watchdog shell does the same when this process dies first
//! (Ctrl-C, a kill).

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use crate::child::{command, exit_code};
use crate::{capture, cargo_in, is_root, run};

/// The environment variable that hands the tests the connection string.
pub const ENV: &str = "AGENTRT_TEST_POSTGRES";

/// The environment variable that hands the tests the connection string
/// for TLS over TCP, with the cluster's CA as the trusted root.
pub const ENV_TLS: &str = "AGENTRT_TEST_POSTGRES_TLS";

/// The cluster's superuser role, and its database.
const NAME: &str = "agentrt";

/// The system user the server programs run as when this runs as root
/// (Debian's `postgresql` package creates it).
const SYSTEM_USER: &str = "postgres";

/// How long the server may take to accept connections.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// The longest path a unix socket may have (`sun_path`, less its NUL).
const SOCKET_PATH_MAX: usize = 107;

/// The server programs a cluster needs, all from one installation.
const SERVER_PROGRAMS: [&str; 3] = ["initdb", "pg_ctl", "postgres"];

/// Where Debian installs each major version: `<this>/<version>/bin`.
const DEBIAN_VERSIONS: &str = "/usr/lib/postgresql";

/// The watchdog's script. `$1` is the cluster's directory, the rest the
/// command that stops its server. It ignores the terminal's signals (a
/// Ctrl-C is for the rest of the process group), waits for its stdin to
/// end, and cleans up unless it was told `done` first.
const WATCHDOG: &str = r#"trap '' INT HUP TERM QUIT
read -r line
[ "$line" = done ] && exit 0
dir=$1
shift
echo "xtask went away: stopping the PostgreSQL cluster in $dir" >&2
"$@" >/dev/null 2>&1
rm -rf -- "$dir""#;

/// `cargo xtask postgres -- CMD ARGS...`: `command` (what follows the task
/// name, `--` first or not) run with a throwaway cluster's connection
/// string in [`ENV`]; its exit status, the cluster stopped and removed
/// whatever happened. `None` when there is no command.
pub fn task(args: &[String]) -> Option<ExitCode> {
    let (program, rest) = command(args)?.split_first()?;
    let cluster = match Cluster::start() {
        Ok(cluster) => cluster,
        Err(e) => {
            eprintln!("{e}");
            return Some(ExitCode::FAILURE);
        }
    };
    let (conninfo, tls) = (cluster.conninfo(), cluster.tls_conninfo());
    eprintln!(
        "$ {ENV}='{conninfo}' {ENV_TLS}='{tls}' {program} {}",
        rest.join(" ")
    );
    let status = Command::new(program)
        .args(rest)
        .env(ENV, &conninfo)
        .env(ENV_TLS, &tls)
        .status();
    drop(cluster);
    Some(match status {
        Ok(status) => exit_code(status),
        Err(e) => {
            eprintln!("{program}: {e}");
            ExitCode::FAILURE
        }
    })
}

/// `cargo xtask test`'s PostgreSQL step: the tests with the
/// `real-postgres` feature (agentrt-postgres's, the CLI's, the
/// approver's, the proxy's), against one throwaway cluster.
pub fn real_postgres_tests() -> Result<(), String> {
    let cluster = Cluster::start()?;
    let (conninfo, tls) = (cluster.conninfo(), cluster.tls_conninfo());
    let env = [(ENV, OsStr::new(&conninfo)), (ENV_TLS, OsStr::new(&tls))];
    let targets: [&[&str]; 5] = [
        &[
            "test",
            "-p",
            "agentrt-postgres",
            "--features",
            "real-postgres",
        ],
        &[
            "test",
            "-p",
            "agentrt-cli",
            "--features",
            "real-postgres",
            "--test",
            "postgres",
        ],
        &[
            "test",
            "-p",
            "agentrt-approver",
            "--features",
            "real-postgres",
            "--test",
            "postgres",
        ],
        &[
            "test",
            "-p",
            "agentrt-proxy",
            "--features",
            "real-postgres",
            "--test",
            "postgres",
        ],
        &[
            "test",
            "-p",
            "examples",
            "--features",
            "real-postgres",
            "--test",
            "postgres_demo",
        ],
    ];
    let failed: Vec<&str> = targets
        .iter()
        .filter(|args| !cargo_in(Path::new("."), args, &env))
        .map(|args| args[2])
        .collect();
    drop(cluster);
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the tests against PostgreSQL failed: {}",
            failed.join(", ")
        ))
    }
}

/// A running throwaway cluster. Dropping it stops the server and removes
/// its directory.
pub struct Cluster {
    /// The cluster's directory: its socket, `data/` and `server.log`.
    dir: PathBuf,
    /// The directory of the server programs.
    bin: PathBuf,
    /// The port of its socket and of its TCP address.
    port: u16,
    /// The system user the server programs run as; `None`: this process's.
    user: Option<&'static str>,
    /// Cleans up if this process dies before dropping the cluster.
    watchdog: Option<Child>,
}

impl Cluster {
    /// Installs PostgreSQL when it is missing (Debian's, as root), then
    /// makes a cluster in a fresh directory, starts it and waits until it
    /// accepts connections. On an error, whatever was made is removed.
    pub fn start() -> Result<Self, String> {
        let bin = ensure_bin()?;
        let user = server_user()?;
        let base = if user.is_some() {
            // The postgres user must reach it, whatever TMPDIR root has.
            PathBuf::from("/tmp")
        } else {
            base_dir(&std::env::temp_dir())
        };
        let dir = make_dir(&base)?;
        // From here on, dropping `cluster` cleans up what was made.
        let mut cluster = Self {
            dir,
            bin,
            port: free_port()?,
            user,
            watchdog: None,
        };
        make_certificates(&cluster.dir)?;
        if let Some(user) = user {
            let dir = cluster.dir.to_string_lossy();
            capture("chown", &["-R", &format!("{user}:"), &dir], Path::new("/"))?;
        }
        cluster.watchdog = Some(cluster.spawn_watchdog()?);
        let data = cluster.data().to_string_lossy().into_owned();
        cluster.server(
            "initdb",
            &[
                "-D",
                &data,
                "-U",
                NAME,
                "--auth-local=trust",
                "--auth-host=reject",
                "--encoding=UTF8",
                "--locale=C",
            ],
        )?;
        let conf = cluster.data().join("postgresql.conf");
        std::fs::OpenOptions::new()
            .append(true)
            .open(&conf)
            .and_then(|mut file| file.write_all(settings(&cluster.dir, cluster.port).as_bytes()))
            .map_err(|e| format!("{}: {e}", conf.display()))?;
        let hba = cluster.data().join("pg_hba.conf");
        std::fs::read_to_string(&hba)
            .and_then(|rules| std::fs::write(&hba, format!("{TLS_RULE}{rules}")))
            .map_err(|e| format!("{}: {e}", hba.display()))?;
        let log = cluster.log().to_string_lossy().into_owned();
        let timeout = READY_TIMEOUT.as_secs().to_string();
        cluster
            .server(
                "pg_ctl",
                &["start", "-D", &data, "-l", &log, "-w", "-t", &timeout],
            )
            .and_then(|_| cluster.wait_ready())
            .and_then(|()| {
                let host = cluster.dir.to_string_lossy();
                let port = cluster.port.to_string();
                let args = ["-h", &host, "-p", &port, "-U", NAME, NAME];
                echo_capture(&cluster.client("createdb"), &args, &cluster.dir)
            })
            .map_err(|e| cluster.with_log(&format!("PostgreSQL did not start: {e}")))?;
        Ok(cluster)
    }

    /// The libpq connection string for the cluster's database.
    pub fn conninfo(&self) -> String {
        conninfo(&self.dir, self.port)
    }

    /// The libpq connection string for the cluster's database over TLS
    /// on 127.0.0.1, the server's certificate verified against the
    /// cluster's CA.
    pub fn tls_conninfo(&self) -> String {
        tls_conninfo(&self.dir, self.port)
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn log(&self) -> PathBuf {
        self.dir.join("server.log")
    }

    /// The command line of server program `program` with `args`, through
    /// `runuser` when the server runs as another user.
    fn server_command(&self, program: &str, args: &[&str]) -> Vec<String> {
        let program = self.bin.join(program).to_string_lossy().into_owned();
        let runuser = self
            .user
            .map(|user| ["runuser", "-u", user, "--"].map(str::to_owned));
        runuser
            .into_iter()
            .flatten()
            .chain([program])
            .chain(args.iter().map(|a| (*a).to_owned()))
            .collect()
    }

    /// Runs server program `program` with `args` in the cluster's
    /// directory (the server's user may not enter ours); its stdout.
    fn server(&self, program: &str, args: &[&str]) -> Result<String, String> {
        let command = self.server_command(program, args);
        let args: Vec<&str> = command[1..].iter().map(String::as_str).collect();
        echo_capture(Path::new(&command[0]), &args, &self.dir)
    }

    /// Client program `program`: from the server's installation when it
    /// is there (Debian's `postgresql-client`), else from PATH.
    fn client(&self, program: &str) -> PathBuf {
        let beside = self.bin.join(program);
        if beside.is_file() {
            beside
        } else {
            program.into()
        }
    }

    /// Waits until the server accepts connections on its socket
    /// (`pg_isready`), for at most [`READY_TIMEOUT`].
    fn wait_ready(&self) -> Result<(), String> {
        let host = self.dir.to_string_lossy();
        let port = self.port.to_string();
        let args = ["-q", "-h", &host, "-p", &port, "-U", NAME, "-d", "postgres"];
        let program = self.client("pg_isready");
        eprintln!("$ {} {}", program.display(), args.join(" "));
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            match capture(&program, &args, &self.dir) {
                Ok(_) => return Ok(()),
                Err(e) if Instant::now() >= deadline => {
                    return Err(format!(
                        "not accepting connections after {}s: {e}",
                        READY_TIMEOUT.as_secs()
                    ));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    /// `error` followed by the server's log.
    fn with_log(&self, error: &str) -> String {
        let log = self.log();
        let text = std::fs::read_to_string(&log).unwrap_or_else(|e| format!("(unreadable: {e})"));
        format!("{error}\nthe server's log ({}):\n{text}", log.display())
    }

    /// The command line that stops the server in `mode` (`fast`: rolls
    /// back open transactions and disconnects their sessions).
    fn stop_command(&self, mode: &str) -> Vec<String> {
        let data = self.data().to_string_lossy().into_owned();
        self.server_command("pg_ctl", &["stop", "-D", &data, "-m", mode, "-w"])
    }

    /// Starts the watchdog: a shell holding the read end of a pipe only
    /// this process writes to. When the pipe ends without a `done` line,
    /// as when this process is interrupted or killed, it stops the server
    /// and removes the directory.
    fn spawn_watchdog(&self) -> Result<Child, String> {
        Command::new("sh")
            .arg("-c")
            .arg(WATCHDOG)
            .arg("sh")
            .arg(&self.dir)
            .args(self.stop_command("fast"))
            .stdin(Stdio::piped())
            .spawn()
            .map_err(|e| format!("sh (the cluster's watchdog): {e}"))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.data().join("postmaster.pid").exists() {
            for mode in ["fast", "immediate"] {
                let command = self.stop_command(mode);
                let args: Vec<&str> = command[1..].iter().map(String::as_str).collect();
                match echo_capture(Path::new(&command[0]), &args, &self.dir) {
                    Ok(_) => break,
                    Err(e) => eprintln!("stopping the PostgreSQL cluster: {e}"),
                }
            }
        }
        if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            eprintln!("removing {}: {e}", self.dir.display());
        }
        if let Some(mut watchdog) = self.watchdog.take() {
            // Done already; should the line not get through, the pipe's end
            // makes the watchdog clean up what is already clean.
            if let Some(mut stdin) = watchdog.stdin.take() {
                let _ = stdin.write_all(b"done\n");
            }
            let _ = watchdog.wait();
        }
    }
}

/// [`capture`], echoed.
fn echo_capture(program: &Path, args: &[&str], dir: &Path) -> Result<String, String> {
    eprintln!("$ {} {}", program.display(), args.join(" "));
    capture(program, args, dir)
}

/// The directory of PostgreSQL's server programs, installing Debian's
/// `postgresql` when they are missing and this runs as root.
fn ensure_bin() -> Result<PathBuf, String> {
    if let Some(bin) = find_bin() {
        return Ok(bin);
    }
    if is_root() {
        let _ = run("apt-get", &["update"], None);
        eprintln!("$ DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql");
        let _ = Command::new("apt-get")
            .args(["install", "-y", "postgresql"])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status();
    }
    find_bin().ok_or_else(|| {
        format!(
            "the PostgreSQL tests need PostgreSQL's server programs ({}) on PATH or in \
             {DEBIAN_VERSIONS}/VERSION/bin (Debian: postgresql); install them, or run \
             `cargo test --workspace` for the tests that need only Rust",
            SERVER_PROGRAMS.join(", ")
        )
    })
}

/// The directory holding all of PostgreSQL's server programs: that of the
/// `initdb` on PATH (a link followed to its installation), else Debian's
/// `/usr/lib/postgresql/<highest version>/bin`.
fn find_bin() -> Option<PathBuf> {
    let complete = |dir: &Path| SERVER_PROGRAMS.iter().all(|p| dir.join(p).is_file());
    let on_path = std::env::var_os("PATH").and_then(|path| {
        let initdb = std::env::split_paths(&path)
            .map(|dir| dir.join("initdb"))
            .find(|file| file.is_file())?;
        Some(initdb.canonicalize().ok()?.parent()?.to_path_buf())
    });
    if let Some(bin) = on_path.filter(|dir| complete(dir)) {
        return Some(bin);
    }
    let versions: Vec<String> = std::fs::read_dir(DEBIAN_VERSIONS)
        .ok()?
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|version| complete(&Path::new(DEBIAN_VERSIONS).join(version).join("bin")))
        .collect();
    let highest = highest_version(versions.iter().map(String::as_str))?;
    Some(Path::new(DEBIAN_VERSIONS).join(highest).join("bin"))
}

/// The highest of `names` that is a version (`15`, `9.6`), compared number
/// by number; the others are ignored.
fn highest_version<'a>(names: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let version = |name: &str| -> Option<Vec<u32>> {
        name.split('.').map(|part| part.parse().ok()).collect()
    };
    names
        .into_iter()
        .filter_map(|name| Some((version(name)?, name)))
        .max()
        .map(|(_, name)| name)
}

/// The system user the server programs run as: `None` (this process's
/// own) unless this runs as root; then `postgres`, created as a system
/// user when missing.
fn server_user() -> Result<Option<&'static str>, String> {
    if !is_root() {
        return Ok(None);
    }
    let exists = Command::new("id")
        .args(["-u", SYSTEM_USER])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let args = ["--system", "--user-group", "--no-create-home", SYSTEM_USER];
    if !exists && !run("useradd", &args, None) {
        return Err(format!(
            "PostgreSQL refuses to run as root, and the system user {SYSTEM_USER} could not be created"
        ));
    }
    Ok(Some(SYSTEM_USER))
}

/// The directory to make the cluster's under: `temp` when its paths need
/// no quoting (in the connection string and in postgresql.conf) and leave
/// room for the socket's, else `/tmp`.
fn base_dir(temp: &Path) -> PathBuf {
    // "/agentrt-pg-<pid>-<n>/.s.PGSQL.54329" takes at most 48 bytes.
    let plain = temp.to_str().is_some_and(|path| {
        path.len() + 48 <= SOCKET_PATH_MAX
            && path
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "/._-".contains(c))
    });
    if plain {
        temp.to_path_buf()
    } else {
        PathBuf::from("/tmp")
    }
}

/// Makes a fresh directory under `base`, readable by its owner only.
fn make_dir(base: &Path) -> Result<PathBuf, String> {
    let mut builder = std::fs::DirBuilder::new();
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    for attempt in 0..1000 {
        let dir = base.join(format!("agentrt-pg-{}-{attempt}", std::process::id()));
        match builder.create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(format!("{}: {e}", dir.display())),
        }
    }
    Err(format!(
        "no fresh directory name left in {}",
        base.display()
    ))
}

/// The lines appended to the cluster's postgresql.conf: its socket in
/// `dir` (a path that needs no quoting), on `port`, and TLS on 127.0.0.1
/// with the certificate [`make_certificates`] left in `dir`.
fn settings(dir: &Path, port: u16) -> String {
    let dir = dir.display();
    format!(
        "\n# cargo xtask: a throwaway cluster, on a unix socket and TLS on loopback\n\
         listen_addresses = '127.0.0.1'\n\
         unix_socket_directories = '{dir}'\n\
         port = {port}\n\
         ssl = on\n\
         ssl_cert_file = '{dir}/server.pem'\n\
         ssl_key_file = '{dir}/server.key'\n"
    )
}

/// The first rule of the cluster's pg_hba.conf: TCP connections on
/// loopback are trusted over TLS (initdb's `--auth-host=reject` rules,
/// after it, refuse them without).
const TLS_RULE: &str = "hostssl all all 127.0.0.1/32 trust\n";

/// A free TCP port on 127.0.0.1 (the system's pick, released at once).
fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .map_err(|e| format!("no free port on 127.0.0.1: {e}"))
}

/// A CA made for the cluster (`ca.pem`) and the server's certificate it
/// signed for `localhost` and 127.0.0.1 (`server.pem`, `server.key`), in
/// `dir`, with `openssl` (which Debian's postgresql depends on).
fn make_certificates(dir: &Path) -> Result<(), String> {
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName = DNS:localhost, IP:127.0.0.1\n\
         basicConstraints = critical, CA:FALSE\n\
         extendedKeyUsage = serverAuth\n",
    )
    .map_err(|e| format!("{}: {e}", dir.display()))?;
    const NEW_EC_KEY: [&str; 5] = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let ca = [
        &["req", "-x509"][..],
        &NEW_EC_KEY,
        &["-keyout", "ca.key", "-out", "ca.pem", "-days", "7"],
        &["-subj", "/CN=agentrt throwaway test CA"],
        &["-addext", "basicConstraints=critical,CA:TRUE"],
        &["-addext", "keyUsage=critical,keyCertSign"],
    ]
    .concat();
    let request = [
        &["req"][..],
        &NEW_EC_KEY,
        &[
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=localhost",
        ],
    ]
    .concat();
    let signed = vec![
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "7",
        "-extfile",
        "server.ext",
    ];
    let steps = [ca, request, signed];
    for args in &steps {
        capture("openssl", args, dir)
            .map_err(|e| format!("making the cluster's TLS certificate: {e}"))?;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let key = dir.join("server.key");
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| format!("{}: {e}", key.display()))?;
    }
    Ok(())
}

/// The libpq key=value connection string to the `agentrt` database, as
/// the `agentrt` role, over the socket in `dir` (a path that needs no
/// quoting).
fn conninfo(dir: &Path, port: u16) -> String {
    format!(
        "host={} port={port} user={NAME} dbname={NAME}",
        dir.display()
    )
}

/// The connection string to the same database over TLS on loopback,
/// trusting only the CA in `dir`.
fn tls_conninfo(dir: &Path, port: u16) -> String {
    format!(
        "host=localhost port={port} user={NAME} dbname={NAME} sslmode=verify-full sslrootcert={}/ca.pem",
        dir.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_highest_version_is_compared_number_by_number() {
        assert_eq!(highest_version(["9.6", "15", "13"]), Some("15"));
        assert_eq!(highest_version(["10", "9.6", "9"]), Some("10"));
        assert_eq!(highest_version(["15", "16", "notes", ""]), Some("16"));
        assert_eq!(highest_version(["README"]), None);
    }

    #[test]
    fn the_connection_string_names_the_socket_directory() {
        assert_eq!(
            conninfo(Path::new("/tmp/agentrt-pg-42-0"), 54329),
            "host=/tmp/agentrt-pg-42-0 port=54329 user=agentrt dbname=agentrt"
        );
    }

    #[test]
    fn the_settings_listen_on_the_socket_and_on_loopback_with_tls() {
        let settings = settings(Path::new("/tmp/agentrt-pg-42-0"), 54329);
        assert!(settings.contains("\nlisten_addresses = '127.0.0.1'\n"));
        assert!(settings.contains("\nunix_socket_directories = '/tmp/agentrt-pg-42-0'\n"));
        assert!(settings.contains("\nport = 54329\n"));
        assert!(settings.contains("\nssl = on\n"));
        assert!(settings.contains("\nssl_key_file = '/tmp/agentrt-pg-42-0/server.key'\n"));
        assert!(!settings.contains("fsync"));
        assert!(TLS_RULE.starts_with("hostssl "));
    }

    #[test]
    fn a_temporary_directory_needing_quotes_or_too_long_falls_back_to_tmp() {
        assert_eq!(base_dir(Path::new("/var/tmp")), Path::new("/var/tmp"));
        assert_eq!(base_dir(Path::new("/home/a b/tmp")), Path::new("/tmp"));
        assert_eq!(base_dir(Path::new("/tmp/it's")), Path::new("/tmp"));
        let long = format!("/{}", "d".repeat(60));
        assert_eq!(base_dir(Path::new(&long)), Path::new("/tmp"));
        // The 48 bytes kept hold the longest directory name and the socket.
        let longest = format!("/agentrt-pg-{}-999/.s.PGSQL.{}", u32::MAX, u16::MAX);
        assert!(longest.len() <= 48);
    }

    #[test]
    fn a_fresh_directory_is_owner_only_and_never_reused() {
        let base = tempfile::tempdir().unwrap();
        let first = make_dir(base.path()).unwrap();
        let second = make_dir(base.path()).unwrap();
        assert_ne!(first, second);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&first).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700);
        }
    }
}
