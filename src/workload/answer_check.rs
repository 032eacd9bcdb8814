//! Answers that can be checked: the built-in prompts whose right answer is
//! known, and the check each answer must pass.
//!
//! - **arithmetic**: every figure the question asks for appears in the
//!   answer (a number within a stated tolerance, or a clock time);
//! - **json-extraction**: the answer holds valid JSON (an object, or an
//!   array of objects) with every field the prompt asked for.
//!
//! Code and poems have no check: a program would have to be run and a poem
//! has no right answer. An answer passes or fails as a whole; a truncated
//! answer that never reached its result fails, which is why pass rates are
//! only compared between servers asked the same prompts with the same
//! output budget.
//!
//! Each check comes with a reference answer that passes it, so the
//! simulator can answer checkable prompts right (and, as a fault, wrong).

use super::prompts::PromptKind;

/// What a right answer contains.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Expect {
    /// Every (value, tolerance) appears as a number in the answer.
    Numbers(&'static [(f64, f64)]),
    /// At least one of these texts appears in the answer.
    AnyText(&'static [&'static str]),
    /// Valid JSON with these fields (in the object, or in every object of
    /// an array).
    JsonFields(&'static [&'static str]),
}

/// The check of one built-in prompt, with an answer that passes it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AnswerCheck {
    /// What a right answer contains.
    pub expect: Expect,
    /// A right answer, in words.
    pub reference: &'static str,
}

impl AnswerCheck {
    /// Whether `answer` passes.
    pub fn passes(&self, answer: &str) -> bool {
        match self.expect {
            Expect::Numbers(want) => {
                let found = numbers(answer);
                want.iter()
                    .all(|(v, tol)| found.iter().any(|x| (x - v).abs() <= *tol))
            }
            Expect::AnyText(any) => any.iter().any(|t| answer.contains(t)),
            Expect::JsonFields(fields) => {
                first_json(answer).is_some_and(|v| has_fields(&v, fields))
            }
        }
    }
}

/// The check of `prompt` when it is a built-in prompt with one.
pub fn check_for(prompt: &str) -> Option<&'static AnswerCheck> {
    PromptKind::all().iter().find_map(|k| {
        let i = k.variants().iter().position(|v| *v == prompt)?;
        checks_of(*k).get(i)
    })
}

/// Whether answers to prompts of `kind` are checked.
pub fn is_checked(kind: PromptKind) -> bool {
    !checks_of(kind).is_empty()
}

/// The checks of a kind's variants, in the same order; empty when the kind
/// has none.
fn checks_of(kind: PromptKind) -> &'static [AnswerCheck] {
    match kind {
        PromptKind::Arithmetic => ARITHMETIC,
        PromptKind::JsonExtraction => JSON_EXTRACTION,
        PromptKind::Fibonacci | PromptKind::Quicksort | PromptKind::Haiku => &[],
    }
}

/// The numbers written in `text`: digit runs with an optional decimal part,
/// thousands separators (`158,762`) read as one number; a sign is ignored
/// (answers say "change of 29", not "+29").
fn numbers(text: &str) -> Vec<f64> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if !b[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let mut digits = String::new();
        while i < b.len() {
            if b[i].is_ascii_digit() {
                digits.push(b[i] as char);
                i += 1;
            } else if b[i] == b','
                && b.len() >= i + 4
                && b[i + 1..i + 4].iter().all(u8::is_ascii_digit)
                && b.get(i + 4).is_none_or(|c| !c.is_ascii_digit())
            {
                i += 1;
            } else if b[i] == b'.'
                && !digits.contains('.')
                && b.get(i + 1).is_some_and(u8::is_ascii_digit)
            {
                digits.push('.');
                i += 1;
            } else {
                break;
            }
        }
        if let Ok(v) = digits.parse() {
            out.push(v);
        }
    }
    out
}

/// The first JSON object or array in `text` that parses, trailing text
/// ignored (answers wrap JSON in prose or a code fence).
fn first_json(text: &str) -> Option<serde_json::Value> {
    // Bounded: a long answer of stray braces is not parsed forever.
    text.match_indices(['{', '[']).take(64).find_map(|(i, _)| {
        serde_json::Deserializer::from_str(&text[i..])
            .into_iter::<serde_json::Value>()
            .next()?
            .ok()
    })
}

