//! Datasheet figures of common GPUs: memory, bandwidth and BF16 throughput,
//! for `[hardware] gpu` and the plan's speed prior.

use serde::Serialize;

/// One GPU model's figures, from the vendor's datasheet.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct GpuSpec {
    /// Names accepted in `[hardware] gpu` (lowercase, first is canonical).
    pub names: &'static [&'static str],
    /// Memory of one GPU, GiB (datasheet GB, rounded).
    pub memory_gib: f64,
    /// Peak memory bandwidth, bytes/s.
    pub bandwidth: f64,
    /// Dense BF16 tensor throughput, FLOP/s.
    pub bf16_flops: f64,
    /// Where the numbers come from.
    pub source: &'static str,
}

/// Common serving GPUs (peak figures; the model applies achievable shares).
pub const GPUS: &[GpuSpec] = &[
    GpuSpec {
        names: &["h100", "h100-sxm", "h100-sxm5"],
        memory_gib: 80.0,
        bandwidth: 3.35e12,
        bf16_flops: 989e12,
        source: "NVIDIA H100 Tensor Core GPU datasheet, SXM5: 3.35 TB/s, 989 TFLOPS BF16 dense",
    },
    GpuSpec {
        names: &["h100-pcie"],
        memory_gib: 80.0,
        bandwidth: 2.0e12,
        bf16_flops: 756e12,
        source: "NVIDIA H100 datasheet, PCIe: 2.0 TB/s, 756 TFLOPS BF16 dense",
    },
    GpuSpec {
        names: &["h100-nvl"],
        memory_gib: 94.0,
        bandwidth: 3.9e12,
        bf16_flops: 835e12,
        source: "NVIDIA H100 datasheet, NVL: 3.9 TB/s, 835 TFLOPS BF16 dense",
    },
    GpuSpec {
        names: &["h200", "h200-sxm"],
        memory_gib: 141.0,
        bandwidth: 4.8e12,
        bf16_flops: 989e12,
        source: "NVIDIA H200 Tensor Core GPU datasheet, SXM: 4.8 TB/s, 989 TFLOPS BF16 dense",
    },
    GpuSpec {
        names: &["b200"],
        memory_gib: 180.0,
        bandwidth: 7.7e12,
        bf16_flops: 2250e12,
        source: "NVIDIA HGX B200 datasheet, per GPU: 180 GB, 7.7 TB/s, 2.25 PFLOPS BF16 dense",
    },
    GpuSpec {
        names: &["a100", "a100-80gb", "a100-sxm"],
        memory_gib: 80.0,
        bandwidth: 2.039e12,
        bf16_flops: 312e12,
        source: "NVIDIA A100 Tensor Core GPU datasheet, 80GB SXM: 2,039 GB/s, 312 TFLOPS BF16",
    },
    GpuSpec {
        names: &["a100-40gb"],
        memory_gib: 40.0,
        bandwidth: 1.555e12,
        bf16_flops: 312e12,
        source: "NVIDIA A100 datasheet, 40GB SXM: 1,555 GB/s, 312 TFLOPS BF16",
    },
    GpuSpec {
        names: &["l40s"],
        memory_gib: 48.0,
        bandwidth: 864e9,
        bf16_flops: 362e12,
        source: "NVIDIA L40S datasheet: 864 GB/s, 362 TFLOPS BF16 dense (733 with sparsity)",
    },
    GpuSpec {
        names: &["l4"],
        memory_gib: 24.0,
        bandwidth: 300e9,
        bf16_flops: 121e12,
        source: "NVIDIA L4 datasheet: 300 GB/s, 121 TFLOPS BF16 dense (242 with sparsity)",
    },
    GpuSpec {
        names: &["a10", "a10g"],
        memory_gib: 24.0,
        bandwidth: 600e9,
        bf16_flops: 125e12,
        source: "NVIDIA A10 datasheet: 600 GB/s, 125 TFLOPS BF16 dense",
    },
    GpuSpec {
        names: &["mi300x"],
        memory_gib: 192.0,
        bandwidth: 5.3e12,
        bf16_flops: 1307e12,
        source: "AMD Instinct MI300X datasheet: 5.3 TB/s, 1,307 TFLOPS BF16 dense",
    },
];

/// Look a GPU up by name (case and `_`/space insensitive).
pub fn gpu_by_name(name: &str) -> Option<&'static GpuSpec> {
    let n = name.trim().to_lowercase().replace(['_', ' '], "-");
    GPUS.iter().find(|g| g.names.contains(&n.as_str()))
}

/// The accepted GPU names, for error messages.
pub fn gpu_names() -> String {
    GPUS.iter()
        .map(|g| g.names[0])
        .collect::<Vec<_>>()
        .join(", ")
}
