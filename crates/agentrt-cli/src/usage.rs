//! The top-level help: the operator's manual, printed to stdout for
//! `agentrt -h`, `--help` and `help`, and to stderr when no command is
//! given. Each command's own `--help` is rendered by clap (`args::cli`).

/// The top-level help text (ends with a newline).
pub const USAGE: &str = "\
agentrt: the operator's view of an agentrt database. It lists runs, shows
them with their pending approvals, prints their events, decides approvals,
cancels runs, and checks the audit log; and it checks and tests Cedar
policies.

Usage: agentrt [--db PATH|URL] [--json] <command> [arguments]

Global options (before the command):
  --db PATH|URL   the database (default: $AGENTRT_DB): a SQLite file, or
                  a PostgreSQL database as postgres://user@host/db (put
                  a URL with a password in $AGENTRT_DB: agentrt never
                  shows it). It must exist: agentrt never creates and
                  never migrates a database
  --json          JSON output, pretty-printed (events: JSON Lines)
  -h, --help      print this help; after a command, that command's help
  -V, --version   print the version

Commands:
  runs            list runs, newest first
      --limit N   runs per page (default 100; 0 = all)
      --offset N  runs to skip (default 0)
      --label KEY=VALUE  only runs begun with this label; repeat it for
                  runs that carry every label given
  show <run>      a run, its pending approvals and its steps
      --limit N   steps and pending approvals per page (default 500; 0 = all)
      --offset N  steps and pending approvals to skip (default 0)
  events <run>    a run's events in order
      --limit N   events per page (default 500; 0 = all, printed as read)
      --offset N  events to skip (default 0)
  events --follow [run]
                  every run's (or one run's) events as JSON Lines as they
                  commit, until SIGINT or SIGTERM
      --from SEQ  start after SEQ (default 0)
      --cursor F  keep the position in file F: a restart goes on from it
  approve <run>   approve the run's pending approval
  reject <run>    reject it: the step fails and the run is cancelled
                  (approval_rejected)
      --approval ID  the approval to decide (default: the run's only
                  pending approval); naming it is consent
      --by WHO    who decides, recorded as given and never verified
                  (default: $USER, else $LOGNAME, else the account's
                  login name)
      --note TEXT a note for the record (default: empty)
      --yes       consent without a prompt
      --edit FILE|-  approve only: approve these arguments instead of the
                  request's (a JSON object in FILE, or on stdin with -).
                  The edited request is checked against the tool's schema
                  and approved as a new approval of the same step; the one
                  it replaces is recorded as edited. On resume the run's
                  policy judges the edited request: if it denies it, nothing
                  runs and the replaced request waits again
  cancel <run>    cancel a run that has not finished (operator_cancelled);
                  no confirmation
      --by WHO    who cancels (default: as for approve)
      --note TEXT a note for the record (default: empty)
  verify          check the hash chain over every run's events, and the
                  runs, steps and approvals each event digests; prints
                  \"intact\" with the last seq and link, or the first seq that
                  does not chain (exit 1)
      --from N    the first seq to check (default 1)
      --to N      the last seq to check (default: the last event); exit 1
                  if the chain ends before it
      --head SEQ:HASH  a head you kept from an earlier verify: exit 1
                  unless the chain reaches SEQ unbroken with that link
      --signed-head FILE  a head signed with agentrt head sign: its
                  signature is checked, then it is compared like --head
      --pubkey FILE  the public key the signed head must be signed with
  head sign       verify the whole chain, then sign its head (seq, link,
                  time) with an Ed25519 key kept outside the database
      --key FILE  the private key (from agentrt keygen)
      --out FILE  write the signed head to FILE, a new file (default:
                  print it)
  keygen          make an Ed25519 key pair for head sign; needs no --db
      --out PREFIX  writes PREFIX.key (private, mode 0600) and PREFIX.pub;
                  never overwrites a file
  migrate         copy a SQLite database into an empty PostgreSQL one,
                  every row as stored in one transaction, then verify
                  both (intact, the same head); needs no --db
      --from PATH the SQLite database (opened read-only)
      --to URL    postgres://user@host/db (its schema created if missing)
  policy check FILE  validate a Cedar policy file strictly against the
                  tools it decides (a policy naming an argument a tool
                  lacks is refused with Cedar's diagnostic, exit 1) and
                  print its identity; needs no --db
      --tools FILE  the tools: a JSON array of tool specs as agentrt
                  records them (name, description, input_schema,
                  side_effect, timeout_ms; agentrt-proxy tools writes the
                  proxy's)
      --manifest FILE  or the tools a pinned MCP manifest offers, named
                  <server>_<tool>, classed by the server's hints
  policy test FILE  check it, then put each request of a cases file to it:
                  exit 1 naming each case whose outcome is not the one
                  expected; needs no --db
      --tools FILE, --manifest FILE  as for policy check
      --cases FILE  a JSON array of {tool, args, principal, resource,
                  labels, run, expect, reason_contains}; expect is allow,
                  require_approval, deny or abort
  policy recheck FILE  re-check recorded runs under the Cedar policy in
                  FILE: every recorded evaluation put to it, the steps it
                  would decide otherwise named (exit 1 if any run differs);
                  each run's policy validated against the tool specs it
                  recorded. Read-only
      --run ID    only this run (default: the newest runs)
      --limit N   how many of the newest runs (default 50; 0 = all)
      --tools FILE  judge each request with its tool's spec in FILE (the
                  tools as they are now) instead of the recorded one
  completions SHELL  print a completion script for bash, elvish, fish,
                  powershell or zsh; needs no --db
  help [COMMAND]  print this help, or a command's own help

Flags of a command may come before or after the run id; `--` ends flags.
Negative --limit values mean 0 (all), negative --offset values mean 0.

approve and reject print the approval first, then need consent: --approval,
--yes, or a typed y/yes when stdin is an interactive terminal (and --json
is not given). The decision applies only to the approval exactly as it was
printed: if it changed in between, nothing is decided.

agentrt reads and decides; it never runs a step. There is no resume command:
it needs the consumer's agent and tools. An approved run stays waiting until
the consumer's program resumes it with Driver::resume. Re-checking a run
against a policy written in code is the consumer's call to agentrt::recheck;
a Cedar policy is data, and policy recheck does it.

Whoever can write the database can approve anything: names given with --by
are labels, not identities. agentrt refuses a database that group or others
can write, a symbolic link, and a database holding a trigger or a view.
runs, show, events, verify and head sign open the database read-only.

An intact chain proves the log is as written only up to a head kept where
the database's writers cannot reach it: whoever can write the file can
rewrite the events and recompute every link, or cut events off the end.
Keep a head (the seq and link of verify's head: line) or sign one with
head sign, store it and the private key off the machine that runs the
agents, and pass it to verify with --head or --signed-head. A signed head
proves the log up to it is unchanged since it was signed by whoever holds
the key; it says nothing about later events, nor whether the signer was
honest.

Exit status: 0 success, 1 error or refusal, 2 usage problem.
";
