//! The log scanner on hand-written lines: decorations, numbers, tracebacks,
//! failure causes, bounds and hostile input.

use super::text::*;
use super::*;

#[test]
fn prefixes_are_removed() {
    let cases = [
        (
            "[2025-09-03 18:33:19 TP0] Decode batch. #running-req: 1",
            "Decode batch. #running-req: 1",
        ),
        (
            "(EngineCore_DP0 pid=26283) INFO 11-06 10:51:48 [kv_cache_utils.py:1229] GPU KV cache size: 75,840 tokens",
            "GPU KV cache size: 75,840 tokens",
        ),
        (
            "vllm-mxfp4  | (APIServer pid=1) vllm.v1.engine.exceptions.EngineDeadError: x",
            "vllm.v1.engine.exceptions.EngineDeadError: x",
        ),
        (
            "INFO 01-30 03:18:14 kv_cache_utils.py:398] Maximum concurrency for 2048 tokens per request: 10.79x",
            "Maximum concurrency for 2048 tokens per request: 10.79x",
        ),
        (
            "[42027] 2.29.118.093 I statistics ngram-map-k: #calls",
            "statistics ngram-map-k: #calls",
        ),
        (
            "llama-server    | [41123] 0.10.154.587 I srv    load_model: initializing slots, n_slots = 2",
            "srv    load_model: initializing slots, n_slots = 2",
        ),
        ("[04:40:55 TP0] Decode batch. #token: 1", "Decode batch. #token: 1"),
        ("plain line", "plain line"),
        ("", ""),
        ("[", "["),
        ("(x", "(x"),
        ("INFO 1", "INFO 1"),
        ("1.2.3.4 é", "é"),
    ];
    for (input, want) in cases {
        assert_eq!(strip_log_prefix(input), want, "{input}");
    }
}

#[test]
fn numbers_and_memory_values() {
    assert_eq!(leading_number("75,840 tokens").map(|x| x.0), Some(75840.0));
    assert_eq!(
        leading_number("580364, chunked").map(|x| x.0),
        Some(580364.0)
    );
    assert_eq!(leading_number("2.48x").map(|x| x.0), Some(2.48));
    assert_eq!(leading_number("1.5e3 ").map(|x| x.0), Some(1500.0));
    assert_eq!(leading_number("-").map(|x| x.0), None);
    assert_eq!(leading_number("").map(|x| x.0), None);
    assert_eq!(mem_value(": 0.13GB"), Some(0.13));
    assert_eq!(mem_value(" = 2048.00 MiB"), Some(2.0));
    assert_eq!(mem_value(" 7 bananas"), None);
    assert_eq!(
        u64_after(
            "profiled_max_total_num_tokens=1, max_total_num_tokens=7",
            "max_total_num_tokens="
        ),
        Some(7)
    );
    assert_eq!(u64_after("KV size: 3 GB", "V size"), None);
    assert_eq!(u64_before("( 16384 cells,", " cells"), Some(16384));
}

#[test]
fn traceback_reports_the_final_exception() {
    let log = "\
starting
Traceback (most recent call last):
  File \"a.py\", line 1, in <module>
main()
ValueError: first

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File \"a.py\", line 3, in <module>
RuntimeError: second
next line of the server
";
    let facts = scan_log(TelemetryEngine::Sglang, log);
    let py: Vec<&ErrorLine> = facts
        .errors
        .iter()
        .filter(|e| e.kind == FailureKind::PythonException)
        .collect();
    assert_eq!(py.len(), 1);
    assert_eq!(py[0].text, "RuntimeError: second");
    assert_eq!(py[0].line_number, 11);
    let cause = classify_failure(log).unwrap();
    assert_eq!(cause.kind, FailureKind::PythonException);
    assert_eq!(cause.evidence, "RuntimeError: second");
}

#[test]
fn unterminated_traceback_is_reported_at_end() {
    let facts = scan_log(
        TelemetryEngine::Vllm,
        "Traceback (most recent call last):\n  File \"x\"\n",
    );
    assert_eq!(facts.errors.len(), 1);
    assert_eq!(facts.errors[0].line_number, 1);
}

#[test]
fn classify_failure_causes() {
    let cases = [
        ("usage: x\nx: error: unrecognized arguments: --bogus 1\n", FailureKind::UnknownArgument),
        ("error: invalid argument: --frobnicate\n", FailureKind::UnknownArgument),
        ("OSError: [Errno 98] Address already in use\n", FailureKind::AddressInUse),
        (
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n",
            FailureKind::OutOfMemory,
        ),
        (
            "RuntimeError: CUDA error: an illegal instruction was encountered\n",
            FailureKind::CudaError,
        ),
        (
            "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1, unhandled cuda error\n",
            FailureKind::NcclError,
        ),
    ];
    for (log, kind) in cases {
        let cause = classify_failure(log).unwrap_or_else(|| panic!("{log}"));
        assert_eq!(cause.kind, kind, "{log}");
    }
    assert_eq!(classify_failure("all good\nready\n"), None);
    assert_eq!(classify_failure(""), None);
}

#[test]
fn error_list_is_bounded() {
    let mut log = String::new();
    for i in 0..1000 {
        log.push_str(&format!(
            "CUDA error: an illegal memory access was encountered {i}\n"
        ));
    }
    let facts = scan_log(TelemetryEngine::Vllm, &log);
    assert_eq!(facts.errors.len(), ERRORS_KEPT_HEAD + ERRORS_KEPT_TAIL);
    assert_eq!(
        facts.errors_dropped,
        1000 - ERRORS_KEPT_HEAD - ERRORS_KEPT_TAIL
    );
    assert_eq!(facts.errors[0].line_number, 1);
    assert_eq!(facts.errors.last().unwrap().line_number, 1000);
}

#[test]
fn hostile_input_never_panics() {
    let inputs = [
        "Decode batch.",
        "Decode batch,",
        "Decode batch, : , :, #running-req: x, accept len: 1e999999",
        "KV Cache is allocated. #tokens: , K size: GB",
        "max_total_num_tokens=",
        "Maximum concurrency for tokens per request: x",
        "llama_kv_cache: size = ( cells K ( V (",
        "llama_kv_cache: cells",
        "[\u{1F600}] \u{1F600}",
        "(\u{1F600} pid=) é",
        "INFO 0é-00 00:00:00 [x] y",
        "Traceback (most recent call last):",
        "\u{0}\u{0}\u{0}",
        "sim: kv capacity , max running requests , context length",
        "eval time = tokens per second",
        "draft acceptance rate = nope",
    ];
    for engine in TelemetryEngine::ALL {
        for input in inputs {
            let _ = scan_log(engine, input);
            let _ = classify_failure(input);
        }
        let _ = scan_log(engine, &inputs.join("\n"));
    }
}
