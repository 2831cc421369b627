//! Where the examples' tests find the `agentrt` binary.

use std::path::{Path, PathBuf};

/// The `agentrt` binary: `AGENTRT_CLI`, else the one cargo built beside
/// this test (`target/<profile>/agentrt`).
pub fn cli() -> PathBuf {
    if let Some(path) = std::env::var_os("AGENTRT_CLI") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().unwrap();
    let profile = exe.parent().and_then(Path::parent).unwrap();
    let path = profile.join(format!("agentrt{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.is_file(),
        "{} is missing: cargo build -p agentrt-cli (or set AGENTRT_CLI)",
        path.display()
    );
    path
}
