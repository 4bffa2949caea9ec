//! HiSparse metrics: the one place the pool and the resolvers report to.
//!
//! Counters `hisparse_cache_hits`, `hisparse_cache_misses`,
//! `hisparse_host_to_device_bytes` and the gauge `hisparse_host_cache_usage_perc`
//! (1.0 = 100 %), named as vLLM 0.33 names them (HISPARSE.md §9;
//! `vllm/distributed/kv_transfer/kv_connector/v1/hisparse` metrics). Lock-free:
//! a pool and any number of resolvers share one `Arc<HiSparseMetrics>` and
//! update it from any thread; readers never block them.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// Shared counters and the host-usage gauge. Counters only grow, and stop
/// at 2^64 - 1 instead of wrapping to 0 (Prometheus would read a wrap as a
/// counter reset).
#[derive(Debug, Default)]
pub struct HiSparseMetrics {
    hits: AtomicU64,
    misses: AtomicU64,
    host_to_device_bytes: AtomicU64,
    host_blocks_used: AtomicU64,
    host_blocks_total: AtomicU64,
}

/// A consistent-enough reading of [`HiSparseMetrics`] (each field is read atomically).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MetricsSnapshot {
    /// Valid top-k entries found in the hot buffer (duplicates of a row count as hits).
    pub hits: u64,
    /// Rows loaded from the host pool (one per distinct missed row and state).
    pub misses: u64,
    /// misses x row_bytes, bytes.
    pub host_to_device_bytes: u64,
    /// host_blocks_used / host_blocks_total (0.0 for an empty pool); 1.0 = 100 %.
    pub host_cache_usage_perc: f64,
    pub host_blocks_used: u64,
    pub host_blocks_total: u64,
}

/// Prometheus families in exposition order: (name, type, help). vLLM registers
/// them through prometheus_client, which appends `_total` to counter samples.
const FAMILIES: [(&str, &str, &str); 4] = [
    (
        "vllm:hisparse_cache_hits_total",
        "counter",
        "Number of HiSparse device hot-buffer hits.",
    ),
    (
        "vllm:hisparse_cache_misses_total",
        "counter",
        "Number of HiSparse device hot-buffer misses.",
    ),
    (
        "vllm:hisparse_host_to_device_bytes_total",
        "counter",
        "Bytes transferred from host KV storage to HiSparse hot buffers.",
    ),
    (
        "vllm:hisparse_host_cache_usage_perc",
        "gauge",
        "HiSparse host KV pool usage; 1 means 100 percent.",
    ),
];

impl HiSparseMetrics {
    pub fn new() -> Self {
        Self::default()
    }

    /// Add one resolve call's hits, misses and copied bytes (saturating).
    pub fn record_resolve(&self, hits: u64, misses: u64, bytes: u64) {
        saturating_add(&self.hits, hits);
        saturating_add(&self.misses, misses);
        saturating_add(&self.host_to_device_bytes, bytes);
    }

    /// Set the host-usage gauge (the pool calls this after every change).
    pub fn set_host_usage(&self, used: u64, total: u64) {
        self.host_blocks_used.store(used, Ordering::Relaxed);
        self.host_blocks_total.store(total, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> MetricsSnapshot {
        let used = self.host_blocks_used.load(Ordering::Relaxed);
        let total = self.host_blocks_total.load(Ordering::Relaxed);
        MetricsSnapshot {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            host_to_device_bytes: self.host_to_device_bytes.load(Ordering::Relaxed),
            host_cache_usage_perc: if total == 0 {
                0.0
            } else {
                used as f64 / total as f64
            },
            host_blocks_used: used,
            host_blocks_total: total,
        }
    }

    /// The metrics in the Prometheus text exposition format (version 0.0.4),
    /// as vLLM's `/metrics` shows them: `# HELP` and `# TYPE` lines, then one
    /// sample per family with `labels` (e.g. `[("model_name", "glm-5")]`).
    pub fn prometheus_text(&self, labels: &[(&str, &str)]) -> String {
        let s = self.snapshot();
        let values = [
            s.hits as f64,
            s.misses as f64,
            s.host_to_device_bytes as f64,
            s.host_cache_usage_perc,
        ];
        let label_text = if labels.is_empty() {
            String::new()
        } else {
            let parts: Vec<String> = labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", escape_label(v)))
                .collect();
            format!("{{{}}}", parts.join(","))
        };
        let mut out = String::new();
        for ((name, kind, help), value) in FAMILIES.iter().zip(values) {
            // Writing to a String cannot fail.
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} {kind}");
            let _ = writeln!(out, "{name}{label_text} {}", prom_float(value));
        }
        out
    }
}

fn saturating_add(counter: &AtomicU64, n: u64) {
    if n != 0 {
        // The closure always returns Some, so this cannot fail.
        let _ = counter.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
            Some(v.saturating_add(n))
        });
    }
}

