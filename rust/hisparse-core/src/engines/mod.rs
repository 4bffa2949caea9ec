//! One module tree per engine release: each owns its flag dialect, schema,
//! resolution and defaults, rules (with the engine's file:line and the stage
//! at which it refuses), deviations and fixes. What HiSparse itself is (model
//! dimensions, sizes, pools, capacity) lives outside, engine-neutral.

pub mod sglang_0_5_23;
pub mod vllm_0_33;

use crate::diagnostic::Stage;

/// The sentence `hisparse-check` and the vLLM plugin print for a
/// diagnostic's stage ("vLLM 0.33.0 refuses this after the model has loaded,
/// ..."): the engine release's own words.
pub fn stage_sentence(stage: Stage, is_error: bool) -> String {
    match stage {
        Stage::Vllm(s) => vllm_0_33::stages::sentence(s, is_error),
        Stage::Sglang(s) => sglang_0_5_23::stages::sentence(s, is_error),
    }
}
