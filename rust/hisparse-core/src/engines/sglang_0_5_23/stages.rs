//! When SGLang 0.5.23 refuses what a diagnostic reports, in launch order
//! (srt/server_args.py:668-720, then srt/arg_groups/pipeline.py, then
//! check_server_args; [`SglangStage`] cites each). Every SGLang diagnostic sets its stage explicitly with
//! [`crate::Diagnostic::stage`]; the rule's comment cites the line that raises.
//!
//! The stage is what the preflight saved the user: `argparse`, `resolve` and
//! `check` cost seconds; `after_weights_load` and later cost the minutes the
//! weights take to load on 8 GPUs; `never` is SGLang starting with a launch
//! that then breaks, corrupts or is silently changed.

pub use crate::stage::SglangStage;

/// The sentence the CLI prints for a diagnostic at `stage` ("SGLang 0.5.23
/// refuses this after the weights have loaded, ...").
pub fn sentence(stage: SglangStage, severity_is_error: bool) -> String {
    let v = super::version::VERSION;
    match stage {
        SglangStage::Never if severity_is_error => {
            format!("SGLang {v} accepts this and then breaks on it or corrupts silently")
        }
        SglangStage::Never => format!("SGLang {v} accepts this"),
        s => format!("SGLang {v} refuses this {}", s.when()),
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
        assert!(sentence(SglangStage::CoordinatorInit, true)
            .contains("SGLang 0.5.23 refuses this after the weights have loaded"));
        assert_eq!(SglangStage::parse("workers"), None);
    }
}
