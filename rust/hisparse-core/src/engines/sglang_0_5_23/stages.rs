//! When SGLang 0.5.23 refuses what a diagnostic reports, in launch order
//! (SGLANG.md §1). Every SGLang diagnostic sets its stage explicitly with
//! [`crate::Diagnostic::stage`]; the rule's comment cites the line that raises.
//!
//! The stage is what the preflight saved the user: `argparse`, `resolve` and
//! `check` cost seconds; `after_weights_load` and later cost the minutes the
//! weights take to load on 8 GPUs; `never` is SGLang starting with a launch
//! that then breaks, corrupts or is silently changed.

use serde::{Deserialize, Serialize};

/// SGLang 0.5.23's launch stages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SglangStage {
    /// S0: `prepare_server_args` (srt/server_args.py:668-720): types, choices, unknown flags.
    Argparse,
    /// S1: `ServerArgs.resolve_once`, the resolution pipeline (srt/arg_groups/pipeline.py):
    /// defaults and most cross-checks; the first failure ends it.
    Resolve,
    /// S2: `check_server_args` (srt/arg_groups/validation_hook.py, hisparse_hook.py:87-165).
    Check,
    /// S3: KV sizing after the weights load, where `--hisparse-config` is first
    /// parsed (srt/model_executor/pool_configurator.py:586 -> mem_cache/sparsity/factory.py:62-117).
    AfterWeightsLoad,
    /// S4: the KV pool and the HiSparse allocator are built
    /// (srt/mem_cache/kv_cache_configurator.py, mem_cache/allocator/hisparse.py).
    PoolBuild,
    /// S5: the HiSparse coordinator starts: pinned host pool, host-RAM check,
    /// speculative checks, page multiples (srt/managers/hisparse_coordinator.py,
    /// mem_cache/pool_host/base.py).
    CoordinatorInit,
    /// S6: the first swap-in (CUDA graph capture or first decode): kernel asserts.
    FirstDecode,
    /// S7: at request time (speculative verify, P/D transfer backends, srt/disaggregation/*).
    Request,
    /// SGLang never refuses it: it starts and then breaks, corrupts, or
    /// silently changes the setting. Every warning SGLang does not refuse has it.
    Never,
}

impl SglangStage {
    /// Every stage, in launch order.
    pub const ALL: &'static [SglangStage] = &[
        SglangStage::Argparse,
        SglangStage::Resolve,
        SglangStage::Check,
        SglangStage::AfterWeightsLoad,
        SglangStage::PoolBuild,
        SglangStage::CoordinatorInit,
        SglangStage::FirstDecode,
        SglangStage::Request,
        SglangStage::Never,
    ];

    /// The stable string form (the JSON `stage`), e.g. `"coordinator_init"`.
    pub fn as_str(self) -> &'static str {
        match self {
            SglangStage::Argparse => "argparse",
            SglangStage::Resolve => "resolve",
            SglangStage::Check => "check",
            SglangStage::AfterWeightsLoad => "after_weights_load",
            SglangStage::PoolBuild => "pool_build",
            SglangStage::CoordinatorInit => "coordinator_init",
            SglangStage::FirstDecode => "first_decode",
            SglangStage::Request => "request",
            SglangStage::Never => "never",
        }
    }

    /// The stage named `s`, if it is one.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|st| st.as_str() == s)
    }

    /// When, in words, for "SGLang 0.5.23 refuses this {when}".
    pub fn when(self) -> &'static str {
        match self {
            SglangStage::Argparse => "at argument parsing, before anything starts",
            SglangStage::Resolve => "while resolving its server arguments, seconds in",
            SglangStage::Check => "when it checks its server arguments, seconds in",
            SglangStage::AfterWeightsLoad => {
                "after the weights have loaded, when it sizes the KV cache, minutes in"
            }
            SglangStage::PoolBuild => "after the weights have loaded, when it builds the KV pool",
            SglangStage::CoordinatorInit => {
                "after the weights have loaded, when the HiSparse coordinator starts"
            }
            SglangStage::FirstDecode => "at the first swap-in (CUDA graph capture or first decode)",
            SglangStage::Request => "when a request runs, after start-up has finished",
            SglangStage::Never => "",
        }
    }

    /// The sentence the CLI prints for a diagnostic at this stage.
    pub fn sentence(self, severity_is_error: bool) -> String {
        let v = super::VERSION;
        match self {
            SglangStage::Never if severity_is_error => {
                format!("SGLang {v} accepts this and then breaks on it or corrupts silently")
            }
            SglangStage::Never => format!("SGLang {v} accepts this"),
            s => format!("SGLang {v} refuses this {}", s.when()),
        }
    }
}

impl From<SglangStage> for crate::diagnostic::Stage {
    fn from(s: SglangStage) -> Self {
        crate::diagnostic::Stage::Sglang(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_round_trip_in_launch_order() {
        for s in SglangStage::ALL {
            assert_eq!(SglangStage::parse(s.as_str()), Some(*s));
            assert_eq!(
                serde_json::to_value(s).unwrap(),
                serde_json::json!(s.as_str())
            );
        }
        assert!(SglangStage::Check < SglangStage::AfterWeightsLoad);
        assert!(SglangStage::CoordinatorInit < SglangStage::FirstDecode);
        assert!(SglangStage::CoordinatorInit
            .sentence(true)
            .contains("SGLang 0.5.23 refuses this after the weights have loaded"));
        assert_eq!(SglangStage::parse("workers"), None);
    }
}
