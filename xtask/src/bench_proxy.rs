//! `cargo xtask bench-proxy`: the proxy's overhead as a host sees it. The
//! official Python SDK (`tests/host/bench.py`) calls the npm filesystem
//! server's `read_text_file` over stdio directly and through the release
//! build of `agentrt-proxy serve`, alternating round by round with a raw
//! SQLite commit in the same directory, at each durability; then through
//! `cargo xtask relay` in the proxy's place, which only copies bytes: the
//! part of the overhead any stdio proxy pays. Printed as p50/p99 per call
//! and against issue 38's targets. Not part of CI's pass/fail: figures
//! depend on the machine.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

/// The mode with the byte relay in the proxy's place.
const RELAY: &str = "relay";

/// What one invocation measures.
struct Options {
    rounds: usize,
    warmup: usize,
    dir: PathBuf,
    /// What stands between the host and the server, in order: the proxy
    /// at a durability (`full`, `normal`) or the byte relay (`relay`).
    modes: Vec<&'static str>,
    /// A proxy binary to measure in place of the release build (another
    /// build, to compare).
    proxy: Option<PathBuf>,
}

fn options(args: &[String]) -> Result<Options, String> {
    let mut options = Options {
        rounds: 300,
        warmup: 30,
        dir: PathBuf::from("target/bench-proxy"),
        modes: Vec::new(),
        proxy: None,
    };
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        let mut value = || {
            args.next()
                .ok_or_else(|| format!("{flag} needs a value"))
                .cloned()
        };
        match flag.as_str() {
            "--rounds" => options.rounds = count(flag, &value()?)?,
            "--warmup" => options.warmup = count(flag, &value()?)?,
            "--dir" => options.dir = PathBuf::from(value()?),
            "--proxy" => options.proxy = Some(PathBuf::from(value()?)),
            "--durability" => {
                let mode = match value()?.as_str() {
                    "full" => "full",
                    "normal" => "normal",
                    other => return Err(format!("--durability {other:?}: full or normal")),
                };
                if !options.modes.contains(&mode) {
                    options.modes.push(mode);
                }
            }
            "--relay" if !options.modes.contains(&RELAY) => options.modes.push(RELAY),
            "--relay" => {}
            other => return Err(format!("bench-proxy: unknown argument {other:?}")),
        }
    }
    if options.rounds == 0 {
        return Err("--rounds: at least 1".into());
    }
    if options.modes.is_empty() {
        options.modes = vec!["full", "normal", RELAY];
    }
    Ok(options)
}

fn count(flag: &str, text: &str) -> Result<usize, String> {
    text.parse()
        .map_err(|_| format!("{flag} {text:?}: a whole number"))
}

