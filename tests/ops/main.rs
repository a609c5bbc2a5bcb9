//! The ops themselves, through the reference and every backend: the conformance
//! vectors, the validation rules, hand-computed values, the f32 -> f16/bf16 step,
//! the float sources and proptest differential and hostile-descriptor checks.

#[path = "../support/mod.rs"]
mod support;

mod conformance;
mod conversions;
mod differential;
mod float_paths;
mod float_props;
mod float_sources;
mod reference;
mod validation;
mod validation_props;
