//! Where hisparse_rs knowingly differs from vLLM 0.33.0: a different verdict,
//! or the same verdict reached where vLLM fails in another way (a crash, a
//! failure after the model has loaded).
//!
//! The one list of them: README.md's "Where we differ from vLLM 0.33.0"
//! section is checked against it (`tests/test_readme.py`), and the
//! differential test (`tests/vllm/test_differential.py`, vLLM 0.33.0's own
//! config code) accepts a disagreement with vLLM only when the report carries
//! one of these codes. Every other disagreement is a bug here.

use crate::diagnostic::Code;

/// One knowing difference from vLLM 0.33.0: in its verdict, or in how (and
/// when) it fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deviation {
    /// The code our report carries when it applies: a diagnostic's, or, for
    /// `host_pools_fit_alone`, named in the `host_memory_exceeded` error it
    /// qualifies (one problem, one diagnostic).
    pub code: Code,
    /// What vLLM 0.33.0 does instead, in one sentence.
    pub vllm: &'static str,
}

/// Every knowing difference, by code.
pub const VLLM_DEVIATIONS: &[Deviation] = &[
    Deviation {
        code: Code::HiSparseConnectorTooDeep,
        vllm: "looks for a HiSparseConnector one MultiConnector level deep only: deeper, it does not see it, and fails only after the model has loaded (no host pool for the connector, or no host_pool_gib for an explicit hisparse_config)",
    },
    Deviation {
        code: Code::Vllm033Crash,
        vllm: "crashes on the input (a Python exception, some only after the model has loaded) instead of reporting it",
    },
    Deviation {
        code: Code::HybridBlockSizeUnknown,
        vllm: "sizes the KV cache blocks of a hybrid model (linear-attention layers beside the sparse-MLA ones) from its linear-attention state, which hisparse_rs does not model: the host block size, stride and count, and the smallest pool that starts, differ",
    },
    Deviation {
        code: Code::HostPoolLimitsContext,
        vllm: "with --max-model-len auto, shortens the context to what the host pool holds instead of failing",
    },
    Deviation {
        code: Code::HostPoolsFitAlone,
        vllm: "checks each pinned pool alone, against 95 % of the RAM available when its rank allocates it (after the weights have loaded): pools that fit one at a time but not together can start, with more than 95 % of the node's available RAM pinned, or fail at a later rank's allocation",
    },
];

/// The deviation for `code`, if it is one.
pub fn deviation(code: Code) -> Option<&'static Deviation> {
    VLLM_DEVIATIONS.iter().find(|d| d.code == code)
}