fn has_fields(v: &serde_json::Value, fields: &[&str]) -> bool {
    let object_has = |o: &serde_json::Value| {
        o.as_object()
            .is_some_and(|m| fields.iter().all(|f| m.contains_key(*f)))
    };
    match v {
        serde_json::Value::Array(items) => !items.is_empty() && items.iter().all(object_has),
        other => object_has(other),
    }
}

/// In the order of [`PromptKind::Arithmetic`]'s variants.
const ARITHMETIC: &[AnswerCheck] = &[
    AnswerCheck {
        // 12 × 0.35 + 7 × 2.40 = 21.00; 50 − 21 = 29.
        expect: Expect::Numbers(&[(29.0, 0.005)]),
        reference: "Maria gets $29.00 in change: 12 × $0.35 = $4.20, 7 × $2.40 = $16.80, $4.20 + $16.80 = $21.00, $50 − $21.00 = $29.00.",
    },
    AnswerCheck {
        expect: Expect::Numbers(&[(158_762.0, 0.0)]),
        reference: "487 × 326 = 158,762: 487 × 300 = 146,100, 487 × 26 = 12,662, 146,100 + 12,662 = 158,762; 158,762 ÷ 326 = 487.",
    },
    AnswerCheck {
        // 318 / 84 h = 3 h 47.1 min after 09:47.
        expect: Expect::AnyText(&["13:34", "1:34 p"]),
        reference: "It arrives at 13:34: 318 ÷ 84 = 3.786 hours = 3 h 47 min, and 09:47 + 3:47 = 13:34.",
    },
    AnswerCheck {
        // 416.5 + 456 − 144.
        expect: Expect::Numbers(&[(728.5, 0.005)]),
        reference: "The result is 728.5: 17% of 2,450 = 416.5, 3/8 of 1,216 = 456, 12² = 144, 416.5 + 456 − 144 = 728.5.",
    },
    AnswerCheck {
        // 1200 / (45 − 7) = 31.58 min.
        expect: Expect::Numbers(&[(31.58, 0.05)]),
        reference: "It is full after 31.58 minutes: it gains 45 − 7 = 38 litres per minute, and 1,200 ÷ 38 = 31.58.",
    },
    AnswerCheck {
        // 3·(83·84/2) + 5·(50·51/2) − 15·(16·17/2).
        expect: Expect::Numbers(&[(14_793.0, 0.0)]),
        reference: "The sum is 14,793: multiples of 3 sum to 10,458, of 5 to 6,375, of 15 to 2,040, and 10,458 + 6,375 − 2,040 = 14,793.",
    },
    AnswerCheck {
        // × 14/6: 1050 g, 7 eggs, 560 ml.
        expect: Expect::Numbers(&[(1050.0, 0.5), (7.0, 0.0), (560.0, 0.5)]),
        reference: "For 14 people: 1,050 g of flour, 7 eggs and 560 ml of milk (everything × 14/6: 450 × 14/6 = 1,050, 3 × 14/6 = 7, 240 × 14/6 = 560).",
    },
];

/// In the order of [`PromptKind::JsonExtraction`]'s variants.
const JSON_EXTRACTION: &[AnswerCheck] = &[
    AnswerCheck {
        expect: Expect::JsonFields(&["name", "age", "city", "occupation", "start_year"]),
        reference: r#"{"name": "Lena Okafor", "age": 41, "city": "Rotterdam", "occupation": "marine biologist", "start_year": 2018}"#,
    },
    AnswerCheck {
        expect: Expect::JsonFields(&["order_id", "customer", "items", "total"]),
        reference: r#"{"order_id": "A-55312", "customer": "Jonas Berg", "items": [{"sku": "SKU-1180", "quantity": 2, "unit_price": 14.99}, {"sku": "SKU-2051", "quantity": 1, "unit_price": 89.00}, {"sku": "SKU-0007", "quantity": 3, "unit_price": 2.50}], "total": 126.48}"#,
    },
    AnswerCheck {
        expect: Expect::JsonFields(&[
            "timestamp",
            "level",
            "service",
            "request_id",
            "latency_ms",
            "message",
        ]),
        reference: r#"{"timestamp": "2024-11-03T14:22:09.481Z", "level": "WARN", "service": "checkout-api", "request_id": "7f3c9a", "latency_ms": 1843, "message": "upstream payment gateway slow"}"#,
    },
    AnswerCheck {
        expect: Expect::JsonFields(&["date", "title", "location"]),
        reference: r#"[{"date": "4 March", "title": "board meeting", "location": "Lyon"}, {"date": "19 March", "title": "product launch", "location": "Berlin"}, {"date": "2 May", "title": "team retreat", "location": "Porto"}]"#,
    },
    AnswerCheck {
        expect: Expect::JsonFields(&[
            "title",
            "company",
            "location",
            "remote",
            "salary_min",
            "salary_max",
            "skills",
        ]),
        reference: r#"{"title": "Senior Embedded Engineer", "company": "Acme Robotics", "location": "Austin, TX", "remote": false, "salary_min": 145000, "salary_max": 175000, "skills": ["C", "Rust", "RTOS", "CAN bus"]}"#,
    },
    AnswerCheck {
        expect: Expect::JsonFields(&["street", "number", "postal_code", "city", "country"]),
        reference: r#"{"street": "Karlsgatan", "number": "17", "postal_code": "411 04", "city": "Göteborg", "country": "Sweden"}"#,
    },
    AnswerCheck {
        expect: Expect::JsonFields(&[
            "drug",
            "dose_mg",
            "frequency_per_day",
            "duration_days",
            "with_food",
        ]),
        reference: r#"{"drug": "Amoxicillin", "dose_mg": 500, "frequency_per_day": 3, "duration_days": 7, "with_food": true}"#,
    },
];

