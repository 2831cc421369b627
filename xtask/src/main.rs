//! Maintenance tasks: `cargo xtask <task>`.
//!
//! - `test`: the whole test suite: `cargo test --workspace`, the proxy's
//!   overhead benchmark in test mode, then the tests against real components (agentrt-mcp's `filesystem_server`,
//!   the mcp example's `mcp_demo`, agentrt-proxy's `python_host` and
//!   `oidc_host`, the last with npm `oidc-provider` as the OpenID provider), after
//!   installing what they need (Node.js, and Python with venv, from Debian
//!   when missing and run as root; the npm MCP filesystem server, pinned by
//!   its lockfile, and the Python MCP SDK, pinned with hashes, into
//!   `target/`), and the approval page's tests in headless Chromium
//!   (Debian's `chromium` and `chromium-driver`, installed when missing
//!   and run as root; screenshots in `target/browser-screenshots`), and the
//!   OpenTelemetry exporter against a real OTLP receiver (OtelTap, pinned
//!   with hashes, into `target/real-receiver/venv`), and the demo's
//!   approval e-mailed through aiosmtpd (pinned with hashes, into
//!   `target/real-smtp/venv`) and approved in Chromium, and agentrt-postgres
//!   against a throwaway PostgreSQL cluster (Debian's `postgresql`
//!   installed when missing and run as root; see `postgres`), then
//!   `install-test`.
//! - `postgres -- CMD ARGS...`: CMD run with a throwaway PostgreSQL
//!   cluster's connection string in `AGENTRT_TEST_POSTGRES`: initdb into a
//!   fresh temporary directory, a unix socket there only, stopped and
//!   removed after CMD, whose exit status it returns.
//! - `ci`: format check, clippy with warnings as errors, `release-check`,
//!   the whole test suite.
//! - `release-check`: every published crate packaged, built and unit-tested
//!   from its package alone; exact pins that agree; a changelog section per
//!   crate version; the MSRV; the tags a release would create.
//! - `release CRATE VERSION`: one crate's version, the pins that follow it,
//!   its changelog section and the lock, in a clean tree.
//! - `fuzz [--cases N] [--seed S] [PACKAGE...]`: every package's `fuzz`
//!   test target (the parsers that read outside input) in release mode
//!   with many more cases than `cargo test` runs (see `fuzz`).
//! - `bench-proxy [--rounds N] [--warmup N] [--dir DIR] [--durability
//!   full|normal] [--relay] [--proxy BIN]`: the proxy's overhead as a host sees it (the Python
//!   SDK over stdio, the npm filesystem server, direct and through the
//!   release build alternating with a raw commit), p50/p99 at each
//!   durability, and a byte relay in the proxy's place: the floor of any
//!   stdio proxy (see `bench_proxy`). Not part of CI.
//! - `relay -- CMD ARGS...`: CMD behind a relay that only copies bytes
//!   both ways (see `relay`); what `bench-proxy` measures as the floor.
//! - `mutants`: cargo-mutants over the files that hold the controls that
//!   matter most. Slow on two cores, so it is run by hand, not in CI.

mod bench_proxy;
mod child;
mod fuzz;
mod install_test;
mod postgres;
mod relay;
mod release;

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};

const USAGE: &str = "usage: cargo xtask <task> [args]

