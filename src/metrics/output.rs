//! Whether an answer is degenerate: text a broken kernel or serving build
//! streams at full speed, such as one word repeated to the length limit.
//!
//! An answer is degenerate when any of these holds (words are the text split
//! on white space):
//!
//! - **a loop**: one unit of 1 to 3 words repeats back to back over at least
//!   [`LOOP_MIN_WORDS`] words and at least [`LOOP_MIN_SHARE`] of the answer
//!   ("lambda lambda lambda…", ", , , ,"). Longer units are left alone: a
//!   small model that finished its answer under `ignore_eos` often repeats a
//!   whole sentence, which is the model, not a broken server;
//! - **replacement characters**: at least [`REPLACEMENT_MIN_SHARE`] of its
//!   characters are U+FFFD (bytes that were not text).
//!
//! An answer of white space only is not judged: one token of output is often
//! a newline, and a reasoning model's answer may be all reasoning.
//!
//! A cell is degenerate when at least [`CELL_MIN_SHARE`] of its judged
//! answers are; one odd answer in many is not a broken server.

use serde::{Deserialize, Serialize};

use crate::client::record::RequestRecord;

/// Fewest words a loop must cover. A small model's own greedy continuation
/// loops too under `ignore_eos` (SmolLM2-135M: "use X; use X;" over 10 words,
/// one word repeated through a 16-token answer to a synthetic prompt), so
/// short answers are not judged; a word is often several tokens, so an
/// answer needs some 100 tokens before a one-word loop can be seen.
pub const LOOP_MIN_WORDS: usize = 24;

/// Smallest share of an answer's words a loop must cover.
pub const LOOP_MIN_SHARE: f64 = 0.5;

/// Smallest share of replacement characters that makes an answer degenerate.
pub const REPLACEMENT_MIN_SHARE: f64 = 0.1;

/// Smallest share of degenerate answers that makes a cell degenerate.
pub const CELL_MIN_SHARE: f64 = 0.25;

/// What is wrong with a degenerate answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Degenerate {
    /// What makes it degenerate, in words, with the numbers.
    pub reason: String,
    /// Where it shows: the start of the loop, or of the answer.
    pub excerpt: String,
}

/// Why `text` is degenerate, if it is.
pub fn degenerate(text: &str) -> Option<Degenerate> {
    let chars = text.chars().count();
    let bad = text.chars().filter(|c| *c == '\u{FFFD}').count();
    if chars > 0 && bad as f64 >= REPLACEMENT_MIN_SHARE * chars as f64 {
        return Some(Degenerate {
            reason: format!("{bad} of {chars} characters are U+FFFD (not text)"),
            excerpt: excerpt(text, 0),
        });
    }
    let words: Vec<(usize, &str)> = word_spans(text);
    let (period, start, len) = longest_loop(&words)?;
    let share = len as f64 / words.len() as f64;
    if len < LOOP_MIN_WORDS || share < LOOP_MIN_SHARE {
        return None;
    }
    let unit: Vec<&str> = words[start..start + period].iter().map(|w| w.1).collect();
    Some(Degenerate {
        reason: format!(
            "`{}` repeats over {len} of {} words ({:.0}%)",
            unit.join(" "),
            words.len(),
            share * 100.0
        ),
        excerpt: excerpt(text, words[start].0),
    })
}