/// `answer` made wrong in the way a broken kernel might: every digit
/// shifted by one and every JSON bracket turned into a parenthesis, the
/// length unchanged.
pub fn spoil(answer: &str) -> String {
    answer
        .chars()
        .map(|c| match c {
            '0'..='9' => char::from(b'0' + (c as u8 - b'0' + 1) % 10),
            '{' | '[' => '(',
            '}' | ']' => ')',
            c => c,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_checked_kind_has_a_check_per_variant_and_its_reference_passes() {
        for &k in PromptKind::all() {
            let checks = checks_of(k);
            if checks.is_empty() {
                continue;
            }
            assert_eq!(checks.len(), k.variants().len(), "{k}");
            for (v, c) in k.variants().iter().zip(checks) {
                assert_eq!(check_for(v), Some(c));
                assert!(c.passes(c.reference), "{k}: {}", c.reference);
                assert!(
                    !c.passes(&spoil(c.reference)),
                    "{k}: {}",
                    spoil(c.reference)
                );
            }
        }
        assert!(is_checked(PromptKind::Arithmetic) && !is_checked(PromptKind::Haiku));
        assert_eq!(check_for(PromptKind::Haiku.variants()[0]), None);
        assert_eq!(check_for("What is 2 + 2?"), None);
    }

    #[test]
    fn numbers_read_separators_decimals_and_stop_at_punctuation() {
        assert_eq!(
            numbers("158,762 and $4.20. Then 1,2 or 12, 7"),
            [158_762.0, 4.2, 1.0, 2.0, 12.0, 7.0]
        );
        assert_eq!(numbers("x1.2.3"), [1.2, 3.0]);
        assert_eq!(numbers("12,3456"), [12.0, 3456.0]);
    }

    #[test]
    fn arithmetic_answers_pass_on_their_result_not_on_the_working() {
        let change = check_for(PromptKind::Arithmetic.variants()[0]).unwrap();
        assert!(change.passes("So the change is 29 dollars."));
        assert!(!change.passes("12 pencils cost $4.20 and the notebooks $16.80"));
        let tank = check_for(PromptKind::Arithmetic.variants()[4]).unwrap();
        assert!(tank.passes("about 31.6 minutes"));
        assert!(!tank.passes("about 32 minutes"));
    }

    #[test]
    fn json_answers_need_every_field_in_parseable_json_anywhere_in_the_text() {
        let drug = check_for(PromptKind::JsonExtraction.variants()[6]).unwrap();
        let ok = r#"Here it is: ```json
{"drug": "Amoxicillin", "dose_mg": 500, "frequency_per_day": 3, "duration_days": 7, "with_food": true}
``` Done {"#;
        assert!(drug.passes(ok));
        assert!(!drug.passes(r#"{"drug": "Amoxicillin", "dose_mg": 500}"#));
        assert!(!drug.passes(r#"{"drug": "Amoxicillin", "dose_mg": 500, "#));
        let events = check_for(PromptKind::JsonExtraction.variants()[3]).unwrap();
        assert!(!events.passes("[]"));
        assert!(!events.passes(r#"[{"date": "4 March", "title": "x"}]"#));
        // Stray brackets before the JSON do not hide it.
        assert!(events.passes(r#"[see below] [{"date": 1, "title": 2, "location": 3}]"#));
    }
}
