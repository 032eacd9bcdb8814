use super::*;

fn names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("b{i}")).collect()
}

/// Runs a bisection of `n` builds whose first bad one is `first_bad`, with
/// `untestable` builds; returns the end and the builds measured (ends included).
fn bisect(n: usize, first_bad: usize, untestable: &[usize]) -> (Next, usize) {
    let mut b = Bisection::new(names(n), "b0", &format!("b{}", n - 1)).unwrap();
    b.record(0, Observation::Good("ok".into()));
    b.record(n - 1, Observation::Bad("bad".into()));
    loop {
        match b.next() {
            Next::Measure(i) => {
                let o = if untestable.contains(&i) {
                    Observation::Untestable("start_failed".into())
                } else if i >= first_bad {
                    Observation::Bad("bad".into())
                } else {
                    Observation::Good("ok".into())
                };
                b.record(i, o);
            }
            end => return (end, b.measured()),
        }
    }
}

#[test]
fn every_first_bad_position_is_found_in_the_ends_plus_log2_of_the_gaps() {
    for n in [2usize, 3, 5, 8, 9, 16, 17] {
        // The ends, then halving the n − 1 gaps between them.
        let bound = 2 + (n as f64 - 1.0).log2().ceil() as usize;
        for first_bad in 1..n {
            let (end, measured) = bisect(n, first_bad, &[]);
            assert_eq!(
                end,
                Next::Found {
                    last_good: first_bad - 1,
                    first_bad
                },
                "n {n}, first bad {first_bad}"
            );
            assert!(
                measured <= bound,
                "n {n}, first bad {first_bad}: {measured} > {bound}"
            );
        }
    }
    // Nine builds: within ⌈log2 9⌉ + 1 = 5 measured, whatever the position.
    assert!((1..9).all(|k| bisect(9, k, &[]).1 <= 5));
}

#[test]
fn an_untestable_build_is_skipped_and_one_next_to_it_measured() {
    // b4, the middle, fails to start: the first bad b6 is still found,
    // by measuring next to it.
    let (end, measured) = bisect(9, 6, &[4]);
    assert_eq!(
        end,
        Next::Found {
            last_good: 5,
            first_bad: 6
        }
    );
    assert_eq!(measured, 6, "one build more than without the skip");
    // When the change lies behind an untestable build, the range is the answer.
    let (end, _) = bisect(9, 4, &[4]);
    assert_eq!(
        end,
        Next::Between {
            last_good: 3,
            first_bad: 5,
            untestable: vec![4]
        }
    );
}

#[test]
fn the_range_must_name_known_builds_good_before_bad() {
    assert!(matches!(
        Bisection::new(names(3), "b2", "b0"),
        Err(BisectError::Order { .. })
    ));
    let e = Bisection::new(names(3), "b0", "b9").unwrap_err();
    assert_eq!(
        e.to_string(),
        "build `b9` is not among the builds bisected (b0, b1, b2)"
    );
    assert!(matches!(
        Bisection::new(names(1), "b0", "b0"),
        Err(BisectError::TooFewBuilds(_))
    ));
    assert_eq!("answers".parse::<Watch>().unwrap(), Watch::Answers);
    assert_eq!(
        "ttft_p50_ms".parse::<Watch>().unwrap(),
        Watch::Metric("ttft_p50_ms".into())
    );
    assert_eq!(
        "engine:prefix_cache_hits".parse::<Watch>().unwrap(),
        Watch::Engine("prefix_cache_hits")
    );
    let e = "speed".parse::<Watch>().unwrap_err().to_string();
    assert!(e.contains("answers, output_tok_s"), "{e}");
    assert!(e.contains("engine:prefix_cache_hits"), "{e}");
    assert!("engine:nothing".parse::<Watch>().is_err());
}
