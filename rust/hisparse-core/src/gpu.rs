//! The GPUs `--gpu NAME` knows: memory (for the planner's KV room) and the
//! largest shared memory one block may use (for vLLM 0.33's residency-resolver
//! check), each with its source. A GPU is found by its `--gpu` name or by the
//! name its driver reports (what vLLM's `current_platform.get_device_name()`
//! returns, e.g. `NVIDIA H100 80GB HBM3`), so the vLLM plugin can name the GPU
//! vLLM detected; a name not in the table is not guessed at.
//!
//! Shared memory is the opt-in maximum per block, the attribute vLLM reads:
//! `get_max_shared_memory_bytes` (`vllm/utils/mem_utils.py:35`) calls
//! `get_max_shared_memory_per_block_device_attribute`, which is
//! `cudaDevAttrMaxSharedMemoryPerBlockOptin` on CUDA and
//! `hipDeviceAttributeMaxSharedMemoryPerBlock` on ROCm (vLLM
//! `csrc/cuda_utils_kernels.cu`). Memory is the vendor's nominal capacity; the
//! driver reports slightly less, so a plan from it is an upper bound (as it
//! already is: vLLM also reserves activation and CUDA-graph memory), and
//! `--gpu-memory-gib` gives the exact figure when it is known.

use serde::{Deserialize, Serialize};

/// One GPU model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuSpec {
    /// The `--gpu` name, lower case (`h200`).
    pub name: String,
    /// What it is (`NVIDIA H200 SXM, 141 GB HBM3e`).
    pub description: String,
    /// `cuda` or `rocm` (vLLM's platform).
    pub platform: String,
    /// CUDA compute capability or AMD architecture (`sm_90`, `gfx942`).
    pub arch: String,
    /// Memory of one GPU, GiB (the vendor's nominal figure).
    pub memory_gib: f64,
    pub memory_source: String,
    /// Largest shared memory (LDS on AMD) one block may use, bytes (opt-in).
    pub max_shared_memory_per_block: u64,
    pub shared_memory_source: String,
}

struct Row {
    names: &'static [&'static str],
    /// The names the driver reports (`nvidia-smi`, NVML `nvmlDeviceGetName`,
    /// vLLM `current_platform.get_device_name()`), matched exactly, any case.
    device_names: &'static [&'static str],
    description: &'static str,
    platform: &'static str,
    arch: &'static str,
    memory_gib: f64,
    memory_source: &'static str,
    shared_kib: u64,
    shared_source: &'static str,
}

const AMPERE_A100: &str = "NVIDIA Ampere tuning guide (docs.nvidia.com/cuda/ampere-tuning-guide): compute capability 8.0, up to 163 KB of shared memory per thread block";
const AMPERE_86_ADA: &str = "NVIDIA Ada tuning guide (docs.nvidia.com/cuda/ada-tuning-guide): compute capability 8.9, up to 99 KB of shared memory per thread block";
const HOPPER: &str = "NVIDIA Hopper tuning guide (docs.nvidia.com/cuda/hopper-tuning-guide): compute capability 9.0, up to 227 KB of shared memory per thread block";
const BLACKWELL: &str = "NVIDIA Blackwell tuning guide (docs.nvidia.com/cuda/blackwell-tuning-guide): compute capability 10.0, up to 227 KB of shared memory per thread block";
const CDNA3: &str = "AMD Instinct MI300 (CDNA 3) ISA reference: 64 KiB of LDS per compute unit, the most one workgroup can allocate (hipDeviceAttributeMaxSharedMemoryPerBlock)";

const TABLE: &[Row] = &[
    Row {
        names: &["a100", "a100-80gb", "a100-sxm"],
        device_names: &["NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB PCIe"],
        description: "NVIDIA A100 80 GB (SXM4, PCIe)",
        platform: "cuda",
        arch: "sm_80",
        memory_gib: 80.0,
        memory_source: "NVIDIA A100 datasheet: 80 GB HBM2e",
        shared_kib: 163,
        shared_source: AMPERE_A100,
    },
    Row {
        names: &["a100-40gb"],
        device_names: &["NVIDIA A100-SXM4-40GB", "NVIDIA A100-PCIE-40GB"],
        description: "NVIDIA A100 40 GB",
        platform: "cuda",
        arch: "sm_80",
        memory_gib: 40.0,
        memory_source: "NVIDIA A100 datasheet: 40 GB HBM2",
        shared_kib: 163,
        shared_source: AMPERE_A100,
    },
    Row {
        names: &["l40s"],
        device_names: &["NVIDIA L40S"],
        description: "NVIDIA L40S",
        platform: "cuda",
        arch: "sm_89",
        memory_gib: 48.0,
        memory_source: "NVIDIA L40S datasheet: 48 GB GDDR6",
        shared_kib: 99,
        shared_source: AMPERE_86_ADA,
    },
    Row {
        names: &["h100", "h100-sxm", "h100-80gb"],
        device_names: &["NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe"],
        description: "NVIDIA H100 80 GB (SXM, PCIe)",
        platform: "cuda",
        arch: "sm_90",
        memory_gib: 80.0,
        memory_source: "NVIDIA H100 datasheet: 80 GB (HBM3 on SXM, HBM2e on PCIe)",
        shared_kib: 227,
        shared_source: HOPPER,
    },
    Row {
        names: &["h200", "h200-sxm"],
        device_names: &["NVIDIA H200", "NVIDIA H200 NVL"],
        description: "NVIDIA H200 (SXM, NVL)",
        platform: "cuda",
        arch: "sm_90",
        memory_gib: 141.0,
        memory_source: "NVIDIA H200 datasheet: 141 GB HBM3e",
        shared_kib: 227,
        shared_source: HOPPER,
    },
    Row {
        names: &["b200"],
        device_names: &["NVIDIA B200"],
        description: "NVIDIA B200",
        platform: "cuda",
        arch: "sm_100",
        memory_gib: 180.0,
        memory_source: "NVIDIA DGX B200 datasheet: 1,440 GB of HBM3e for 8 GPUs (180 GB each)",
        shared_kib: 227,
        shared_source: BLACKWELL,
    },
    Row {
        names: &["mi300x"],
        device_names: &["AMD Instinct MI300X", "AMD_Instinct_MI300X"],
        description: "AMD Instinct MI300X",
        platform: "rocm",
        arch: "gfx942",
        memory_gib: 192.0,
        memory_source: "AMD Instinct MI300X datasheet: 192 GB HBM3",
        shared_kib: 64,
        shared_source: CDNA3,
    },
];

