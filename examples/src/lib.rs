//! Runnable consumers of agentrt; see the `[[example]]` targets.
