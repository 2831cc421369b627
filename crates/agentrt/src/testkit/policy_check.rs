//! Placeholder: policy conformance tables (being written).
