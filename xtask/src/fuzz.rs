//! `cargo xtask fuzz`: every package's `fuzz` test target (the property
//! tests over the parsers that read outside input), in release mode, with
//! many more cases than `cargo test` runs.
//!
//! The targets read proptest's own environment: `PROPTEST_CASES` (each
//! target runs at least 10 000 cases whatever it says, so `cargo test`
//! alone runs 10 000) and `PROPTEST_RNG_SEED` (a fixed seed of the
//! target's own when unset, so `cargo test` is deterministic). This task
//! sets both and prints the seed, so a failure can be run again.

use std::ffi::OsString;
use std::path::Path;

use crate::release::workspace;

/// Cases per fuzz target unless `--cases` says otherwise.
const DEFAULT_CASES: u64 = 200_000;

/// The name every fuzz target has.
const TARGET: &str = "fuzz";

/// What the arguments ask for.
#[derive(Debug, PartialEq, Eq)]
struct Request {
    cases: u64,
    seed: Option<u64>,
    packages: Vec<String>,
}

fn parse(args: &[String]) -> Result<Request, String> {
    let mut request = Request {
        cases: DEFAULT_CASES,
        seed: None,
        packages: Vec::new(),
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut number = |flag: &str| -> Result<u64, String> {
            let value = args.next().ok_or(format!("{flag} needs a number"))?;
            value
                .parse::<u64>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or(format!("{flag} {value:?} is not a positive number"))
        };
        match arg.as_str() {
            "--cases" => request.cases = number("--cases")?,
            "--seed" => request.seed = Some(number("--seed")?),
            flag if flag.starts_with('-') => return Err(format!("unknown option {flag:?}")),
            package => request.packages.push(package.to_owned()),
        }
    }
    Ok(request)
}

/// A seed from the clock and the process id: new on each run.
fn fresh_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    (nanos as u64) ^ (u64::from(std::process::id()) << 32)
}

/// Runs the fuzz targets the arguments name (every one when none).
pub fn fuzz(args: &[String]) -> Result<(), String> {
    let request = parse(args)?;
    let packages = workspace::packages(Path::new("."))?;
    let with_target: Vec<&str> = packages
        .iter()
        .filter(|p| p.test_targets.iter().any(|t| t == TARGET))
        .map(|p| p.name.as_str())
        .collect();
    if let Some(unknown) = request
        .packages
        .iter()
        .find(|p| !with_target.contains(&p.as_str()))
    {
        return Err(format!(
            "{unknown:?} has no fuzz target; these do: {}",
            with_target.join(", ")
        ));
    }
    let chosen: Vec<&str> = if request.packages.is_empty() {
        with_target
    } else {
        request.packages.iter().map(String::as_str).collect()
    };
    if chosen.is_empty() {
        return Err("no package has a fuzz target (tests/fuzz.rs)".into());
    }
    let seed = request.seed.unwrap_or_else(fresh_seed);
    let cases = OsString::from(request.cases.to_string());
    let seed_text = OsString::from(seed.to_string());
    eprintln!(
        "fuzz: {} case(s) per property in {}; seed {seed} (again with --seed {seed})",
        request.cases,
        chosen.join(", ")
    );
    for package in &chosen {
        let ok = crate::cargo_in(
            Path::new("."),
            &["test", "--release", "-p", package, "--test", TARGET],
            &[
                ("PROPTEST_CASES", &cases),
                ("PROPTEST_RNG_SEED", &seed_text),
            ],
        );
        if !ok {
            return Err(format!(
                "{package}'s fuzz target failed (seed {seed}, {} cases)",
                request.cases
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn options_and_packages_are_read_and_bad_ones_refused() {
        assert_eq!(
            parse(&args("--cases 50 --seed 7 agentrt-proxy")),
            Ok(Request {
                cases: 50,
                seed: Some(7),
                packages: vec!["agentrt-proxy".into()],
            })
        );
        assert_eq!(parse(&[]).map(|r| r.cases), Ok(DEFAULT_CASES));
        assert!(parse(&args("--cases 0")).is_err());
        assert!(parse(&args("--cases")).is_err());
        assert!(parse(&args("--seed x")).is_err());
        assert!(parse(&args("--fast")).is_err());
    }
}
