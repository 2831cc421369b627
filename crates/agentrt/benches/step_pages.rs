//! What a governed step writes, per commit: the WAL frames (pages) each
//! commit appended, the bytes, and which b-tree each page belongs to.
//!
//! `cargo bench -p agentrt --bench step_pages`; it prints a table (no
//! timing: the pages a commit dirties are what a commit at
//! `synchronous=NORMAL` costs beyond its statements). Figures in
//! docs/performance.md.
//!
//! It runs a warm-up run (so the tables hold rows and the b-trees have
//! depth), empties the WAL with a `TRUNCATE` checkpoint, runs the measured
//! run, then reads the WAL file frame by frame and names each page's
//! b-tree through SQLite's `dbstat` table.

use std::collections::BTreeMap;

use agentrt::{Durability, Store, StoreOptions};

mod scripted;
use scripted::one_run;

/// One WAL frame: the page it holds, and whether it ends a commit.
struct Frame {
    page: u32,
    commit: bool,
}

/// The frames of a WAL file whose salts match its header.
fn frames(wal: &[u8]) -> (u32, Vec<Frame>) {
    let be = |at: usize| u32::from_be_bytes([wal[at], wal[at + 1], wal[at + 2], wal[at + 3]]);
    let page_size = be(8);
    let (salt1, salt2) = (be(16), be(20));
    let mut out = Vec::new();
    let mut at = 32;
    while at + 24 + page_size as usize <= wal.len() {
        if be(at + 8) != salt1 || be(at + 12) != salt2 {
            break;
        }
        out.push(Frame {
            page: be(at),
            commit: be(at + 4) != 0,
        });
        at += 24 + page_size as usize;
    }
    (page_size, out)
}

fn main() {
    // `cargo bench` passes `--bench`; a filter that names no table skips us.
    if std::env::args().skip(1).any(|a| !a.starts_with('-')) {
        return;
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("pages.db");
    let store = Store::open_with(
        &path,
        StoreOptions {
            durability: Durability::Normal,
            ..StoreOptions::default()
        },
    )
    .expect("store opens");
    for _ in 0..20 {
        rt.block_on(one_run(&store, 50, 0));
    }
    let raw = rusqlite::Connection::open(&path).expect("raw connection");
    raw.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
        let busy: i64 = r.get(0)?;
        assert_eq!(busy, 0, "the checkpoint was blocked");
        Ok(())
    })
    .expect("checkpoint");
    let before = store.commits();
    let steps = 20;
    rt.block_on(one_run(&store, steps, 0));
    let commits = store.commits() - before;
    let wal = std::fs::read(path.with_extension("db-wal")).expect("the WAL");
    let (page_size, frames) = frames(&wal);

    let mut owner: BTreeMap<u32, String> = BTreeMap::new();
    let mut stmt = raw
        .prepare("SELECT name, pageno FROM dbstat")
        .expect("dbstat");
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, u32>(1)?)))
        .expect("dbstat rows");
    for row in rows {
        let (name, page) = row.expect("a dbstat row");
        owner.insert(page, name);
    }

    let mut per_commit: Vec<Vec<&str>> = vec![Vec::new()];
    for f in &frames {
        let name = owner
            .get(&f.page)
            .map_or("(freelist or new)", String::as_str);
        if let Some(last) = per_commit.last_mut() {
            last.push(name);
        }
        if f.commit {
            per_commit.push(Vec::new());
        }
    }
    per_commit.pop();
    println!(
        "a {steps}-step run at synchronous=NORMAL: {commits} commits, {} frames, {} WAL bytes ({} per step), page size {page_size}",
        frames.len(),
        wal.len(),
        wal.len() as u64 / steps
    );
    let mut totals: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, pages) in per_commit.iter().enumerate() {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for p in pages {
            *counts.entry(p).or_default() += 1;
            *totals.entry(p).or_default() += 1;
        }
        let list: Vec<String> = counts.iter().map(|(n, c)| format!("{n}×{c}")).collect();
        println!(
            "commit {i:>3}: {:>2} pages  {}",
            pages.len(),
            list.join(" ")
        );
    }
    println!("pages per step, by b-tree:");
    for (name, count) in totals {
        println!("  {name:<28} {:.2}", count as f64 / steps as f64);
    }
}
