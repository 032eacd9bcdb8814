//! `goal = "answer"` on the simulator: servers leader first, a probe of
//! each point before its full cell, what was left named with its reason,
//! the same answer as the whole grid, and a later run measuring the rest.

use crate::common::*;

/// Three servers: `fast`, `mid` at half its decode speed, `slow` at a
/// tenth; one workload at concurrency 1 and 4.
pub fn three_speeds() -> String {
    sim_campaign(
        "answer-first",
        &[
            "--decode-step-ms",
            "2",
            "--decode-step-per-seq-ms",
            "0.1",
            "--prefill-tok-s",
            "50000",
        ],
    ) + r#"
[[server]]
id = "slow"
args = ["--decode-step-ms", "20"]
[[server]]
id = "fast"
[[server]]
id = "mid"
args = ["--decode-step-ms", "4"]
[[workload]]
name = "w"
input_len = 64
output_len = 128
concurrency = [1, 4]
num_requests = 8
[run]
health_timeout = "30s"
"#
}

#[test]
fn answer_first_names_what_it_left_and_a_grid_run_measures_only_that_with_the_same_answer() {
    let dir = tempfile::tempdir().unwrap();
    let campaign = write_campaign(dir.path(), three_speeds());
    let file = campaign.to_str().unwrap();
    let (code, out, err) = run(&["run", file, "--goal", "answer"]);
    assert_eq!(code, 0, "{out}\n{err}");
    // The likely leader runs first whatever the file's order says.
    assert!(
        err.contains(
            "answer first: servers in the order they are expected to lead: `fast`, `mid`, `slow`"
        ),
        "{err}"
    );
    let results = dir.path().join("results/answer-first");
    let first = cells(&results);
    // `fast` leads both points; `mid` is measured at one stream only, the
    // runner-up the answer names there; `slow` is a tenth of either.
    assert!(first.contains_key("fast/w-in64-out128-c1"), "{first:?}");
    assert!(first.contains_key("fast/w-in64-out128-c4"), "{first:?}");
    assert!(!first.keys().any(|k| k.starts_with("slow/")), "{first:?}");
    assert!(first.len() < 6, "{first:?}");
    let ledger: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(results.join("goal/not-measured.json")).unwrap())
            .unwrap();
    assert_eq!(ledger.len() + first.len(), 6, "{ledger:?}");
    assert!(ledger.iter().all(|l| l["server"] != "fast"), "{ledger:?}");
    // The terminal says each one and why, and the answer says it rests on
    // part of the campaign.
    assert!(
        err.contains("[slow] w-in64-out128-c4: not measured: cannot win: its probe"),
        "{err}"
    );
    assert!(
        out.contains(&format!(
            "this answer rests on {} of the campaign's 6 points; {} not measured in full",
            first.len(),
            ledger.len()
        )),
        "{out}"
    );
    assert!(
        out.contains("`slow` at w-in64-out128-c1: cannot be first or second"),
        "{out}"
    );
    assert!(
        err.contains("answer so far, after `fast` (1 of 3 servers): points led: `fast` 2 of 2"),
        "{err}"
    );
    // Probes are stored apart: no report ranks them.
    assert!(results
        .join("goal/cells/slow/w-in64-out128-c4.json")
        .is_file());
    let goal_answer = answer_lines(&out);
    assert!(
        goal_answer.iter().any(|l| l.contains("deploy `fast`")),
        "{out}"
    );

    // plan names them too, each with its reason.
    let (code, plan, err) = run(&["plan", file]);
    assert_eq!(code, 0, "{err}");
    assert!(
        plan.lines().any(|l| l.contains("w-in64-out128-c4")
            && l.contains("run (left by goal = \"answer\": cannot win: its probe")),
        "{plan}"
    );
    // A run without the goal measures exactly the cells left, reusing the rest.
    let (code, out, err) = run(&["run", file]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains(&format!("cells measured, {} reused", first.len()))
            || err.contains(&format!(
                "{} cells measured, {} reused",
                ledger.len(),
                first.len()
            )),
        "{out}\n{err}"
    );
    let all = cells(&results);
    assert_eq!(all.len(), 6);
    for (k, v) in &first {
        assert_eq!(
            all[k]["finished_at"], v["finished_at"],
            "{k} was measured again"
        );
    }
    // The whole grid gives the same answer, word for word.
    assert!(!out.contains("this answer rests on"), "{out}");
    assert_eq!(answer_lines(&out), goal_answer);
}

#[test]
fn a_slurm_campaign_refuses_the_answer_goal_before_submitting_anything() {
    let dir = tempfile::tempdir().unwrap();
    let text = three_speeds().replace("[run]\n", "[launcher]\nkind = \"slurm\"\n[run]\n");
    let campaign = write_campaign(dir.path(), text);
    let (code, _, err) = run(&["run", campaign.to_str().unwrap(), "--goal", "answer"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("a Slurm campaign runs every server in its own job"),
        "{err}"
    );
    assert!(cells(&dir.path().join("results/answer-first")).is_empty());
}

#[test]
fn answer_first_repeats_a_point_only_where_the_verdict_is_close() {
    let dir = tempfile::tempdir().unwrap();
    let text = three_speeds()
        .replace("[run]\n", "[run]\nrepetitions = 2\n")
        .replace(
            "[[server]]\nid = \"slow\"\nargs = [\"--decode-step-ms\", \"20\"]\n",
            "",
        );
    let campaign = write_campaign(dir.path(), text);
    let (code, out, err) = run(&["run", campaign.to_str().unwrap(), "--goal", "answer"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let stored = cells(&dir.path().join("results/answer-first"));
    // The first server's repetitions are what later ones are compared with.
    assert!(
        stored.contains_key("fast/w-in64-out128-c1-rep1"),
        "{:?}",
        stored.keys()
    );
    assert!(
        stored.contains_key("fast/w-in64-out128-c4-rep1"),
        "{:?}",
        stored.keys()
    );
    // `mid` at one stream is the runner-up, clear of `fast`: one
    // repetition settles it; at four it was left, and so is its repetition.
    assert!(
        stored.contains_key("mid/w-in64-out128-c1"),
        "{:?}",
        stored.keys()
    );
    assert!(
        !stored
            .keys()
            .any(|k| k.starts_with("mid/") && k.ends_with("-rep1")),
        "{:?}",
        stored.keys()
    );
    assert!(
        err.contains(
            "[mid] w-in64-out128-c1-rep1: not needed: one repetition settles its place here"
        ),
        "{err}"
    );
    assert!(
        err.contains("[mid] w-in64-out128-c4-rep1: not measured: cannot win"),
        "{err}"
    );
}