tasks:
  test     the whole test suite: cargo test --workspace, the proxy's
           overhead benchmark in test mode, then the tests
           against real components (installs Node.js and Python 3.10+
           with venv from Debian when missing and this runs as root, the
           pinned npm MCP filesystem server into target/real-servers and
           the pinned Python MCP SDK into target/real-hosts/venv), the
           proxy's OAuth with a real OpenID provider (npm oidc-provider,
           pinned, into target/real-servers/oidc) and the SDK's OAuth
           client, the approval page in headless Chromium (chromium and
           chromium-driver from Debian when missing, as root), and the
           OTel exporter against OtelTap (target/real-receiver/venv),
           notify's e-mail through aiosmtpd (target/real-smtp/venv),
           and agentrt-postgres against a throwaway PostgreSQL cluster
           (postgresql from Debian when missing, as root; see postgres),
           then install-test
  postgres -- CMD [ARGS...]
           CMD run with a throwaway PostgreSQL cluster's libpq connection
           string in AGENTRT_TEST_POSTGRES: initdb into a fresh directory
           under the temporary directory, listening on a unix socket there
           only (as the postgres user when run as root), stopped and
           removed after CMD; exits with CMD's status. PostgreSQL's server
           programs on PATH or in /usr/lib/postgresql/VERSION/bin (Debian's
           postgresql installed when missing, as root).
           e.g. cargo xtask postgres -- cargo test -p agentrt-postgres \\
                  --features real-postgres
  install-test
           cargo install --path of the CLI and the proxy into
           target/install-test (the debug build), then the installed
           binaries run from another directory against the demo's
           database: list, approve, verify; then the installed proxy
           before the npm filesystem server: pin, check, one call over
           stdio, its run completed and verified
  release-check [--allow-dirty]
           every published crate packaged (cargo package), then built and
           its unit tests run from the unpacked packages alone
           (target/release-check); satellites pin our crates exactly and
           the pins agree; a CHANGELOG.md section per crate version; no
           dependency needs a newer Rust than rust-version (and the
           workspace checked with that toolchain when rustup has it);
           prints the tags a release would create
  release CRATE VERSION
           in a clean tree: CRATE's version, the exact pins on it, its
           CHANGELOG.md section (from `### CRATE` under `## Unreleased` to
           `## CRATE VERSION (date)`) and Cargo.lock; commits and tags
           nothing
  ci       format check, clippy -D warnings, release-check, the whole
           test suite (test)
  fuzz [--cases N] [--seed S] [PACKAGE...]
           every package's `fuzz` test target (property tests over the
           parsers that read outside input; each runs 10 000 cases in
           `cargo test`), in release mode with N cases per property
           (default 200 000) and seed S (a fresh one, printed, by
           default); only the PACKAGEs named when some are
  bench-proxy [--rounds N] [--warmup N] [--dir DIR] [--durability full|normal]
              [--relay] [--proxy BIN]
           the proxy's overhead as a host sees it: the Python MCP SDK
           calls the npm filesystem server's read_text_file over stdio,
           directly and through the release build of agentrt-proxy serve,
           alternating with a raw SQLite commit in DIR (default
           target/bench-proxy; a tmpfs directory measures without the
           disk), N rounds (default 300) after 30 unmeasured, at FULL and
           NORMAL, then through a relay that only copies bytes (the floor
           of any stdio proxy; all three by default, only those named
           when --durability or --relay is given); BIN in place of the
           release build (to compare builds); prints p50/p99 and the
           targets. Installs what it needs as test does; not part of CI
  relay -- CMD [ARGS...]
           CMD with its standard input and output relayed, bytes copied
           both ways as they arrive and nothing else: what bench-proxy
           measures as the floor of a stdio proxy
  mutants  cargo mutants -p agentrt over the control files, with only the
           core's tests, reusing target/ (--copy-target=true); any further
           arguments go to cargo mutants. With --file only the files named
           are mutated; arguments after `--` go to cargo test. Needs
           `cargo install cargo-mutants`.
           e.g. cargo xtask mutants --file crates/agentrt/src/operator.rs \\
                  -- --test approvals --test operator_rows";

/// The files `cargo xtask mutants` mutates unless `--file` is given.
const CONTROLS: [&str; 9] = [
    "crates/agentrt/src/approval.rs",
    "crates/agentrt/src/operator.rs",
    "crates/agentrt/src/chain.rs",
    "crates/agentrt/src/verify.rs",
    "crates/agentrt/src/verify/**/*.rs",
    "crates/agentrt/src/gate/execute.rs",
    "crates/agentrt/src/gate/verdicts.rs",
    "crates/agentrt/src/gate/takeover.rs",
    "crates/agentrt/src/budget/caller.rs",
];

/// The cargo running this task (`cargo` when not run by cargo).
fn cargo_path() -> std::path::PathBuf {
    std::env::var_os("CARGO").map_or_else(|| "cargo".into(), Into::into)
}

fn cargo_command() -> Command {
    Command::new(cargo_path())
}

fn cargo(args: &[&str]) -> bool {
    cargo_in(Path::new("."), args, &[])
}

