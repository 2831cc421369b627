//! The login name of the account the process runs as, from the system's
//! user database: who decides when neither `--by`, `$USER` nor `$LOGNAME`
//! says (a container often sets none of them).

/// The login name of the effective user, or `None` when the user database
/// has no entry for it (or the name is empty or not UTF-8).
#[cfg(unix)]
pub fn login_name() -> Option<String> {
    use std::ffi::CStr;

    // The buffer holds the strings the entry points into; grow it while
    // the system says it is too small, up to a bound.
    const MAX: usize = 1 << 20;
    let mut buf = vec![0u8; 1024];
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    loop {
        // SAFETY: `passwd` is plain old data; all-zero is a valid value
        // (null pointers), and getpwuid_r fills it before it is read.
        let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: every pointer is valid for the call: `entry` and `found`
        // are live locals, `buf` is writable for `buf.len()` bytes.
        let status = unsafe {
            libc::getpwuid_r(
                uid,
                &mut entry,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut found,
            )
        };
        if status == libc::ERANGE && buf.len() < MAX {
            buf.resize(buf.len() * 2, 0);
            continue;
        }
        if status != 0 || found.is_null() || entry.pw_name.is_null() {
            return None;
        }
        // SAFETY: on success `pw_name` points at a NUL-terminated string
        // inside `buf`, which outlives this borrow.
        let name = unsafe { CStr::from_ptr(entry.pw_name) };
        return name
            .to_str()
            .ok()
            .filter(|n| !n.is_empty())
            .map(str::to_owned);
    }
}

/// No user database to ask.
#[cfg(not(unix))]
pub fn login_name() -> Option<String> {
    None
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn the_account_name_matches_id() {
        // `id -un` reads the same database; where it cannot name the
        // account, neither can we.
        let Ok(out) = std::process::Command::new("id").arg("-un").output() else {
            return; // no `id` here
        };
        let expected = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if out.status.success() && !expected.is_empty() {
            assert_eq!(login_name().as_deref(), Some(expected.as_str()));
        } else {
            assert_eq!(login_name(), None);
        }
    }
}
