//! The words an engine's output is written in, for the renderers both engines
//! share (render_parts.rs, render_plan_parts.rs): the engine's name and
//! release, its program (`vllm serve`, `sglang serve`), what a user gives it
//! (a configuration, a launch), its name for the request cap, and its stages
//! as the "Without this check" line speaks of them. A third engine adds one
//! `Dialect` here and its arm in [`of`]; the renderers stay as they are.

use hisparse_core::diagnostic::Stage;
use hisparse_core::Diagnostic;

/// One engine's words.
pub(crate) struct Dialect {
    /// The engine's name in prose: "vLLM", "SGLang".
    pub name: &'static str,
    /// The release whose rules the core applies.
    pub version: &'static str,
    /// The command its flags belong to: "vllm serve", "sglang serve".
    pub program: &'static str,
    /// What the user gives it: "configuration" (vLLM), "launch" (SGLang).
    pub given: &'static str,
    /// What it does at stage never, after starting: "ignore it" (vLLM),
    /// "corrupt silently" (SGLang).
    pub never: &'static str,
    /// Its name for the cap on requests running at once (`Limit::MaxNumSeqs`).
    pub max_seqs: &'static str,
    /// Its name for the longest context it serves (the plan's `max_model_len`).
    pub max_len: &'static str,
    /// The earliest stage of this engine among the errors: whether it is
    /// stage never, when the engine reaches it, and its name.
    pub earliest: fn(&[Diagnostic]) -> Option<Earliest>,
}

/// The earliest stage at which the engine stops on a report's errors.
pub(crate) struct Earliest {
    pub never: bool,
    pub when: &'static str,
    pub name: &'static str,
}

pub(crate) const VLLM: Dialect = Dialect {
    name: "vLLM",
    version: hisparse_core::VLLM_VERSION,
    program: "vllm serve",
    given: "configuration",
    never: "ignore it",
    max_seqs: "max_num_seqs",
    max_len: "max_model_len",
    earliest: |errors| {
        use hisparse_core::engines::vllm_0_33::stages::VllmStage;
        let s = errors
            .iter()
            .filter_map(|d| match d.stage {
                Stage::Vllm(s) => Some(s),
                Stage::Sglang(_) => None,
            })
            .min()?;
        Some(Earliest {
            never: s == VllmStage::Never,
            when: s.when(),
            name: s.as_str(),
        })
    },
};

pub(crate) const SGLANG: Dialect = Dialect {
    name: "SGLang",
    version: hisparse_core::engines::sglang_0_5_23::VERSION,
    program: "sglang serve",
    given: "launch",
    never: "corrupt silently",
    max_seqs: "max_running_requests",
    max_len: "context_length",
    earliest: |errors| {
        use hisparse_core::engines::sglang_0_5_23::stages::SglangStage;
        let s = errors
            .iter()
            .filter_map(|d| match d.stage {
                Stage::Sglang(s) => Some(s),
                Stage::Vllm(_) => None,
            })
            .min()?;
        Some(Earliest {
            never: s == SglangStage::Never,
            when: s.when(),
            name: s.as_str(),
        })
    },
};

/// The dialect of a report's or plan's `engine` ("vllm", "sglang").
pub(crate) fn of(engine: &str) -> &'static Dialect {
    if engine == hisparse_core::report::ENGINE_SGLANG {
        &SGLANG
    } else {
        &VLLM
    }
}