/// `cargo args` in `dir`, with one more environment variable when given;
/// echoed as run. Whether it succeeded.
fn cargo_in(dir: &Path, args: &[&str], env: &[(&str, &OsStr)]) -> bool {
    let cd = if dir == Path::new(".") {
        String::new()
    } else {
        format!("(cd {}) ", dir.display())
    };
    let set: String = env
        .iter()
        .map(|(name, value)| format!("{name}={} ", value.to_string_lossy()))
        .collect();
    eprintln!("$ {cd}{set}cargo {}", args.join(" "));
    let mut command = cargo_command();
    command.args(args).current_dir(dir);
    command.envs(env.iter().copied());
    command.status().is_ok_and(|s| s.success())
}

/// `program args` in `dir`: its stdout when it succeeds, else an error
/// holding its exit status and both outputs.
fn capture(
    program: impl AsRef<std::ffi::OsStr>,
    args: &[&str],
    dir: &Path,
) -> Result<String, String> {
    let program = program.as_ref();
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(|e| format!("{}: {e}", program.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        return Err(format!(
            "{} {} exited with {}: {}{}",
            program.display(),
            args.join(" "),
            out.status,
            stdout,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(stdout)
}

/// The cargo-mutants arguments: the core package, its tests only, the
/// control files and a copy of target/ unless the caller chooses, then the
/// caller's own.
fn mutants_args(extra: &[String]) -> Vec<&str> {
    let given = |prefixes: &[&str]| {
        extra
            .iter()
            .take_while(|a| *a != "--")
            .any(|a| prefixes.iter().any(|p| a.starts_with(p)))
    };
    let mut args = vec!["mutants", "--package", "agentrt", "--test-workspace=false"];
    if !given(&["--copy-target"]) {
        args.push("--copy-target=true");
    }
    if !given(&["--file", "-f"]) {
        for file in CONTROLS {
            args.extend(["--file", file]);
        }
    }
    args.extend(extra.iter().map(String::as_str));
    args
}

fn mutants(extra: &[String]) -> ExitCode {
    let installed = cargo_command()
        .args(["mutants", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !installed {
        eprintln!(
            "cargo-mutants is not installed; install it with:\n  cargo install cargo-mutants"
        );
        return ExitCode::FAILURE;
    }
    if cargo(&mutants_args(extra)) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The oldest Node.js major version the npm MCP servers run on.
const NODE_MAJOR: u32 = 20;

/// The major version of the `node` on PATH, if there is one.
fn node_major() -> Option<u32> {
    let out = Command::new("node").arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim()
        .trim_start_matches('v')
        .split('.')
        .next()?
        .parse()
        .ok()
}

fn run(program: &str, args: &[&str], dir: Option<&std::path::Path>) -> bool {
    eprintln!("$ {program} {}", args.join(" "));
    let mut command = Command::new(program);
    command.args(args);
    if let Some(dir) = dir {
        command.current_dir(dir);
    }
    command.status().map(|s| s.success()).unwrap_or(false)
}

/// Whether this runs as root (and so may install Debian packages).
fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Whether `program --version` runs.
fn runs(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Chromium and its WebDriver, from Debian when missing and this runs as
/// root: the approval page's browser tests.
fn ensure_chromium() -> Result<(), String> {
    let present = || runs("chromium") && runs("chromedriver");
    if present() {
        return Ok(());
    }
    if is_root() {
        let _ = run("apt-get", &["update"], None);
        let _ = run(
            "apt-get",
            &["install", "-y", "chromium", "chromium-driver"],
            None,
        );
    }
    if present() {
        Ok(())
    } else {
        Err(
            "the browser tests need Chromium and chromedriver (Debian: chromium chromium-driver); \
             install them, or run `cargo test --workspace` for the tests that need only Rust"
                .into(),
        )
    }
}

/// The `openssl` command (the e-mail test makes its private CA with it),
/// from Debian when missing and this runs as root.
fn ensure_openssl() -> Result<(), String> {
    let present = || {
        Command::new("openssl")
            .arg("version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !present() && is_root() {
        let _ = run("apt-get", &["update"], None);
        let _ = run("apt-get", &["install", "-y", "openssl"], None);
    }
    if present() {
        Ok(())
    } else {
        Err("the e-mail test needs the openssl command (Debian: openssl)".into())
    }
}

/// Node.js, installed from Debian when missing and this runs as root.
fn ensure_node() -> Result<(), String> {
    if node_major().is_some_and(|m| m >= NODE_MAJOR) {
        return Ok(());
    }
    if is_root() {
        let _ = run("apt-get", &["update"], None);
        let _ = run("apt-get", &["install", "-y", "nodejs", "npm"], None);
    }
    match node_major() {
        Some(m) if m >= NODE_MAJOR => Ok(()),
        found => Err(format!(
            "the real-server tests need Node.js {NODE_MAJOR} or newer with npm (found: {}); \
             install it, or run `cargo test --workspace` for the tests that need only Rust",
            found.map_or("none".to_owned(), |m| format!("v{m}"))
        )),
    }
}

/// Installs the npm MCP servers (`npm ci --ignore-scripts`, from the
/// committed lockfile) into `target/real-servers/npm`; returns that
/// directory.
fn install_npm_servers() -> Result<std::path::PathBuf, String> {
    install_npm(
        Path::new("crates/agentrt-mcp/tests/npm"),
        Path::new("target/real-servers/npm"),
        &[],
    )
}

/// Node.js and the npm filesystem server (see [`install_npm_servers`]);
/// the server's entry point.
fn filesystem_server() -> Result<std::path::PathBuf, String> {
    ensure_node()?;
    let npm = install_npm_servers()?;
    Ok(npm.join("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"))
}

/// Installs the OpenID provider of the OAuth tests (npm `oidc-provider`,
/// from `crates/agentrt-proxy/tests/oidc`'s lockfile) with its script into
/// `target/real-servers/oidc`; returns the script's path.
fn install_oidc_provider() -> Result<std::path::PathBuf, String> {
    let dir = install_npm(
        Path::new("crates/agentrt-proxy/tests/oidc"),
        Path::new("target/real-servers/oidc"),
        &["provider.mjs"],
    )?;
    Ok(dir.join("provider.mjs"))
}

/// `npm ci --ignore-scripts` of `source`'s package files (and `extra`
/// files copied beside them) in `dir`; returns `dir`, absolute.
fn install_npm(source: &Path, dir: &Path, extra: &[&str]) -> Result<std::path::PathBuf, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for file in ["package.json", "package-lock.json"].iter().chain(extra) {
        std::fs::copy(source.join(file), dir.join(file))
            .map_err(|e| format!("copying {}: {e}", source.join(file).display()))?;
    }
    if !run(
        "npm",
        &["ci", "--ignore-scripts", "--no-audit", "--no-fund"],
        Some(dir),
    ) {
        return Err(format!("npm ci in {} failed", dir.display()));
    }
    dir.canonicalize()
        .map_err(|e| format!("{}: {e}", dir.display()))
}

/// Runs `program` with `args` in `dir`; its stdout, or why it failed.
/// A step's outcome as an exit code, its error printed.
fn exit(outcome: Result<(), String>) -> ExitCode {
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// `cargo args`, failing with `what` when it does not succeed.
fn cargo_step(args: &[&str], what: &str) -> Result<(), String> {
    if cargo(args) {
        Ok(())
    } else {
        Err(format!("{what} failed"))
    }
}

/// The whole test suite.
fn test() -> ExitCode {
    exit(test_steps())
}

fn test_steps() -> Result<(), String> {
    cargo_step(&["test", "--workspace"], "cargo test --workspace")?;
    // The proxy's overhead benchmark in criterion's test mode: every path
    // once and a short table, each answer checked (the figures come from
    // `cargo bench`).
    cargo_step(
        &["test", "-p", "agentrt-proxy", "--bench", "overhead"],
        "the proxy's overhead benchmark in test mode",
    )?;
    // The Cedar decision benchmark in test mode: each size once, its
    // outcome checked.
    cargo_step(
        &["test", "-p", "agentrt-cedar", "--bench", "decision"],
        "the Cedar decision benchmark in test mode",
    )?;
    let entry = filesystem_server()?;
    // The mcp example's test approves with the `agentrt` binary, found
    // beside it in target/: build it first.
    let servers = real_server_test(&entry, "agentrt-mcp", "filesystem_server")
        && cargo(&["build", "-p", "agentrt-cli"])
        && real_server_test(&entry, "examples", "mcp_demo");
    if !servers {
        return Err("the tests against the real MCP filesystem server failed".into());
    }
    let base = ensure_python()?;
    let python = install_python_host(&base)?;
    if !real_host_test(&entry, &python) {
        return Err("the tests with the Python MCP client as host failed".into());
    }
    // The proxy as an OAuth resource: a real OpenID provider (npm
    // oidc-provider) and the Python SDK's OAuth client as host.
    let provider = install_oidc_provider()?;
    let signed_in = cargo_in(
        Path::new("."),
        &[
            "test",
            "-p",
            "agentrt-proxy",
            "--features",
            "real-oidc",
            "--test",
            "oidc_host",
        ],
        &[
            ("AGENTRT_OIDC_PROVIDER", provider.as_os_str()),
            ("AGENTRT_PYTHON_HOST", python.as_os_str()),
        ],
    );
    if !signed_in {
        return Err("the OAuth tests (oidc-provider, the Python SDK's OAuth client) failed".into());
    }
    let receiver = install_receiver(&base)?;
    let received = cargo_in(
        Path::new("."),
        &[
            "test",
            "-p",
            "agentrt-export-otel",
            "--features",
            "real-receiver",
            "--test",
            "receiver",
        ],
        &[("AGENTRT_OTELTAP_PYTHON", receiver.as_os_str())],
    );
    if !received {
        return Err("the tests against the OTLP receiver failed".into());
    }
    ensure_chromium()?;
    // Headless Chromium over WebDriver against the approval page;
    // screenshots land in target/browser-screenshots.
    cargo_step(
        &[
            "test",
            "-p",
            "agentrt-approver",
            "--features",
            "browser",
            "--test",
            "browser",
        ],
        "the browser tests",
    )?;
    // Approvers who sign in: Chromium at the real OpenID provider.
    let signed_in = cargo_in(
        Path::new("."),
        &[
            "test",
            "-p",
            "agentrt-approver",
            "--features",
            "browser,real-oidc",
            "--test",
            "sign_in",
        ],
        &[("AGENTRT_OIDC_PROVIDER", provider.as_os_str())],
    );
    if !signed_in {
        return Err("the sign-in tests (oidc-provider, Chromium) failed".into());
    }
    // "Being told, and deciding": the demo's approval e-mailed through
    // aiosmtpd (pinned with hashes, target/real-smtp/venv), its link
    // approved in headless Chromium.
    ensure_openssl()?;
    let smtp = install_venv(
        &base,
        "crates/agentrt-approver/tests/smtp/requirements.txt",
        "target/real-smtp",
        ("aiosmtpd", "1.4.6"),
    )?;
    let mailed = cargo_in(
        Path::new("."),
        &[
            "test",
            "-p",
            "examples",
            "--features",
            "real-smtp",
            "--test",
            "notify_email",
        ],
        &[("AGENTRT_AIOSMTPD_PYTHON", smtp.as_os_str())],
    );
    if !mailed {
        return Err("the e-mail notification test (aiosmtpd, Chromium) failed".into());
    }
    // agentrt-postgres against a throwaway cluster, stopped whatever the
    // tests do.
    postgres::real_postgres_tests()?;
    install_test::install_test().map_err(|e| format!("install test: {e}"))
}

/// The oldest Python the MCP host's requirements install on.
const PYTHON_MIN: (u32, u32) = (3, 10);

/// The version of `python` and whether it can make a venv with pip in it
/// (Debian's python3 needs python3-venv for ensurepip).
fn python_with_venv(python: &str) -> Option<((u32, u32), bool)> {
    let out = Command::new(python)
        .args([
            "-c",
            "import sys; print(sys.version_info[0], sys.version_info[1])",
        ])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut parts = text.split_whitespace().map(str::parse::<u32>);
    let version = (parts.next()?.ok()?, parts.next()?.ok()?);
    let venv = Command::new(python)
        .args(["-c", "import venv, ensurepip"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    Some((version, venv))
}

/// Python 3.10 or newer with venv (`python3`), installed from Debian when
/// missing and this runs as root; returns the program to run.
fn ensure_python() -> Result<String, String> {
    let python = "python3";
    let good = |found: Option<((u32, u32), bool)>| {
        found.is_some_and(|(version, venv)| version >= PYTHON_MIN && venv)
    };
    if good(python_with_venv(python)) {
        return Ok(python.to_owned());
    }
    if is_root() {
        let _ = run("apt-get", &["update"], None);
        let _ = run(
            "apt-get",
            &["install", "-y", "python3", "python3-venv"],
            None,
        );
    }
    let found = python_with_venv(python);
    if good(found) {
        return Ok(python.to_owned());
    }
    let (major, minor) = PYTHON_MIN;
    Err(format!(
        "the real-host tests need Python {major}.{minor} or newer with venv (found: {}); \
         install it (Debian: python3 python3-venv), or run `cargo test --workspace` \
         for the tests that need only Rust",
        match found {
            Some(((a, b), true)) => format!("{a}.{b}"),
            Some(((a, b), false)) => format!("{a}.{b} without venv/ensurepip"),
            None => "none".to_owned(),
        }
    ))
}

/// Installs the Python MCP SDK, pinned with hashes by
/// `crates/agentrt-proxy/tests/host/requirements.txt`, into a venv at
/// `target/real-hosts/venv` (`pip install --require-hashes --no-deps`, then
/// `pip check`); returns the venv's python. A venv whose stamp holds the
/// same requirements and whose python finds mcp 2.3.0 is kept as it is.
fn install_python_host(python: &str) -> Result<std::path::PathBuf, String> {
    install_venv(
        python,
        "crates/agentrt-proxy/tests/host/requirements.txt",
        "target/real-hosts",
        ("mcp", "2.3.0"),
    )
}

/// Installs the OTLP receiver the export tests send to (OtelTap, pinned
/// with hashes) into `target/real-receiver/venv`; returns the venv's
/// python.
fn install_receiver(python: &str) -> Result<std::path::PathBuf, String> {
    install_venv(
        python,
        "crates/agentrt-export-otel/tests/receiver/requirements.txt",
        "target/real-receiver",
        ("oteltap", "1.0.0"),
    )
}

/// Installs `requirements` (pinned with hashes) into `<dir>/venv`, unless
/// the venv already holds exactly them (a stamp beside it, and the
/// `package` at `version`); returns the venv's python.
fn install_venv(
    python: &str,
    requirements: &str,
    dir: &str,
    (package, version): (&str, &str),
) -> Result<std::path::PathBuf, String> {
    let requirements = std::path::Path::new(requirements);
    let wanted =
        std::fs::read(requirements).map_err(|e| format!("{}: {e}", requirements.display()))?;
    let dir = std::path::Path::new(dir);
    let venv = dir.join("venv");
    let venv = venv.as_path();
    let stamp = dir.join("venv.requirements.txt");
    let stamp = stamp.as_path();
    // The venv's own python: its path, not the file the link leads to
    // (that is the base python, outside the venv).
    let venv_python = |venv: &std::path::Path| {
        if cfg!(windows) {
            venv.join("Scripts").join("python.exe")
        } else {
            venv.join("bin").join("python")
        }
    };
    let check = format!(
        "import importlib.metadata as m, sys; sys.exit(m.version('{package}') != '{version}')"
    );
    let has_package = || {
        Command::new(venv_python(venv))
            .args(["-c", &check])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let current = std::fs::read(stamp).is_ok_and(|s| s == wanted) && has_package();
    if !current {
        let _ = std::fs::remove_file(stamp);
        if venv.exists() {
            std::fs::remove_dir_all(venv).map_err(|e| format!("{}: {e}", venv.display()))?;
        }
        let venv_arg = venv.to_string_lossy();
        let requirements_arg = requirements.to_string_lossy();
        let pip = venv_python(venv);
        let pip = pip.to_string_lossy();
        let ok = run(python, &["-m", "venv", &venv_arg], None)
            && run(
                &pip,
                &[
                    "-m",
                    "pip",
                    "install",
                    "--disable-pip-version-check",
                    "--require-hashes",
                    "--no-deps",
                    "-r",
                    &requirements_arg,
                ],
                None,
            )
            && run(&pip, &["-m", "pip", "check"], None)
            && has_package();
        if !ok {
            return Err(format!(
                "installing {} into {} failed",
                requirements.display(),
                venv.display()
            ));
        }
        std::fs::write(stamp, &wanted).map_err(|e| format!("{}: {e}", stamp.display()))?;
    }
    let dir = venv
        .canonicalize()
        .map_err(|e| format!("{}: {e}", venv.display()))?;
    Ok(venv_python(&dir))
}

/// Runs agentrt-proxy's `python_host` target, with the `real-hosts`
/// feature, the venv's python in `AGENTRT_PYTHON_HOST` and the npm
/// filesystem server's entry point in `AGENTRT_MCP_FILESYSTEM_SERVER`.
fn real_host_test(entry: &std::path::Path, python: &std::path::Path) -> bool {
    let args = [
        "test",
        "-p",
        "agentrt-proxy",
        "--features",
        "real-hosts",
        "--test",
        "python_host",
    ];
    eprintln!(
        "$ AGENTRT_PYTHON_HOST={} AGENTRT_MCP_FILESYSTEM_SERVER={} cargo {}",
        python.display(),
        entry.display(),
        args.join(" ")
    );
    cargo_command()
        .args(args)
        .env("AGENTRT_PYTHON_HOST", python)
        .env("AGENTRT_MCP_FILESYSTEM_SERVER", entry)
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs one test target of `package` that needs the npm filesystem server,
/// with the `real-servers` feature and the server's entry point in
/// `AGENTRT_MCP_FILESYSTEM_SERVER`.
fn real_server_test(entry: &std::path::Path, package: &str, target: &str) -> bool {
    let args = [
        "test",
        "-p",
        package,
        "--features",
        "real-servers",
        "--test",
        target,
    ];
    eprintln!(
        "$ AGENTRT_MCP_FILESYSTEM_SERVER={} cargo {}",
        entry.display(),
        args.join(" ")
    );
    cargo_command()
        .args(args)
        .env("AGENTRT_MCP_FILESYSTEM_SERVER", entry)
        .status()
        .is_ok_and(|s| s.success())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let task = args.first().map(String::as_str).unwrap_or_default();
    match task {
        "ci" => {
            let steps: [&[&str]; 2] = [
                &["fmt", "--all", "--", "--check"],
                &[
                    "clippy",
                    "--workspace",
                    "--all-targets",
                    "--all-features",
                    "--",
                    "-D",
                    "warnings",
                ],
            ];
            if steps.iter().all(|s| cargo(s)) {
                match release::release_check(Path::new("."), false) {
                    Ok(()) => test(),
                    Err(e) => exit(Err(e)),
                }
            } else {
                ExitCode::FAILURE
            }
        }
        "test" => test(),
        "install-test" => {
            exit(install_test::install_test().map_err(|e| format!("install test: {e}")))
        }
        "release-check" => {
            let allow_dirty = match &args[1..] {
                [] => false,
                [flag] if flag == "--allow-dirty" => true,
                _ => return usage_error(),
            };
            exit(release::release_check(Path::new("."), allow_dirty))
        }
        "release" => match &args[1..] {
            [name, version] => exit(release::release(
                Path::new("."),
                name,
                version,
                &release::today(),
            )),
            _ => usage_error(),
        },
        "mutants" => mutants(&args[1..]),
        "fuzz" => exit(fuzz::fuzz(&args[1..])),
        "bench-proxy" => exit(bench_proxy::bench_proxy(&args[1..])),
        "relay" => relay::relay(&args[1..]).unwrap_or_else(|e| {
            eprintln!("{e}");
            ExitCode::FAILURE
        }),
        "postgres" => postgres::task(&args[1..]).unwrap_or_else(usage_error),
        "-h" | "--help" | "help" => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        other => {
            eprintln!("unknown task {other:?}");
            usage_error()
        }
    }
}

fn usage_error() -> ExitCode {
    eprintln!("{USAGE}");
    ExitCode::from(2)
}