/// The `--gpu` names, one per model (aliases left out), for messages.
pub fn names() -> Vec<&'static str> {
    TABLE.iter().map(|r| r.names[0]).collect()
}

/// The GPU called `name`: a `--gpu` name (case and `_`/`-` insensitive:
/// `H200`, `a100_80gb`) or the name the driver reports (`NVIDIA H200`,
/// `NVIDIA H100 80GB HBM3`, any case).
pub fn lookup(name: &str) -> Result<GpuSpec, String> {
    let wanted = name.trim().to_ascii_lowercase().replace('_', "-");
    let reported = name.trim();
    let row = TABLE
        .iter()
        .find(|r| {
            r.names.contains(&wanted.as_str())
                || r.device_names.iter().any(|d| d.eq_ignore_ascii_case(reported))
        })
        .ok_or_else(|| {
            let mut known: Vec<&str> = TABLE.iter().flat_map(|r| r.names.iter().copied()).collect();
            let hint = crate::config::schema::closest(&wanted, &known)
                .map(|c| format!("did you mean {c}? "))
                .unwrap_or_default();
            known.sort_unstable();
            format!(
                "--gpu {name:?} is not a GPU hisparse-check knows; {hint}known: {}, or the name the driver reports for one (\"NVIDIA H200\"); or give --gpu-memory-gib",
                known.join(", ")
            )
        })?;
    Ok(GpuSpec {
        name: row.names[0].to_owned(),
        description: row.description.to_owned(),
        platform: row.platform.to_owned(),
        arch: row.arch.to_owned(),
        memory_gib: row.memory_gib,
        memory_source: row.memory_source.to_owned(),
        max_shared_memory_per_block: row.shared_kib * 1024,
        shared_memory_source: row.shared_source.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_aliases_and_figures() {
        let h200 = lookup("H200").unwrap();
        assert_eq!(h200.name, "h200");
        assert_eq!(h200.max_shared_memory_per_block, 232_448);
        assert_eq!(lookup("a100_80gb").unwrap().name, "a100");
        assert_eq!(lookup("l40s").unwrap().max_shared_memory_per_block, 101_376);
        assert_eq!(lookup("a100").unwrap().max_shared_memory_per_block, 166_912);
        assert_eq!(lookup("mi300x").unwrap().platform, "rocm");
        let err = lookup("h2000").unwrap_err();
        assert!(err.contains("did you mean h200?"), "{err}");
        // The names the driver reports, any case; nothing else is guessed at.
        assert_eq!(lookup("NVIDIA H200").unwrap().name, "h200");
        assert_eq!(lookup("nvidia h100 80gb hbm3").unwrap().name, "h100");
        assert_eq!(lookup("NVIDIA B200").unwrap().arch, "sm_100");
        assert_eq!(lookup("NVIDIA A100-PCIE-40GB").unwrap().name, "a100-40gb");
        for unknown in [
            "NVIDIA H20",
            "NVIDIA GH200 480GB",
            "NVIDIA H100",
            "H200 NVIDIA",
        ] {
            assert!(lookup(unknown).is_err(), "{unknown}");
        }
        // Every alias is unique, so a name means one GPU.
        let mut all: Vec<&str> = TABLE.iter().flat_map(|r| r.names.iter().copied()).collect();
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n);
        let mut reported: Vec<String> = TABLE
            .iter()
            .flat_map(|r| r.device_names.iter().map(|d| d.to_ascii_lowercase()))
            .collect();
        let n = reported.len();
        reported.sort_unstable();
        reported.dedup();
        assert_eq!(reported.len(), n);
    }
}