/// The task: installs what it needs, builds the proxy (unless only the
/// relay is measured), measures each mode and prints the table.
pub(crate) fn bench_proxy(args: &[String]) -> Result<(), String> {
    let options = options(args)?;
    let server = super::filesystem_server()?;
    let python = super::install_python_host(&super::ensure_python()?)?;
    let proxy = if options.modes.iter().any(|m| *m != RELAY) {
        let proxy = match &options.proxy {
            Some(proxy) => proxy.clone(),
            None => {
                super::cargo_step(
                    &[
                        "build",
                        "--release",
                        "-p",
                        "agentrt-proxy",
                        "--bin",
                        "agentrt-proxy",
                    ],
                    "building agentrt-proxy (release)",
                )?;
                PathBuf::from("target/release/agentrt-proxy")
            }
        };
        Some(
            proxy
                .canonicalize()
                .map_err(|e| format!("{}: {e}", proxy.display()))?,
        )
    } else {
        None
    };
    let script = Path::new("crates/agentrt-proxy/tests/host/bench.py")
        .canonicalize()
        .map_err(|e| format!("bench.py: {e}"))?;
    let relay = std::env::current_exe().map_err(|e| format!("this program's path: {e}"))?;
    let mut reports = Vec::new();
    for mode in &options.modes {
        let dir = options.dir.join(mode);
        let between = match *mode {
            RELAY => Between::Relay(&relay),
            durability => match &proxy {
                Some(proxy) => Between::Proxy(proxy, durability),
                None => return Err("no proxy to measure".into()),
            },
        };
        let samples = measure(&options, &dir, between, &server, &python, &script)?;
        reports.push((mode, Report::of(&samples)?));
    }
    println!(
        "\n{} rounds after {} unmeasured; ms per call; {}; the database in {}\n",
        options.rounds,
        options.warmup,
        proxy
            .as_deref()
            .map_or_else(|| "no proxy".to_owned(), |p| p.display().to_string()),
        options.dir.display()
    );
    println!(
        "| through | direct p50 / p99 | through p50 / p99 | overhead p50 / p99 | raw commit p50 | target (overhead p50) |"
    );
    println!("|---|---|---|---|---|---|");
    for (mode, r) in reports {
        let (label, target) = match *mode {
            "full" => (
                "the proxy, FULL",
                format!("≤ 2 × raw + 0.3 = {:.3}", 2.0 * r.raw.0 + 0.3),
            ),
            RELAY => (
                "a byte relay (raw at NORMAL)",
                "none: the floor of a stdio proxy".to_owned(),
            ),
            _ => ("the proxy, NORMAL", "≤ 0.5".to_owned()),
        };
        println!(
            "| {label} | {:.3} / {:.3} | {:.3} / {:.3} | **{:.3}** / {:.3} | {:.3} | {target} |",
            r.direct.0, r.direct.1, r.through.0, r.through.1, r.overhead.0, r.overhead.1, r.raw.0,
        );
    }
    Ok(())
}

/// What the calls measured "through" go through.
#[derive(Clone, Copy)]
enum Between<'a> {
    /// This proxy binary, at this durability.
    Proxy(&'a Path, &'a str),
    /// `xtask relay` (this program).
    Relay(&'a Path),
}

/// One mode's rounds: a fresh directory with the files, the proxy's
/// configuration (pinned) when it is the proxy, then bench.py's samples.
fn measure(
    options: &Options,
    dir: &Path,
    between: Between<'_>,
    server: &Path,
    python: &Path,
    script: &Path,
) -> Result<Value, String> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let files = dir.join("files");
    std::fs::create_dir_all(&files).map_err(|e| format!("{}: {e}", files.display()))?;
    let dir = dir
        .canonicalize()
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    let files = dir.join("files");
    let total = options.warmup + options.rounds;
    let mut paths = Vec::with_capacity(total);
    for i in 0..total {
        let path = files.join(format!("f{i}.txt"));
        // A small text file: what a host reads most.
        let text = format!("line one of file {i}\nline two\nline three\n");
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        paths.push(path);
    }
    let direct = json!(["node", server, files]);
    let (through, through_tool, durability) = match between {
        Between::Proxy(proxy, durability) => {
            let config = configure_proxy(&dir, proxy, server, &files, durability)?;
            (
                json!([proxy, "serve", "--config", config]),
                "fs_read_text_file",
                durability,
            )
        }
        Between::Relay(relay) => (
            json!([relay, "relay", "--", "node", server, files]),
            "read_text_file",
            "normal",
        ),
    };
    let plan = json!({
        "direct": direct,
        "through": through,
        "direct_tool": "read_text_file",
        "through_tool": through_tool,
        "paths": paths,
        "warmup": options.warmup,
        "raw_db": dir.join("raw.db"),
        "synchronous": durability.to_uppercase(),
    });
    eprintln!(
        "$ {} {} < plan ({}, {total} rounds)",
        python.display(),
        script.display(),
        match between {
            Between::Proxy(_, durability) => durability,
            Between::Relay(_) => RELAY,
        }
    );
    let mut child = Command::new(python)
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("{}: {e}", python.display()))?;
    if let Some(mut stdin) = child.stdin.take() {
        use std::io::Write as _;
        stdin
            .write_all(plan.to_string().as_bytes())
            .map_err(|e| format!("writing the plan: {e}"))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("bench.py: {e}"))?;
    if !out.status.success() {
        return Err(format!("bench.py failed ({})", out.status));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("bench.py's output: {e}"))
}

