//! What keeps a model config from being read at all (exit code 2 in
//! `hisparse-check`): the same for every engine, since each reads a local
//! `config.json` or the Hugging Face cache the same way.

/// Input that could not be read at all (exit code 2 in `hisparse-check`).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("model config not found: {path} (pass a local config.json or a directory containing one; hisparse-check does not download from a hub)")]
    ModelNotFound { path: String },
    #[error("model {model} is not a local path and its config.json is not in the local Hugging Face cache (read as vLLM does offline; nothing is downloaded). Looked at:\n  {}\nTo fetch it: {fetch}", looked.join("\n  "))]
    ModelNotCached {
        model: String,
        /// Every place looked at, with what was found there.
        looked: Vec<String>,
        /// The command that puts it in the cache.
        fetch: String,
    },
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// Not a regular file (a FIFO, device, directory), too large, or unreadable.
    #[error("cannot read {path}: {source}")]
    File {
        path: String,
        #[source]
        source: crate::files::FileError,
    },
    #[error("{path} is not valid JSON: {source}")]
    ModelJson {
        path: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("{path}: the model config must be a JSON object, got {kind}")]
    ModelNotObject { path: String, kind: &'static str },
}

impl LoadError {
    /// Stable code: `model_not_found`, `model_not_cached`, `not_a_regular_file`, `file_too_large`,
    /// `read_failed`, `model_json_invalid` or `model_not_object`.
    pub fn code(&self) -> &'static str {
        match self {
            LoadError::ModelNotFound { .. } => "model_not_found",
            LoadError::ModelNotCached { .. } => "model_not_cached",
            LoadError::File { source, .. } => match source.code() {
                "not_found" => "model_not_found",
                code => code,
            },
            LoadError::Io { .. } => "read_failed",
            LoadError::ModelJson { .. } => "model_json_invalid",
            LoadError::ModelNotObject { .. } => "model_not_object",
        }
    }
}
