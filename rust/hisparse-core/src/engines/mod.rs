//! One module tree per engine release: each owns its flag dialect, schema,
//! resolution and defaults, rules (with the engine's file:line and the stage
//! at which it refuses), deviations and fixes. What HiSparse itself is (model
//! dimensions, sizes, pools, capacity) lives outside, engine-neutral.

pub mod sglang_0_5_23;
pub mod vllm_0_33;
