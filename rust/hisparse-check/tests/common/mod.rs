//! What the CLI tests share: the binary, the bundled DeepSeek-V3.2 model and
//! one rendering of a run for assertion messages. (Each test file is its own
//! crate and uses a part of it, hence the dead_code allowances.)

use std::path::PathBuf;
use std::process::Output;

/// The hisparse-check binary cargo built for these tests.
#[allow(dead_code)]
pub const BIN: &str = env!("CARGO_BIN_EXE_hisparse-check");

/// tests/data/models/deepseek-v3.2, as a path argument.
#[allow(dead_code)]
pub fn model() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/models/deepseek-v3.2")
        .display()
        .to_string()
}

/// A run's exit status, stdout and stderr, for assertion messages.
#[allow(dead_code)]
pub fn text(o: &Output) -> String {
    format!(
        "exit {:?}\n{}{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}
