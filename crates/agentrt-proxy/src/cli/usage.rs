//! The usage text, with what a proxy cannot govern (design §33).

/// Printed on `-h` and after a usage error.
pub const USAGE: &str = "\
usage:
  agentrt-proxy [serve] --config FILE     serve one MCP host over stdin and stdout
  agentrt-proxy serve --config FILE --http ADDR [--token-file FILE]
                    [--allow-host NAME]... [--allow-origin ORIGIN]...
                    [--max-sessions N] [--max-requests-per-session N]
                                          serve MCP hosts over streamable HTTP on ADDR
  agentrt-proxy pin --config FILE         pin every server's tools into its manifest
  agentrt-proxy check --config FILE       load everything and print what is offered
  agentrt-proxy tools --config FILE       print the pinned tools as the policy sees them
                                          (JSON, for agentrt policy check|test --tools)
  agentrt-proxy recheck --config FILE [--run ID | --session NAME] [--limit N] [--current-tools] [--json]
                                          re-check recorded calls under the configured policy

Over HTTP every request carries `Authorization: Bearer TOKEN`: the token in
--token-file (readable by its owner only), else a new one the proxy writes
at each start to FILE.token beside the configuration (named on stderr,
never printed). `Host` must name the address the host connected to
(`localhost` on loopback) or a --allow-host NAME; a request with an
`Origin` is refused unless it is a --allow-origin (https://app.example.com).
At most --max-sessions sessions are open (default 64; past it 503) and
--max-requests-per-session requests of one session in flight (default 32;
past it 429); a request body holds at most 4 MiB.

An MCP host launches agentrt-proxy in place of its servers. Every tools/call
becomes a run of its own, decided by the configured policy, recorded in the
database, and paused for an operator (`agentrt approve`) when the policy says so.

What it cannot govern:
  - only calls made through it: a host's own shell or file tools bypass it,
    and could even approve their own requests;
  - one person is both the host's user and the operator;
  - it never sees the model's calls (no token or cost limits) nor the
    conversation;
  - an identical call is refused as a duplicate even when it is meant;
  - results are capped and flattened to text and structured content;
  - a pin covers what a server presents, not what its tools do;
  - servers run as the same user: the reach check guards against a
    mistake, it is not a boundary;
  - tools are read once, at startup; keys are per registered name;
  - approvals come only from outside the host: no approving tool, no
    elicitation, no sampling.
";
