//! `agentrt-proxy` commands run in process (`cli::run`), against the MCP
//! fixture server over HTTP on 127.0.0.1: usage, pin, check, and what
//! refuses them.

use std::path::{Path, PathBuf};

use agentrt_mcp_fixture::{Mode, serve};
use agentrt_proxy::cli;

/// A configuration in a fresh directory.
struct Setup {
    dir: tempfile::TempDir,
    config: PathBuf,
}

impl Setup {
    fn new(servers: &str) -> Setup {
        let dir = tempfile::tempdir().expect("dir");
        let config = dir.path().join("proxy.json");
        std::fs::write(
            &config,
            format!(r#"{{"database": "proxy.db", "session": "laptop", "servers": [{servers}]}}"#),
        )
        .expect("config");
        Setup { dir, config }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    async fn run(&self, command: &str) -> (u8, String, String) {
        run_args(&[command, "--config", &self.config.to_string_lossy()]).await
    }
}

async fn run_args(args: &[&str]) -> (u8, String, String) {
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = cli::run(&args, &mut out, &mut err).await;
    (
        code,
        String::from_utf8_lossy(&out).into_owned(),
        String::from_utf8_lossy(&err).into_owned(),
    )
}

fn http_server(url: &str, rules: &str) -> String {
    format!(
        r#"{{"name": "fs", "endpoint": "{url}", "manifest": "fs.manifest.json", "connect_timeout": "10s", "rules": {rules}}}"#
    )
}

const READ_RULE: &str = r#"{"read_file": {"side_effect": "read_only", "timeout": "5s"}}"#;

#[cfg(unix)]
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).expect("meta").permissions().mode() & 0o777
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_goes_to_stderr_with_exit_2_help_with_exit_0() {
    let (code, out, err) = run_args(&["pin"]).await;
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert!(
        err.starts_with("agentrt-proxy: --config is required\nusage:\n"),
        "{err}"
    );
    assert!(err.contains("What it cannot govern:"), "the scope: {err}");
    let (code, _, err) = run_args(&["-h"]).await;
    assert_eq!(code, 0);
    assert!(err.starts_with("usage:\n"), "{err}");
    let (code, _, err) = run_args(&["bake", "--config", "c.json"]).await;
    assert_eq!(code, 2);
    assert!(
        err.starts_with("agentrt-proxy: unknown command \"bake\""),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_or_shared_configuration_is_an_error_line_with_exit_1() {
    let setup = Setup::new(r#"{"name": "fs", "command": ["x"], "manifest": "m.json", "extra": 1}"#);
    let (code, out, err) = setup.run("check").await;
    assert_eq!((code, out.as_str()), (1, ""));
    assert!(err.starts_with("agentrt-proxy: error: config "), "{err}");
    assert!(err.contains("unknown field `extra`"), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");

    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let setup = Setup::new(r#"{"name": "fs", "command": ["x"], "manifest": "m.json"}"#);
        std::fs::set_permissions(&setup.config, std::fs::Permissions::from_mode(0o666))
            .expect("chmod");
        let (code, _, err) = setup.run("check").await;
        assert_eq!(code, 1);
        assert!(err.contains("writable by group or others"), "{err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pin_writes_each_manifest_privately_and_shows_the_servers_own_hints() {
    let (url, _) = serve(Mode::Json).await;
    let setup = Setup::new(&http_server(&url, "{}"));
    let (code, out, err) = setup.run("pin").await;
    assert_eq!(code, 0, "{err}");
    let manifest = setup.path("fs.manifest.json");
    let config = setup.config.display();
    assert_eq!(
        out,
        format!(
            "server fs: 1 tools pinned in {}, with the server's own hints, which classify nothing:\n  \
             read_file                    readOnly                   Reads a file.\n\
             classify each tool to offer in its server's \"rules\" in {config}, then run: agentrt-proxy check --config {config}\n",
            manifest.display()
        )
    );
    #[cfg(unix)]
    assert_eq!(mode(&manifest), 0o600);
    let pinned = agentrt_mcp::read_manifest(&manifest).expect("a manifest");
    assert!(
        pinned.tools["read_file"]
            .input_schema
            .as_str()
            .contains("1e2")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_loads_as_serving_would_and_prints_each_report() {
    let (url, _) = serve(Mode::Json).await;
    let setup = Setup::new(&http_server(&url, READ_RULE));
    assert_eq!(setup.run("pin").await.0, 0);
    let (code, out, err) = setup.run("check").await;
    assert_eq!(code, 0, "{err}");
    let db = setup.path("proxy.db");
    assert_eq!(
        out,
        format!(
            "fs: registered read_file as fs_read_file (read_only)\n\
             status tool: gate_status\nsession: laptop\ndatabase: {}\n",
            db.display()
        )
    );
    #[cfg(unix)]
    assert_eq!(mode(&db), 0o600, "the database is created owner-only");

    // The same server with nothing classified registers nothing: exit 1.
    let setup_none = Setup::new(&http_server(&url, "{}"));
    assert_eq!(setup_none.run("pin").await.0, 0);
    let (code, out, _) = setup_none.run("check").await;
    assert_eq!(code, 1);
    assert!(out.contains("fs: unclassified read_file"), "{out}");
    assert!(out.contains("server fs: registers no tool\n"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_named_like_the_status_tool_refuses_the_start() {
    let (url, _) = serve(Mode::Json).await;
    let rule =
        r#"{"read_file": {"side_effect": "read_only", "timeout": "5s", "rename": "gate_status"}}"#;
    let setup = Setup::new(&http_server(&url, rule));
    assert_eq!(setup.run("pin").await.0, 0);
    let (code, _, err) = setup.run("check").await;
    assert_eq!(code, 1);
    assert!(
        err.contains(r#"the tool name "gate_status" is also the status tool's"#),
        "{err}"
    );
}

/// A configuration whose one stdio server (a program that does not exist:
/// were it started, the error would say so) gets `argument`.
fn stdio_setup(argument: impl Fn(&Path) -> String, skip_path_check: bool) -> (Setup, String) {
    let setup = Setup::new("");
    let arg = argument(setup.dir.path());
    let server = serde_json::json!({"name": "fs", "command": ["no-such-server", arg],
        "manifest": "fs.manifest.json", "skip_path_check": skip_path_check});
    std::fs::write(
        &setup.config,
        format!(r#"{{"database": "proxy.db", "session": "laptop", "servers": [{server}]}}"#),
    )
    .expect("config");
    (setup, arg)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_whose_arguments_reach_the_proxys_files_is_never_started() {
    let reaching: [fn(&Path) -> String; 4] = [
        |dir| format!("--root={}", dir.display()),
        |dir| format!("-r{}/..", dir.display()),
        |dir| dir.join("proxy.db").display().to_string(),
        |dir| format!("file://{}", dir.join("fs.manifest.json").display()),
    ];
    for argument in reaching {
        let (setup, arg) = stdio_setup(argument, false);
        for command in ["pin", "check"] {
            let (code, _, err) = setup.run(command).await;
            assert_eq!(code, 1, "{arg}: {err}");
            assert!(
                err.contains(&format!("server \"fs\": argument {arg:?} reaches")),
                "{arg} {command}: {err}"
            );
        }
    }
    // A sibling directory reaches nothing, and skip_path_check skips the
    // check: the server is started (and fails, as it does not exist).
    let (setup, _) = stdio_setup(
        |dir| {
            let sandbox = dir.join("sandbox");
            std::fs::create_dir(&sandbox).expect("sandbox");
            sandbox.display().to_string()
        },
        false,
    );
    let (code, _, err) = setup.run("pin").await;
    assert_eq!(code, 1);
    assert!(err.contains(r#"cannot start "no-such-server""#), "{err}");
    let (setup, _) = stdio_setup(|dir| dir.display().to_string(), true);
    let (code, _, err) = setup.run("pin").await;
    assert_eq!(code, 1);
    assert!(err.contains(r#"cannot start "no-such-server""#), "{err}");
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_named_by_a_symlink_is_refused() {
    let (url, _) = serve(Mode::Json).await;
    let setup = Setup::new(&http_server(&url, READ_RULE));
    assert_eq!(setup.run("pin").await.0, 0);
    std::fs::write(setup.path("real.db"), "").expect("file");
    std::os::unix::fs::symlink(setup.path("real.db"), setup.path("proxy.db")).expect("link");
    let (code, _, err) = setup.run("check").await;
    assert_eq!(code, 1);
    assert!(
        err.contains("is a symbolic link; name the database file itself"),
        "{err}"
    );
    // A directory is not a database either.
    std::fs::remove_file(setup.path("proxy.db")).expect("unlink");
    std::fs::create_dir(setup.path("proxy.db")).expect("dir");
    let (code, _, err) = setup.run("check").await;
    assert_eq!(code, 1);
    assert!(err.contains("is not a regular file"), "{err}");
}
