//! The bounds on inputs, in one place. Every input a user controls has one,
//! each with its own error, so no input makes a call hang, exhaust memory or
//! overflow the stack; README.md "Limits" lists them with their errors.
//!
//! Bounds of the host pool and resolver live beside their types
//! ([`crate::pool`]: block ids < 2^31, `device_buffer_size <= 32768`,
//! [`MAX_RESOLVE_ENTRIES`](crate::pool::resolver::MAX_RESOLVE_ENTRIES)).

/// Deepest nesting of a JSON value built from Python objects or by a fix,
/// and of a JSON flag's text (`pytext::json_loads`, which says how deep vLLM
/// reads it), so serve args are bounded alike however they arrive, and every
/// walk over a value stays shallow. vLLM's configs nest fewer than 10 levels; a MultiConnector chain
/// past vLLM's 16-level limit (`max_depth_exceeded`) takes about 50. Error:
/// `input_too_deep` (a fix: "nests deeper than ...").
pub const MAX_JSON_DEPTH: usize = 128;

/// Size budget of serve args given as Python objects: 16 bytes per value
/// plus the bytes of every string and key. Real serve args are a few KB;
/// the budget admits an `hf_config` as large as [`MAX_MODEL_CONFIG_BYTES`].
/// Error: `input_too_large`.
pub const MAX_INPUT_BYTES: usize = 16 << 20;

/// Largest model `config.json` read (real ones are under 64 KB). Error:
/// `LoadError::TooLarge` (`file_too_large`). Only the keys the resolver
/// reads are built, so memory stays near the file's size.
pub const MAX_MODEL_CONFIG_BYTES: u64 = 16 << 20;

/// Largest `--config` YAML file read (vLLM serve-config files are a few
/// hundred bytes). Error: `file_too_large`.
pub const MAX_SERVE_CONFIG_BYTES: u64 = 1 << 20;

/// Longest `host_memory_source` planner option (a phrase the report's
/// messages quote, such as the vLLM plugin's "this node's available RAM").
/// Error: a usage error naming the option.
pub const MAX_HOST_MEMORY_SOURCE_BYTES: usize = 512;

/// `--gpus-per-node` (the `gpus_per_node` machine option): 1 ..= 1024, far
/// above any server (an NVL72 rack is 72 GPUs over 18 nodes).
pub const MAX_GPUS_PER_NODE: u64 = 1024;

/// "Did you mean" compares names up to this many bytes (the longest vLLM
/// flag or config key has about 50): a longer name gets no suggestion, so a
/// megabyte-long typo costs nothing.
pub const MAX_SUGGEST_LEN: usize = 128;

/// "Did you mean" looks at no more than this many candidate names.
pub const MAX_SUGGEST_CANDIDATES: usize = 1024;

/// Unrecognized flags of one command line that get a "did you mean" (each
/// compares the name with every flag): the rest are still reported, with
/// "remove it", so a pasted argv of 10^5 typos answers in milliseconds.
pub const MAX_ARGV_SUGGESTIONS: usize = 32;

/// Words of one launch command line read at most (SGLang 0.5.23 has 532
/// options; a real launch has a few hundred words even with long nargs lists).
pub const MAX_ARGV_WORDS: usize = 16_384;

/// The `tensor_parallel_heads_mismatch` fix searches divisors of the head
/// count by trial division up to this bound (and their cofactors): exact for
/// head counts up to 2^32 (real models have at most a few hundred heads),
/// and for larger ones still a divisor, so the fix passes.
pub const MAX_DIVISOR_TRIALS: u64 = 1 << 16;