/// Writes the proxy's configuration in `dir` (the server over stdio,
/// `read_text_file` a read) and pins its manifest; gives its path.
fn configure_proxy(
    dir: &Path,
    proxy: &Path,
    server: &Path,
    files: &Path,
    durability: &str,
) -> Result<PathBuf, String> {
    let config = dir.join("proxy.json");
    let mut proxy_config = json!({
        "database": "proxy.db",
        "session": "bench",
        "servers": [{
            "name": "fs",
            "command": ["node", server, files],
            "manifest": "fs.manifest.json",
            "rules": {"read_text_file": {"side_effect": "read_only", "timeout": "10s"}}
        }]
    });
    // FULL is the default: left out, a build from before the setting runs.
    if durability != "full" {
        proxy_config["durability"] = json!(durability);
    }
    std::fs::write(&config, proxy_config.to_string())
        .map_err(|e| format!("{}: {e}", config.display()))?;
    let pinned = Command::new(proxy)
        .args(["pin", "--config"])
        .arg(&config)
        .output()
        .map_err(|e| format!("{}: {e}", proxy.display()))?;
    if !pinned.status.success() {
        return Err(format!(
            "agentrt-proxy pin: {}",
            String::from_utf8_lossy(&pinned.stderr)
        ));
    }
    Ok(config)
}

/// p50 and p99 in milliseconds.
type Quantiles = (f64, f64);

struct Report {
    direct: Quantiles,
    through: Quantiles,
    /// Each round's call through the proxy less its direct call.
    overhead: Quantiles,
    raw: Quantiles,
}

impl Report {
    fn of(samples: &Value) -> Result<Report, String> {
        let series = |name: &str| -> Result<Vec<f64>, String> {
            samples[name]
                .as_array()
                .ok_or_else(|| format!("bench.py printed no {name:?} samples"))?
                .iter()
                .map(|v| {
                    v.as_f64()
                        .map(|ns| ns / 1e6)
                        .ok_or_else(|| format!("a {name:?} sample is not a number: {v}"))
                })
                .collect()
        };
        let (direct, through, raw) = (series("direct")?, series("through")?, series("raw")?);
        if direct.is_empty() || direct.len() != through.len() {
            return Err("bench.py's direct and through samples do not pair".into());
        }
        let overhead: Vec<f64> = through.iter().zip(&direct).map(|(t, d)| t - d).collect();
        Ok(Report {
            direct: quantiles(direct),
            through: quantiles(through),
            overhead: quantiles(overhead),
            raw: quantiles(raw),
        })
    }
}

/// The nearest-rank p50 and p99 of `values` (not empty).
fn quantiles(mut values: Vec<f64>) -> Quantiles {
    values.sort_by(f64::total_cmp);
    let at = |q: f64| {
        let rank = (q * values.len() as f64).ceil() as usize;
        values[rank.clamp(1, values.len()) - 1]
    };
    (at(0.50), at(0.99))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_nearest_rank() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantiles(values), (50.0, 99.0));
        assert_eq!(quantiles(vec![3.0]), (3.0, 3.0));
        assert_eq!(quantiles(vec![2.0, 1.0]), (1.0, 2.0));
    }

    #[test]
    fn bad_arguments_are_refused_with_the_flag() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(
            options(&args(&["--rounds"]))
                .err()
                .is_some_and(|e| e.contains("--rounds needs a value"))
        );
        assert!(
            options(&args(&["--durability", "off"]))
                .err()
                .is_some_and(|e| e.contains("full or normal"))
        );
        assert!(options(&args(&["--rounds", "0"])).is_err());
        let o = options(&args(&["--rounds", "5", "--durability", "normal"])).expect("options");
        assert_eq!((o.rounds, o.modes), (5, vec!["normal"]));
        let o = options(&args(&[])).expect("options");
        assert_eq!(o.modes, vec!["full", "normal", RELAY]);
        let o = options(&args(&["--relay", "--durability", "full", "--relay"])).expect("options");
        assert_eq!(o.modes, vec![RELAY, "full"]);
    }
}