/// Label values escape backslash, double quote and newline (exposition format).
fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// prometheus_client writes floats as Python's repr: `3.0`, `0.75`,
/// `1.8446744073709552e+19` (a saturated counter), `4.6e-10`.
fn prom_float(v: f64) -> String {
    let a = v.abs();
    if v.is_finite() && a != 0.0 && !(1e-4..1e16).contains(&a) {
        // Python: scientific below 1e-4 and from 1e16, exponent signed, two digits at least.
        let text = format!("{v:e}");
        let (mantissa, exp) = text.split_once('e').unwrap_or((&text, "0"));
        let (sign, digits) = match exp.strip_prefix('-') {
            Some(d) => ('-', d),
            None => ('+', exp),
        };
        return format!("{mantissa}e{sign}{digits:0>2}");
    }
    if v.fract() == 0.0 {
        format!("{v:.1}")
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::is_identifier;

    #[test]
    fn counts_and_exposition() {
        let m = HiSparseMetrics::new();
        m.record_resolve(3, 2, 2 * 656);
        m.record_resolve(1, 0, 0);
        m.set_host_usage(3, 4);
        let s = m.snapshot();
        assert_eq!((s.hits, s.misses, s.host_to_device_bytes), (4, 2, 1312));
        assert_eq!(s.host_cache_usage_perc, 0.75);
        let text = m.prometheus_text(&[("model_name", "a\"b")]);
        assert!(text.contains("# TYPE vllm:hisparse_cache_hits_total counter\n"));
        assert!(text.contains("vllm:hisparse_cache_hits_total{model_name=\"a\\\"b\"} 4.0\n"));
        assert!(text
            .contains("vllm:hisparse_host_to_device_bytes_total{model_name=\"a\\\"b\"} 1312.0\n"));
        assert!(text.contains("vllm:hisparse_host_cache_usage_perc{model_name=\"a\\\"b\"} 0.75\n"));
        assert_eq!(text.lines().count(), 12);
        assert!(is_identifier("model_name") && !is_identifier("1x") && !is_identifier(""));
    }

    #[test]
    fn counters_saturate_instead_of_wrapping() {
        let m = HiSparseMetrics::new();
        m.record_resolve(u64::MAX - 1, 1, u64::MAX);
        m.record_resolve(5, u64::MAX, 1);
        let s = m.snapshot();
        assert_eq!(
            (s.hits, s.misses, s.host_to_device_bytes),
            (u64::MAX, u64::MAX, u64::MAX)
        );
        // As Python's repr (prometheus_client) writes them.
        assert_eq!(prom_float(u64::MAX as f64), "1.8446744073709552e+19");
        assert_eq!(prom_float(1e-5), "1e-05");
        assert_eq!(
            prom_float(1.0 / (1u64 << 31) as f64),
            "4.656612873077393e-10"
        );
        assert_eq!(prom_float(0.75), "0.75");
        assert_eq!(prom_float(3.0), "3.0");
        assert_eq!(prom_float(0.0), "0.0");
    }

    #[test]
    fn empty_pool_usage_is_zero() {
        assert_eq!(HiSparseMetrics::new().snapshot().host_cache_usage_perc, 0.0);
    }
}
