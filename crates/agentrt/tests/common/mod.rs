//! Shared fixtures: tools, clocks and a recording observer.
#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentrt::*;

pub fn t0() -> Timestamp {
    Timestamp::parse("2026-10-01T09:00:00Z").unwrap()
}

/// A clock that advances 1 s per reading, from t0.
pub fn stepping_clock() -> ManualClock {
    ManualClock::new(t0()).stepping(Duration::from_secs(1))
}

/// An observer that keeps every event it hears.
#[derive(Clone, Default)]
pub struct Recorder(pub Arc<Mutex<Vec<Event>>>);

impl Recorder {
    pub fn types(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|e| e.event_type.to_string())
            .collect()
    }
    pub fn events(&self) -> Vec<Event> {
        self.0.lock().unwrap().clone()
    }
}

impl Observer for Recorder {
    fn observe(&self, event: &Event) {
        self.0.lock().unwrap().push(event.clone());
    }
}

/// A tool that counts its calls and echoes its arguments.
pub struct Counting {
    pub spec: ToolSpec,
    pub calls: Arc<AtomicUsize>,
    pub seen: Arc<Mutex<Vec<ToolCall>>>,
}

impl Counting {
    pub fn new(name: &str, class: SideEffect) -> Counting {
        Counting {
            spec: ToolSpec::new(name, format!("{name} tool"), class),
            calls: Arc::new(AtomicUsize::new(0)),
            seen: Arc::new(Mutex::new(Vec::new())),
        }
    }
    pub fn count(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

impl Tool for Counting {
    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }
    fn call(&self, call: ToolCall) -> BoxFuture<'_, Result<ToolResult, ToolError>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.seen.lock().unwrap().push(call.clone());
        Box::pin(async move { Ok(ToolResult::raw(call.args.as_str()).with_summary("ok")) })
    }
}

pub fn shared(tools: Vec<Arc<Counting>>) -> Vec<Arc<dyn Tool>> {
    tools.into_iter().map(|t| t as Arc<dyn Tool>).collect()
}

pub fn config(
    store: &Store,
    policy: impl Policy + 'static,
    tools: Vec<Arc<dyn Tool>>,
    clock: &ManualClock,
    rec: &Recorder,
) -> GateConfig {
    GateConfig::new(store.clone(), policy, tools)
        .with_clock(clock.clock())
        .with_ids(sequential_ids("id"))
        .with_observer(rec.clone())
}
