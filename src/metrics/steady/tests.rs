use super::*;
use crate::load::schedule::Arrival;

/// A completed request sent at `sent` ms whose first token came `ttft` ms
/// later and whose `tokens` tokens then came one per `step` ms.
fn rec(sent: f64, ttft: f64, tokens: u32, step: f64) -> RequestRecord {
    let mut r = RequestRecord::new(sent, sent);
    for i in 0..tokens {
        r.push_chunk(ttft + f64::from(i) * step, 1);
    }
    r.e2e_ms = Some(ttft + f64::from(tokens - 1) * step);
    r.output_tokens = Some(u64::from(tokens));
    r
}

fn closed(c: u32) -> LoadShape {
    LoadShape::Concurrency { value: c }
}

fn rate(v: f64) -> LoadShape {
    LoadShape::Rate {
        value: v,
        arrival: Arrival::Poisson,
        burstiness: 1.0,
        max_concurrency: None,
    }
}

#[test]
fn a_closed_loop_window_starts_when_the_first_wave_decodes_and_ends_at_the_drain() {
    // Four users; the first wave's first tokens come at 100 ms, its last
    // at 590 ms; two more requests go out then and drain alone.
    let mut recs: Vec<RequestRecord> = (0..4).map(|_| rec(0.0, 100.0, 50, 10.0)).collect();
    recs.push(rec(590.001, 100.0, 50, 10.0));
    recs.push(rec(590.002, 100.0, 50, 10.0));
    let w = steady_state(&closed(4), &recs, 1.18).expect("a window");
    assert_eq!((w.start_s, w.end_s), (0.1, 0.59));
    // 4 × 50 tokens inside [100, 590]; none of the drain's.
    assert_eq!(w.output_tokens, 200.0);
    assert!((w.output_throughput_tok_s - 200.0 / 0.49).abs() < 1e-9);
    assert_eq!(w.completed, 4);
    assert_eq!(w.e2e_ms.unwrap().p50, 590.0);
    assert!(w.short.is_none(), "{:?}", w.short);
    assert!(w.over_saturated.is_empty());
    // The whole level's 300 tokens over 1.18 s is far below it.
    assert!(300.0 / 1.18 < 0.7 * w.output_throughput_tok_s);
}

#[test]
fn a_closed_loop_that_never_reaches_its_target_has_no_window() {
    let recs: Vec<RequestRecord> = (0..4).map(|_| rec(0.0, 100.0, 50, 10.0)).collect();
    assert_eq!(steady_state(&closed(8), &recs, 0.59), None);
}

#[test]
fn a_window_over_a_sliver_of_the_level_is_flagged_short() {
    // One user; 3 tokens in the window of a 1 s level.
    let recs = vec![rec(0.0, 900.0, 3, 10.0)];
    let w = steady_state(&closed(1), &recs, 1.0).expect("a window");
    let short = w.short.expect("flagged");
    assert!(short.contains("covers 2 %"), "{short}");
    assert!(short.contains("3 output tokens"), "{short}");
}

#[test]
fn an_open_loop_window_runs_from_the_first_completion_to_the_last_send() {
    // One request every 100 ms, each 200 ms long with steady 50 ms TTFT.
    let recs: Vec<RequestRecord> = (0..30)
        .map(|i| rec(f64::from(i) * 100.0, 50.0, 16, 10.0))
        .collect();
    let w = steady_state(&rate(10.0), &recs, 3.1).expect("a window");
    assert_eq!((w.start_s, w.end_s), (0.2, 2.9));
    assert!(w.over_saturated.is_empty(), "{:?}", w.over_saturated);
    // Two requests decode at once: 2 tokens per 10 ms.
    assert!(
        (w.output_throughput_tok_s - 160.0).abs() < 10.0,
        "{}",
        w.output_throughput_tok_s
    );
}

#[test]
fn time_to_first_token_rising_with_send_time_is_over_saturation() {
    // Arrivals every 100 ms, served one after another every 150 ms: each
    // waits 50 ms longer than the one before.
    let recs: Vec<RequestRecord> = (0..30)
        .map(|i| rec(f64::from(i) * 100.0, 20.0 + 50.0 * f64::from(i), 16, 1.0))
        .collect();
    let w = steady_state(&rate(10.0), &recs, 4.5).expect("a window");
    assert_eq!(w.over_saturated.len(), 1, "{:?}", w.over_saturated);
    assert!(w.over_saturated[0].contains("time to first token rose"));
    // Noise around a flat TTFT is not a rise.
    let flat: Vec<RequestRecord> = (0..30)
        .map(|i| {
            rec(
                f64::from(i) * 100.0,
                40.0 + f64::from(i % 3) * 20.0,
                16,
                1.0,
            )
        })
        .collect();
    let w = steady_state(&rate(10.0), &flat, 3.1).expect("a window");
    assert!(w.over_saturated.is_empty(), "{:?}", w.over_saturated);
}

#[test]
fn a_queue_that_grows_through_the_window_is_evidence_and_a_steady_one_is_not() {
    let recs: Vec<RequestRecord> = (0..30)
        .map(|i| rec(f64::from(i) * 100.0, 50.0, 16, 10.0))
        .collect();
    let w = steady_state(&rate(10.0), &recs, 3.1).expect("a window");
    let growing: Vec<(f64, f64)> = (0..40)
        .map(|i| (f64::from(i) * 0.075, f64::from(i)))
        .collect();
    let why = queue_growth(&growing, &w).expect("growth");
    assert!(why.contains("queue grew"), "{why}");
    let steady: Vec<(f64, f64)> = (0..40).map(|i| (f64::from(i) * 0.075, 3.0)).collect();
    assert_eq!(queue_growth(&steady, &w), None);
    // Samples outside the window do not count.
    let outside: Vec<(f64, f64)> = (0..40)
        .map(|i| (5.0 + f64::from(i), f64::from(i)))
        .collect();
    assert_eq!(queue_growth(&outside, &w), None);
}
