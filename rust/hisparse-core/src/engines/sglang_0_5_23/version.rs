//! The SGLang release this tree follows (its own module, so the tree's files
//! can name it without importing the tree's root).

/// The SGLang release whose behaviour this module follows.
pub const VERSION: &str = "0.5.23";
