//! The webhook's routes: a method and an exact path, each `{run}` or
//! `{id}` exactly one non-empty segment. Anything else is not found,
//! whatever the method (never "method not allowed"); a trailing slash is
//! another path. Public (hidden from the documentation) for the crate's
//! fuzz target.

/// What a request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route<'a> {
    /// `GET /runs/{run}/approvals`.
    Pending {
        /// The run.
        run: &'a str,
    },
    /// `GET /runs/{run}/approvals/{id}`.
    Show {
        /// The run.
        run: &'a str,
        /// The approval.
        id: &'a str,
    },
    /// `POST /runs/{run}/approvals/{id}/approve`.
    Approve {
        /// The run.
        run: &'a str,
        /// The approval.
        id: &'a str,
    },
    /// `POST /runs/{run}/approvals/{id}/reject`.
    Reject {
        /// The run.
        run: &'a str,
        /// The approval.
        id: &'a str,
    },
    /// `POST /runs/{run}/cancel`.
    Cancel {
        /// The run.
        run: &'a str,
    },
}

/// The route of `method` and `path` (no query), if any.
pub fn route<'a>(method: &str, path: &'a str) -> Option<Route<'a>> {
    let rest = path.strip_prefix('/')?;
    let segments: Vec<&str> = rest.split('/').collect();
    if segments.iter().any(|s| s.is_empty()) {
        return None;
    }
    let read = method == "GET" || method == "HEAD";
    match (segments.as_slice(), read, method == "POST") {
        (["runs", run, "approvals"], true, _) => Some(Route::Pending { run }),
        (["runs", run, "approvals", id], true, _) => Some(Route::Show { run, id }),
        (["runs", run, "approvals", id, "approve"], _, true) => Some(Route::Approve { run, id }),
        (["runs", run, "approvals", id, "reject"], _, true) => Some(Route::Reject { run, id }),
        (["runs", run, "cancel"], _, true) => Some(Route::Cancel { run }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_paths_and_methods_only() {
        assert_eq!(
            route("GET", "/runs/r1/approvals"),
            Some(Route::Pending { run: "r1" })
        );
        assert_eq!(
            route("GET", "/runs/r1/approvals/a1"),
            Some(Route::Show {
                run: "r1",
                id: "a1"
            })
        );
        assert_eq!(
            route("POST", "/runs/r1/approvals/a1/approve"),
            Some(Route::Approve {
                run: "r1",
                id: "a1"
            })
        );
        assert_eq!(
            route("POST", "/runs/r1/approvals/a1/reject"),
            Some(Route::Reject {
                run: "r1",
                id: "a1"
            })
        );
        assert_eq!(
            route("POST", "/runs/r1/cancel"),
            Some(Route::Cancel { run: "r1" })
        );
        for (method, path) in [
            ("GET", "/runs/r1/approvals/"),
            ("GET", "/runs//approvals"),
            ("GET", "runs/r1/approvals"),
            ("POST", "/runs/r1/approvals"),
            ("GET", "/runs/r1/approvals/a1/approve"),
            ("PUT", "/runs/r1/cancel"),
            ("POST", "/runs/r1/cancel/"),
            ("POST", "/runs/r1/approvals/a1/approve/x"),
            ("GET", "/"),
            ("GET", ""),
        ] {
            assert_eq!(route(method, path), None, "{method} {path}");
        }
    }
}
