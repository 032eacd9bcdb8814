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
        names: &["b300"],
        memory_gib: 268.0,
        bandwidth: 8.0e12,
        bf16_flops: 2250e12,
        source: "NVIDIA Blackwell Ultra (HGX B300) per GPU: 288 GB HBM3e, 8 TB/s; BF16 dense as B200",
    },
    GpuSpec {
        names: &["h20"],
        memory_gib: 96.0,
        bandwidth: 4.0e12,
        bf16_flops: 148e12,
        source: "NVIDIA H20: 96 GB HBM3, 4.0 TB/s, 148 TFLOPS BF16 dense",
    },
    GpuSpec {
        names: &[
            "rtx-pro-6000",
            "rtx-pro-6000-blackwell",
            "rtx-pro-6000-server",
            "rtx-pro-6000-blackwell-server-edition",
        ],
        memory_gib: 96.0,
        bandwidth: 1.792e12,
        bf16_flops: 500e12,
        source: "NVIDIA RTX PRO 6000 Blackwell: 96 GB GDDR7 on 512 bits at 28 Gbps, 1,792 GB/s; 4,000 AI TOPS FP4 with sparsity, so about 500 TFLOPS BF16 dense",
    },
    GpuSpec {
        names: &["rtx-5090"],
        memory_gib: 32.0,
        bandwidth: 1.792e12,
        bf16_flops: 209e12,
        source: "NVIDIA GeForce RTX 5090: 32 GB GDDR7, 1,792 GB/s, about 209 TFLOPS BF16 dense",
    },
    GpuSpec {
        names: &["mi300x"],
        memory_gib: 192.0,
        bandwidth: 5.3e12,
        bf16_flops: 1307e12,
        source: "AMD Instinct MI300X datasheet: 5.3 TB/s, 1,307 TFLOPS BF16 dense",
    },
];

/// The figures the plan uses for one GPU: from the table, declared in
/// `[hardware]`, or the table's with declared ones in their place.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuFigures {
    /// The name given (canonical when the table knows it).
    pub name: String,
    /// Peak memory bandwidth, bytes/s.
    pub bandwidth: f64,
    /// Dense BF16 tensor throughput, FLOP/s.
    pub bf16_flops: f64,
    /// Where the numbers come from.
    pub source: String,
}

/// FLOP per byte of bandwidth assumed when a GPU's compute is not given:
/// below every GPU in the table but the A100 (H100 SXM has about 295).
pub const ASSUMED_FLOP_PER_BYTE: f64 = 150.0;

/// A GPU's figures from its name and what `[hardware]` declares
/// (`gpu_bandwidth`, bytes/s; `gpu_bf16_flops`, FLOP/s); `None` when
/// nothing is given. A name the table lacks needs a declared bandwidth.
pub fn figures(
    name: Option<&str>,
    bandwidth: Option<f64>,
    bf16_flops: Option<f64>,
) -> Result<Option<GpuFigures>, String> {
    let known = name.and_then(gpu_by_name);
    let (Some(bw), flops) = (bandwidth.or(known.map(|g| g.bandwidth)), bf16_flops) else {
        return match name {
            None => Ok(None),
            Some(n) => Err(format!(
                "unknown GPU `{n}`; known: {}; for another, declare its memory bandwidth (gpu_bandwidth = \"1.8TB/s\") and, for prefill, gpu_bf16_tflops",
                gpu_names()
            )),
        };
    };
    let mut source = Vec::new();
    if bandwidth.is_some() {
        source.push(format!(
            "bandwidth {:.2} TB/s declared in [hardware]",
            bw / 1e12
        ));
    }
    let flops = match (flops, known) {
        (Some(f), _) => {
            source.push(format!(
                "{:.0} TFLOPS BF16 declared in [hardware]",
                f / 1e12
            ));
            f
        }
        (None, Some(g)) => g.bf16_flops,
        (None, None) => {
            source.push(format!(
                "compute not declared: {ASSUMED_FLOP_PER_BYTE} FLOP per byte of bandwidth assumed"
            ));
            bw * ASSUMED_FLOP_PER_BYTE
        }
    };
    if let Some(g) = known {
        source.push(g.source.to_string());
    }
    Ok(Some(GpuFigures {
        name: known.map_or_else(
            || name.unwrap_or("declared GPU").to_string(),
            |g| g.names[0].to_string(),
        ),
        bandwidth: bw,
        bf16_flops: flops,
        source: source.join("; "),
    }))
}

/// A bandwidth as written in a campaign: `1.8TB/s`, `1792 GB/s`.
pub fn parse_bandwidth(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let Some(size) = t.strip_suffix("/s") else {
        return Err(format!(
            "`{s}` is not a bandwidth: expected bytes per second such as 1.8TB/s or 1792GB/s"
        ));
    };
    let bytes = super::parse_bytes(size).map_err(|e| format!("`{s}`: {e}"))?;
    if bytes == 0 {
        return Err(format!("`{s}`: a bandwidth must be more than zero"));
    }
    Ok(bytes as f64)
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gpu_is_named_declared_or_both() {
        let pro = figures(Some("RTX PRO 6000 Blackwell"), None, None)
            .unwrap()
            .unwrap();
        assert_eq!(
            (pro.name.as_str(), pro.bandwidth),
            ("rtx-pro-6000", 1.792e12)
        );
        // Declared figures take the table's place and say so.
        let tuned = figures(Some("h100"), Some(3.0e12), None).unwrap().unwrap();
        assert_eq!((tuned.bandwidth, tuned.bf16_flops), (3.0e12, 989e12));
        assert!(
            tuned.source.starts_with("bandwidth 3.00 TB/s declared"),
            "{}",
            tuned.source
        );
        // A GPU the table lacks: its declared bandwidth, compute assumed.
        let new = figures(Some("x9000"), Some(2.0e12), None).unwrap().unwrap();
        assert_eq!(new.name, "x9000");
        assert_eq!(new.bf16_flops, 2.0e12 * ASSUMED_FLOP_PER_BYTE);
        assert!(
            new.source.contains("compute not declared"),
            "{}",
            new.source
        );
        let e = figures(Some("x9000"), None, None).unwrap_err();
        assert!(e.contains("gpu_bandwidth"), "{e}");
        assert_eq!(figures(None, None, None), Ok(None));
        assert_eq!(
            figures(None, Some(1e12), Some(1e14)).unwrap().unwrap().name,
            "declared GPU"
        );
        assert_eq!(parse_bandwidth("1.8TB/s"), Ok(1.8e12));
        assert_eq!(parse_bandwidth("1792 GB/s"), Ok(1.792e12));
        assert!(parse_bandwidth("1.8TB")
            .unwrap_err()
            .contains("bytes per second"));
        assert!(parse_bandwidth("0GB/s").is_err());
    }
}
