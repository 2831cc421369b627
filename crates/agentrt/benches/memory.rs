//! Peak heap of whole runs of 10, 100 and 1000 steps, beside the bytes the
//! run writes to the database. `cargo bench -p agentrt --bench memory`.
//!
//! The session keeps the run's steps (the rows it wrote) for the agent and
//! the policy; nothing else may grow with the number of steps.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agentrt::{
    DefaultPolicy, Driver, Durability, GateConfig, Limits, SideEffect, Store, StoreOptions, Tool,
    ToolResult, ToolSpec, tool_fn,
};

mod scripted;
use scripted::Counter;

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(now, Ordering::Relaxed);
        // SAFETY: forwarding the caller's layout to the system allocator.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` was allocated by `alloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn echo(result_bytes: usize) -> Arc<dyn Tool> {
    let pad = "x".repeat(result_bytes);
    Arc::new(tool_fn(
        ToolSpec::new("echo", "echo", SideEffect::ReadOnly),
        move |call| {
            let body = format!(r#"{{"args":{},"pad":"{pad}"}}"#, call.args);
            async move { Ok(ToolResult::raw(body)) }
        },
    ))
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    println!("| result | steps | peak heap | heap per step | bytes written per step |");
    println!("|---|---|---|---|---|");
    for result_bytes in [16usize, 8192] {
        for steps in [10u64, 100, 1000] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("m.db");
            let store = Store::open_with(
                &path,
                StoreOptions {
                    durability: Durability::Normal,
                    ..StoreOptions::default()
                },
            )
            .unwrap();
            let config = GateConfig::new(store.clone(), DefaultPolicy, vec![echo(result_bytes)]);
            let mut driver = Driver::new(config, Counter { steps }).unwrap();
            let base = LIVE.load(Ordering::Relaxed);
            PEAK.store(base, Ordering::Relaxed);
            rt.block_on(driver.start(None, "memory", Limits::default().max_steps(steps + 10)))
                .unwrap();
            let peak = PEAK.load(Ordering::Relaxed) - base;
            let conn = rusqlite::Connection::open(&path).unwrap();
            let written: i64 = conn
                .query_row(
                    "SELECT (SELECT SUM(length(payload_json) + length(at) + length(run_id) + length(step_id) + 80) FROM events)
                          + (SELECT SUM(length(decision_json) + length(policy_json) + length(observation_json) + 200) FROM steps)",
                    [],
                    |r| r.get(0),
                )
                .unwrap();
            println!(
                "| {result_bytes} B | {steps} | {} KiB | {} B | {} B |",
                peak / 1024,
                peak as u64 / steps,
                written as u64 / steps
            );
        }
    }
}
