//! `keygen --out PREFIX`: a new Ed25519 key pair for signed heads.

use std::io::Write;

use agentrt::text::sanitize;
use serde::Serialize;

use crate::args::Keygen;
use crate::error::CliError;
use crate::hex;
use crate::keys;
use crate::output::{self, line};

#[derive(Serialize)]
struct Report<'a> {
    private_key_file: &'a str,
    public_key_file: &'a str,
    public_key: &'a str,
}

pub fn run(args: &Keygen, out: &mut dyn Write) -> Result<(), CliError> {
    let key = keys::generate()?;
    let (private, public) = keys::write_pair(&args.out, &key)?;
    let public_hex = hex::encode(key.verifying_key().as_bytes());
    let (private, public) = (private.to_string_lossy(), public.to_string_lossy());
    if args.json {
        return output::json(
            out,
            &Report {
                private_key_file: &private,
                public_key_file: &public,
                public_key: &public_hex,
            },
        );
    }
    line(
        out,
        &format!(
            "private key: {} (mode 0600; keep it where the database's writers cannot read it)",
            sanitize(&private)
        ),
    )?;
    line(out, &format!("public key:  {}", sanitize(&public)))?;
    line(out, &format!("             {public_hex}"))
}
