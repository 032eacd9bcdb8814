//! Arbitrary `bench` command lines: argument resolution never panics, and
//! every error it (or the parser) gives names a flag.

use clap::Parser;
use proptest::prelude::*;
use servebench::cli::{Cli, Command};

/// Cases run; reported by the test so a reader sees the corpus size.
const CASES: u32 = 2000;

const FLAGS: &[&str] = &[
    "--request-rate",
    "--concurrency",
    "--num-requests",
    "--duration",
    "--input-len",
    "--output-len",
    "--max-concurrency",
    "--burstiness",
    "--warmup",
    "--request-timeout",
    "--slo",
    "--arrival",
    "--shared-prefix",
    "--seed",
    "--prompt-kind",
    "--api",
];

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "1e-300",
            "5e-20",
            "1e-19",
            "0",
            "-1",
            "1",
            "2",
            "1e9",
            "1000000000",
            "4294967296",
            "18446744073709551615",
            "18446744073709551616",
            "NaN",
            "inf",
            "-inf",
            "0.5",
            "1,,2",
            ",",
            "",
            "0s",
            "2s",
            "1e300s",
            "99999999999999999999.5h",
            "1.5s",
            "10m",
            "poisson",
            "gamma",
            "constant",
            "ttft=1ms",
            "ttft=",
            "all",
            "chat",
            "completions",
        ])
        .prop_map(str::to_string),
        "[-0-9.e,a-zA-Z=]{0,14}",
        any::<u64>().prop_map(|v| v.to_string()),
        any::<f64>().prop_map(|v| v.to_string()),
    ]
}

fn command_line() -> impl Strategy<Value = Vec<(String, String)>> {
    prop::collection::vec(
        (
            prop::sample::select(FLAGS.to_vec()).prop_map(str::to_string),
            value(),
        ),
        0..7,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: CASES, ..ProptestConfig::default() })]

    #[test]
    fn resolution_never_panics_and_errors_name_a_flag(pairs in command_line()) {
        let mut argv = vec![
            "servebench".to_string(),
            "bench".into(),
            "--url".into(),
            "http://127.0.0.1:1".into(),
        ];
        for (f, v) in &pairs {
            // `--flag=value` keeps values that start with `-` as values.
            argv.push(format!("{f}={v}"));
        }
        match Cli::try_parse_from(&argv) {
            Err(e) => {
                let msg = e.to_string();
                prop_assert!(msg.contains("--"), "clap error names no flag: {msg}");
            }
            Ok(cli) => {
                let Command::Bench(a) = cli.command else { unreachable!() };
                if let Err(e) = servebench::bench::check_args(&a) {
                    let msg = format!("{e:#}");
                    prop_assert!(msg.contains("--"), "error names no flag: {msg} for {argv:?}");
                }
            }
        }
    }
}
