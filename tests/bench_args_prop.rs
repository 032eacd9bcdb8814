//! Arbitrary `bench` command lines: argument resolution never panics, and
//! every error it (or the parser) gives names a flag.

use clap::Parser;
use proptest::prelude::*;
use servebench::cli::{Cli, Command};

/// Cases run; reported by the test so a reader sees the corpus size.
const CASES: u32 = 5000;

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

/// A value for `flag`: mostly one of its own type (so resolution, not the
/// parser, gets to judge it), sometimes anything.
fn value_for(flag: &'static str) -> BoxedStrategy<(String, String)> {
    let typed: BoxedStrategy<String> = match flag {
        "--api" => prop::sample::select(vec!["chat", "completions"])
            .prop_map(str::to_string)
            .boxed(),
        "--arrival" => prop::sample::select(vec!["poisson", "constant", "gamma"])
            .prop_map(str::to_string)
            .boxed(),
        "--num-requests" | "--input-len" | "--output-len" | "--warmup" | "--shared-prefix"
        | "--seed" | "--max-concurrency" => prop_oneof![
            (0u64..100).prop_map(|v| v.to_string()),
            any::<u64>().prop_map(|v| v.to_string()),
            any::<u32>().prop_map(|v| v.to_string()),
        ]
        .boxed(),
        "--burstiness" => prop_oneof![
            any::<f64>().prop_map(|v| v.to_string()),
            (0.0f64..4.0).prop_map(|v| v.to_string()),
        ]
        .boxed(),
        _ => value().boxed(),
    };
    prop_oneof![4 => typed, 1 => value()]
        .prop_map(move |v| (flag.to_string(), v))
        .boxed()
}

/// Flags with values, each flag at most once (clap refuses repeats, which
/// would hide resolution behind the parser), usually with a load and a
/// bound, so most cases reach resolution.
fn command_line() -> impl Strategy<Value = Vec<(String, String)>> {
    let flags = prop::sample::subsequence(FLAGS.to_vec(), 0..6);
    let plain = flags.prop_flat_map(|fs| fs.into_iter().map(value_for).collect::<Vec<_>>());
    let load = prop_oneof![
        1 => Just(None),
        4 => value_for("--concurrency").prop_map(Some),
        4 => value_for("--request-rate").prop_map(Some),
    ];
    let bound = prop_oneof![
        1 => Just(None),
        4 => value_for("--num-requests").prop_map(Some),
        2 => value_for("--duration").prop_map(Some),
    ];
    (plain, load, bound).prop_map(|(pairs, load, bound)| {
        let mut m: std::collections::BTreeMap<String, String> = pairs.into_iter().collect();
        for (f, v) in load.into_iter().chain(bound) {
            m.entry(f).or_insert(v);
        }
        m.into_iter().collect()
    })
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
                if let Err(e) = servebench::cmd::bench::check_args(&a) {
                    let msg = format!("{e:#}");
                    prop_assert!(msg.contains("--"), "error names no flag: {msg} for {argv:?}");
                }
            }
        }
    }
}
