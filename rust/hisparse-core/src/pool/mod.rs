//! The host KV tier's bookkeeping: which host blocks hold each request's KV
//! ([`HostKVPool`]), where each layer's rows sit in the pool tensor
//! ([`PoolLayout`]), which top-k rows are already in a request's GPU hot
//! buffer and what to copy ([`ResidencyResolver`], HISPARSE.md §6), and the
//! counters vLLM exposes ([`HiSparseMetrics`], §9).
//!
//! Data flows config -> pool -> resolver -> kernels: [`HostKVPool::from_resolved`]
//! sizes the pool from a resolved configuration, `host_rows` turns token
//! positions into host rows, the resolver turns the indexer's top-k host rows
//! into hot-buffer slots and a miss plan the gather kernel copies.

pub mod error;
pub mod host_pool;
pub mod layout;
pub mod metrics;
pub mod resolver;

pub use error::{HostPoolExhausted, PoolError};
pub use host_pool::{HostKVPool, PoolStats};
pub use layout::PoolLayout;
pub use metrics::{HiSparseMetrics, MetricsSnapshot};
pub use resolver::{IndexInt, ResidencyResolver, ResolveOutput, MAX_DEVICE_BUFFER_SIZE};
