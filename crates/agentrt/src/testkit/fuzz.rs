//! Placeholder: argument fuzzing (being written).
