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
    /// Streaming multiprocessors (compute units on AMD) the product enables.
    pub sm_count: u32,
    /// Largest shared memory (LDS on AMD) one block may use, bytes (opt-in).
    pub max_shared_memory_per_block: u64,
    pub shared_memory_source: String,
    /// GPUs a node of this GPU's usual server holds (8 on an HGX / DGX
    /// board, 4 on a GB200 / GB300 NVL72 compute tray): the default of
    /// `--gpus-per-node` with `--gpu`; None for a PCIe or NVL card, sold in
    /// servers of any size (give `--gpus-per-node`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus_per_node: Option<u32>,
    /// That server, by name (`HGX H200 / DGX H200 (8 SXM GPUs a node)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
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
    /// Enabled SMs; the source is cited in a comment on each row.
    sm_count: u32,
    shared_kib: u64,
    /// The usual server of this GPU, as (GPUs a node, its name): what
    /// `--gpus-per-node` defaults to with `--gpu`; None for a card sold in
    /// servers of any size (PCIe, NVL pairs, workstation boards).
    server: Option<(u32, &'static str)>,
    shared_source: &'static str,
}

const AMPERE_A100: &str = "NVIDIA Ampere tuning guide (docs.nvidia.com/cuda/ampere-tuning-guide): compute capability 8.0, up to 163 KB of shared memory per thread block";
const AMPERE_86_ADA: &str = "NVIDIA Ada tuning guide (docs.nvidia.com/cuda/ada-tuning-guide): compute capability 8.9, up to 99 KB of shared memory per thread block";
const HOPPER: &str = "NVIDIA Hopper tuning guide (docs.nvidia.com/cuda/hopper-tuning-guide): compute capability 9.0, up to 227 KB of shared memory per thread block";
const BLACKWELL: &str = "NVIDIA Blackwell tuning guide (docs.nvidia.com/cuda/blackwell-tuning-guide): compute capability 10.0, up to 227 KB of shared memory per thread block";
const BLACKWELL_ULTRA: &str = "CUDA C++ Programming Guide, Technical Specifications per Compute Capability (docs.nvidia.com/cuda/cuda-c-programming-guide, table 'Technical Specifications'): compute capability 10.3, up to 227 KB of shared memory per thread block";
const BLACKWELL_RTX: &str = "CUDA C++ Programming Guide, Technical Specifications per Compute Capability (docs.nvidia.com/cuda/cuda-c-programming-guide): compute capability 12.0, up to 99 KB of shared memory per thread block (128 KB per SM)";
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
        // NVIDIA A100 Tensor Core GPU Architecture whitepaper: 108 SMs.
        sm_count: 108,
        shared_kib: 163,
        server: Some((8, "HGX A100 / DGX A100 (8 SXM GPUs a node)")),
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
        // NVIDIA A100 Tensor Core GPU Architecture whitepaper: 108 SMs.
        sm_count: 108,
        shared_kib: 163,
        server: Some((8, "HGX A100 / DGX A100 (8 SXM GPUs a node)")),
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
        // NVIDIA Ada Lovelace GPU Architecture whitepaper (AD102 in L40S): 142 SMs.
        sm_count: 142,
        shared_kib: 99,
        server: None,
        shared_source: AMPERE_86_ADA,
    },
    // Hopper. Memory: NVIDIA H100 / H200 Tensor Core GPU data sheets
    // (nvidia.com/en-us/data-center/h100/, /h200/); SMs: NVIDIA H100 Tensor Core
    // GPU Architecture whitepaper (SXM5 132 SMs, PCIe 114 SMs; H100 NVL, H200 and
    // H800 SXM are the SXM5 configuration).
    Row {
        names: &["h100", "h100-sxm", "h100-80gb"],
        device_names: &["NVIDIA H100 80GB HBM3"],
        description: "NVIDIA H100 SXM 80 GB",
        platform: "cuda",
        arch: "sm_90",
        memory_gib: 80.0,
        memory_source: "NVIDIA H100 data sheet: H100 SXM, 80 GB HBM3",
        sm_count: 132,
        shared_kib: 227,
        server: Some((8, "HGX H100 / DGX H100 (8 SXM GPUs a node)")),
        shared_source: HOPPER,
    },
    Row {
        names: &["h100-pcie"],
        device_names: &["NVIDIA H100 PCIe"],
        description: "NVIDIA H100 PCIe 80 GB",
        platform: "cuda",
        arch: "sm_90",
        memory_gib: 80.0,
        memory_source: "NVIDIA H100 data sheet: H100 PCIe, 80 GB HBM2e",
        sm_count: 114,
        shared_kib: 227,
        server: None,
        shared_source: HOPPER,
    },
    Row {
        names: &["h100-nvl"],
        device_names: &["NVIDIA H100 NVL"],
        description: "NVIDIA H100 NVL 94 GB",
        platform: "cuda",
        arch: "sm_90",
        memory_gib: 94.0,
        memory_source: "NVIDIA H100 data sheet: H100 NVL, 94 GB HBM3",
        sm_count: 132,
        shared_kib: 227,
        server: None,
        shared_source: HOPPER,
    },
    Row {
        names: &["h800", "h800-sxm"],
        device_names: &["NVIDIA H800"],
        description: "NVIDIA H800 SXM 80 GB",
        platform: "cuda",
        arch: "sm_90",
        memory_gib: 80.0,
        memory_source: "NVIDIA H800 Tensor Core GPU data sheet (nvidia.cn/data-center/h800/): H800 SXM, 80 GB HBM3",
        sm_count: 132,
        shared_kib: 227,
        server: Some((8, "HGX H800 (8 SXM GPUs a node)")),
        shared_source: HOPPER,
    },
    Row {
        names: &["h20"],
        device_names: &["NVIDIA H20"],
        description: "NVIDIA H20 96 GB",
        platform: "cuda",
        arch: "sm_90",
        memory_gib: 96.0,
        // NVIDIA publishes no H20 data sheet on nvidia.com; 96 GB HBM3 and 78 SMs
        // are the figures NVIDIA's partners list and the driver reports
        // (cudaDevAttrMultiProcessorCount).
        memory_source: "NVIDIA H20 product brief (via NVIDIA partners): 96 GB HBM3",
        sm_count: 78,
        shared_kib: 227,
        server: Some((8, "HGX H20 (8 SXM GPUs a node)")),
        shared_source: HOPPER,
    },
    Row {
        names: &["h200", "h200-sxm"],
        device_names: &["NVIDIA H200"],
        description: "NVIDIA H200 SXM 141 GB",
        platform: "cuda",
        arch: "sm_90",
        memory_gib: 141.0,
        memory_source: "NVIDIA H200 data sheet: H200 SXM, 141 GB HBM3e",
        sm_count: 132,
        shared_kib: 227,
        server: Some((8, "HGX H200 / DGX H200 (8 SXM GPUs a node)")),
        shared_source: HOPPER,
    },
    Row {
        names: &["h200-nvl"],
        device_names: &["NVIDIA H200 NVL"],
        description: "NVIDIA H200 NVL 141 GB",
        platform: "cuda",
        arch: "sm_90",
        memory_gib: 141.0,
        memory_source: "NVIDIA H200 data sheet: H200 NVL, 141 GB HBM3e",
        sm_count: 132,
        shared_kib: 227,
        server: None,
        shared_source: HOPPER,
    },
    // Blackwell. Memory: NVIDIA DGX B200 data sheet (nvidia.com/en-us/data-center/dgx-b200/:
    // 1,440 GB for 8 GPUs), GB200 NVL72 data sheet (nvidia.com/en-us/data-center/gb200-nvl72/:
    // up to 13.4 TB HBM3e for 72 GPUs, 186 GB each); SMs: NVIDIA Blackwell architecture
    // technical brief (148 SMs enabled of the two dies' 160).
    Row {
        names: &["b200"],
        device_names: &["NVIDIA B200"],
        description: "NVIDIA B200 180 GB",
        platform: "cuda",
        arch: "sm_100",
        memory_gib: 180.0,
        memory_source: "NVIDIA DGX B200 datasheet: 1,440 GB of HBM3e for 8 GPUs (180 GB each)",
        sm_count: 148,
        shared_kib: 227,
        server: Some((8, "HGX B200 / DGX B200 (8 SXM GPUs a node)")),
        shared_source: BLACKWELL,
    },
    Row {
        names: &["gb200"],
        device_names: &["NVIDIA GB200"],
        description: "NVIDIA GB200 (Grace Blackwell superchip GPU) 186 GB",
        platform: "cuda",
        arch: "sm_100",
        memory_gib: 186.0,
        memory_source: "NVIDIA GB200 NVL72 datasheet: up to 13.4 TB of HBM3e for 72 GPUs (186 GB each)",
        sm_count: 148,
        shared_kib: 227,
        server: Some((4, "GB200 NVL72 compute tray (4 GPUs a node, 18 trays a rack)")),
        shared_source: BLACKWELL,
    },
    // Blackwell Ultra. Memory: NVIDIA HGX B300 / GB300 NVL72 data sheets
    // (nvidia.com/en-us/data-center/hgx/, /gb300-nvl72/: 288 GB HBM3e per GPU);
    // SMs: NVIDIA technical blog "Inside NVIDIA Blackwell Ultra" (160 SMs).
    Row {
        names: &["b300"],
        device_names: &["NVIDIA B300", "NVIDIA B300 SXM6 AC"],
        description: "NVIDIA B300 (Blackwell Ultra) 288 GB",
        platform: "cuda",
        arch: "sm_103",
        memory_gib: 288.0,
        memory_source: "NVIDIA HGX B300 datasheet: 288 GB HBM3e per GPU",
        sm_count: 160,
        shared_kib: 227,
        server: Some((8, "HGX B300 / DGX B300 (8 SXM GPUs a node)")),
        shared_source: BLACKWELL_ULTRA,
    },
    Row {
        names: &["gb300"],
        device_names: &["NVIDIA GB300"],
        description: "NVIDIA GB300 (Grace Blackwell Ultra superchip GPU) 288 GB",
        platform: "cuda",
        arch: "sm_103",
        memory_gib: 288.0,
        memory_source: "NVIDIA GB300 NVL72 datasheet: 288 GB HBM3e per GPU",
        sm_count: 160,
        shared_kib: 227,
        server: Some((4, "GB300 NVL72 compute tray (4 GPUs a node, 18 trays a rack)")),
        shared_source: BLACKWELL_ULTRA,
    },
    // RTX PRO 6000 Blackwell (GB202): NVIDIA RTX PRO 6000 Blackwell data sheets
    // (nvidia.com/en-us/products/workstations/professional-desktop-gpus/rtx-pro-6000/,
    // /data-center/rtx-pro-6000-blackwell-server-edition/): 96 GB GDDR7, 24,064 CUDA
    // cores = 188 SMs x 128.
    Row {
        names: &["rtx-pro-6000", "rtx-pro-6000-blackwell"],
        device_names: &[
            "NVIDIA RTX PRO 6000 Blackwell Server Edition",
            "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
            "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",
        ],
        description: "NVIDIA RTX PRO 6000 Blackwell 96 GB",
        platform: "cuda",
        arch: "sm_120",
        memory_gib: 96.0,
        memory_source: "NVIDIA RTX PRO 6000 Blackwell datasheet: 96 GB GDDR7",
        sm_count: 188,
        shared_kib: 99,
        server: None,
        shared_source: BLACKWELL_RTX,
    },
    Row {
        names: &["mi300x"],
        device_names: &["AMD Instinct MI300X", "AMD_Instinct_MI300X"],
        description: "AMD Instinct MI300X",
        platform: "rocm",
        arch: "gfx942",
        memory_gib: 192.0,
        memory_source: "AMD Instinct MI300X datasheet: 192 GB HBM3",
        // AMD Instinct MI300X data sheet: 304 compute units.
        sm_count: 304,
        shared_kib: 64,
        server: Some((8, "AMD Instinct MI300X platform (8 OAM GPUs a node)")),
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
            let hint = crate::words::closest(&wanted, &known)
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
        sm_count: row.sm_count,
        max_shared_memory_per_block: row.shared_kib * 1024,
        shared_memory_source: row.shared_source.to_owned(),
        gpus_per_node: row.server.map(|(n, _)| n),
        server: row.server.map(|(_, s)| s.to_owned()),
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
        for unknown in ["NVIDIA GH200 480GB", "NVIDIA H100", "H200 NVIDIA"] {
            assert!(lookup(unknown).is_err(), "{unknown}");
        }
        // The GPUs DSA models are served on, by name: none is "did you mean" another.
        for (name, arch, sms, gib) in [
            ("h20", "sm_90", 78, 96.0),
            ("h800", "sm_90", 132, 80.0),
            ("h100-pcie", "sm_90", 114, 80.0),
            ("h100-nvl", "sm_90", 132, 94.0),
            ("h200-nvl", "sm_90", 132, 141.0),
            ("gb200", "sm_100", 148, 186.0),
            ("b300", "sm_103", 160, 288.0),
            ("gb300", "sm_103", 160, 288.0),
            ("rtx-pro-6000", "sm_120", 188, 96.0),
        ] {
            let g = lookup(name).unwrap();
            assert_eq!(
                (g.arch.as_str(), g.sm_count, g.memory_gib),
                (arch, sms, gib),
                "{name}"
            );
        }
        assert_eq!(lookup("NVIDIA H20").unwrap().name, "h20");
        assert_eq!(lookup("NVIDIA H100 PCIe").unwrap().name, "h100-pcie");
        // sm_120 has 99 KiB per block, sm_90/sm_100/sm_103 227 KiB.
        assert_eq!(
            lookup("rtx-pro-6000").unwrap().max_shared_memory_per_block,
            99 * 1024
        );
        assert_eq!(
            lookup("gb300").unwrap().max_shared_memory_per_block,
            227 * 1024
        );
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