/// The words of `text` with their byte offsets.
fn word_spans(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices() {
        match (c.is_whitespace(), start) {
            (true, Some(s)) => {
                out.push((s, &text[s..i]));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push((s, &text[s..]));
    }
    out
}

/// The longest back-to-back repetition of a unit of 1 to 3 words: (unit
/// length, first word, words covered). `None` for fewer than two words.
fn longest_loop(words: &[(usize, &str)]) -> Option<(usize, usize, usize)> {
    let mut best: Option<(usize, usize, usize)> = None;
    for period in 1..=3usize {
        if words.len() < 2 * period {
            break;
        }
        // run = how many words so far equal the word `period` before them.
        let mut run = 0usize;
        for i in period..words.len() {
            if words[i].1 == words[i - period].1 {
                run += 1;
                let covered = run + period;
                if best.is_none_or(|b| covered > b.2) {
                    best = Some((period, i + 1 - covered, covered));
                }
            } else {
                run = 0;
            }
        }
    }
    best
}

/// Up to 160 characters of `text` from byte `at`.
fn excerpt(text: &str, at: usize) -> String {
    text[at..].chars().take(160).collect()
}

/// The degenerate answers among a level's completed requests, and how many
/// answers were judged (those whose text was read).
pub fn degenerate_answers(requests: &[RequestRecord]) -> (Vec<Degenerate>, usize) {
    let mut found = Vec::new();
    let mut judged = 0;
    for r in requests.iter().filter(|r| r.is_ok()) {
        let Some(text) = r.output.as_ref().and_then(|o| o.text.as_deref()) else {
            continue;
        };
        judged += 1;
        if let Some(d) = degenerate(text) {
            found.push(d);
        }
    }
    (found, judged)
}

/// The cell-level verdict: why a level's answers are degenerate, with the
/// first one as evidence, when at least [`CELL_MIN_SHARE`] of them are.
pub fn degenerate_level(requests: &[RequestRecord]) -> Option<String> {
    let (found, judged) = degenerate_answers(requests);
    if found.is_empty() || (found.len() as f64) < CELL_MIN_SHARE * judged as f64 {
        return None;
    }
    let first = &found[0];
    Some(format!(
        "{} of {judged} answers are degenerate; first: {}: \"{}\"",
        found.len(),
        first.reason,
        first.excerpt
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_word_or_a_short_unit_looping_over_the_answer_is_degenerate() {
        let lambda = "lambda ".repeat(64);
        let d = degenerate(&lambda).unwrap();
        assert_eq!(d.reason, "`lambda` repeats over 64 of 64 words (100%)");
        assert!(d.excerpt.starts_with("lambda lambda"));
        let unit = format!("def fib(n): {}", "return fib ".repeat(20));
        let d = degenerate(&unit).unwrap();
        assert!(
            d.reason.starts_with("`return fib` repeats over 40 of 42"),
            "{}",
            d.reason
        );
        assert!(d.excerpt.starts_with("return fib return"), "{}", d.excerpt);
    }

    #[test]
    fn ordinary_text_code_and_repeated_sentences_are_not() {
        let prose = "The Fibonacci sequence starts with zero and one, and every later \
                     number is the sum of the two before it, so it grows roughly by the \
                     golden ratio at each step.";
        assert_eq!(degenerate(prose), None);
        let code =
            "fn fib(n: u64) -> u64 {\n    if n < 2 { return n; }\n    fib(n - 1) + fib(n - 2)\n}\n";
        assert_eq!(degenerate(code), None);
        // A finished answer followed by a looping sentence of more than three
        // words is the model under ignore_eos, not a broken server.
        let sentence = format!(
            "The answer is 42. {}",
            "I hope this helps you today. ".repeat(12)
        );
        assert_eq!(degenerate(&sentence), None);
        // A short loop inside a long answer covers too little of it.
        let mostly_fine = format!("{prose} {} {prose} {prose}", "ha ".repeat(26));
        assert_eq!(degenerate(&mostly_fine), None);
    }

    #[test]
    fn replacement_characters_are_degenerate_and_white_space_is_not_judged() {
        let garbled = format!("ok {}", "\u{FFFD}".repeat(10));
        assert!(degenerate(&garbled).unwrap().reason.contains("10 of 13"));
        assert_eq!(degenerate("\n"), None);
        assert_eq!(degenerate(""), None);
    }

    #[test]
    fn a_cell_is_degenerate_from_a_quarter_of_its_answers() {
        let answer = |text: &str| {
            let mut r = RequestRecord::new(0.0, 0.0);
            r.push_chunk(1.0, 1);
            r.output = Some(crate::client::record::OutputText::of(text.to_string()));
            r.finish(crate::client::record::Outcome::Ok, 2.0);
            r
        };
        let good = "a perfectly ordinary answer with many different words in it";
        let bad = "lambda ".repeat(30);
        let mut reqs: Vec<RequestRecord> = (0..7).map(|_| answer(good)).collect();
        reqs.push(answer(&bad));
        assert_eq!(degenerate_level(&reqs), None, "1 of 8");
        reqs.push(answer(&bad));
        reqs.push(answer(&bad));
        let why = degenerate_level(&reqs).unwrap();
        assert!(
            why.starts_with("3 of 10 answers are degenerate; first: `lambda` repeats"),
            "{why}"
        );
    }
}
