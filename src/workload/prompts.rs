//! Built-in prompt kinds for speculative-decoding and throughput runs.
//!
//! Draft acceptance depends on the task (code repeats identifiers, a haiku
//! does not), so results are reported per [`PromptKind`]. Each kind is a small
//! family of prompts so that repetitions of a cell do not send the same text
//! over and over (which would let prefix caching flatter the numbers).
//!
//! Invariants: every kind has at least five variants, and [`PromptSampler`]
//! yields the same sequence for the same selection and seed.

use std::fmt;
use std::str::FromStr;

use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};

use super::WorkloadError;
use crate::util::rng::{seeded, SeededRng};

/// A built-in family of prompts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PromptKind {
    /// Write a Fibonacci function.
    Fibonacci,
    /// Write a quicksort.
    Quicksort,
    /// Multi-step arithmetic with worked reasoning.
    Arithmetic,
    /// Extract fields from a given text into JSON.
    JsonExtraction,
    /// Write a haiku.
    Haiku,
    /// Call the calculator or unit-conversion tool with the right arguments
    /// (sent with `tools`; chat API).
    ToolCall,
    /// The JSON-extraction prompts with their schema as `response_format`
    /// (chat API): constrained decoding of the same prompts.
    JsonSchema,
    /// The JSON-extraction prompts under `response_format = {"type":
    /// "json_object"}` (chat API): any JSON object, no schema.
    JsonObject,
    /// The tool-call prompts sent without tools, answered in words: what
    /// offering tools costs.
    ToolCallText,
}

const ALL: [PromptKind; 5] = [
    PromptKind::Fibonacci,
    PromptKind::Quicksort,
    PromptKind::Arithmetic,
    PromptKind::JsonExtraction,
    PromptKind::Haiku,
];

/// Plain kinds that exist as a structured kind's unconstrained twin: named
/// on their own, never part of `all` (so `all` keeps its cells).
const TWINS: [PromptKind; 1] = [PromptKind::ToolCallText];

/// The kinds sent with tools or a response format: named on their own,
/// never part of `all` (they need the chat API and end where their grammar
/// does, so they do not force their output length).
const STRUCTURED: [PromptKind; 3] = [
    PromptKind::ToolCall,
    PromptKind::JsonSchema,
    PromptKind::JsonObject,
];

/// The structured kinds' names, comma-separated (for errors that list them).
pub fn structured_names() -> String {
    STRUCTURED.map(PromptKind::name).join(", ")
}

impl PromptKind {
    /// Every plain kind (what `all` selects), in a fixed order.
    pub fn all() -> &'static [PromptKind] {
        &ALL
    }

    /// The kinds sent with tools or a response format.
    pub fn structured() -> &'static [PromptKind] {
        &STRUCTURED
    }

    /// Every kind a workload can name: the plain ones, the plain twins,
    /// then the structured ones (the order a prompt's check is looked up in).
    pub fn named() -> impl Iterator<Item = PromptKind> {
        ALL.into_iter().chain(TWINS).chain(STRUCTURED)
    }

    /// The kind that sends the same prompts without a constraint: what a
    /// structured kind's decode speed is compared with.
    pub fn unconstrained_twin(self) -> Option<PromptKind> {
        match self {
            PromptKind::JsonSchema | PromptKind::JsonObject => Some(PromptKind::JsonExtraction),
            PromptKind::ToolCall => Some(PromptKind::ToolCallText),
            _ => None,
        }
    }

    /// Whether requests of this kind carry tools or a response format.
    pub fn is_structured(self) -> bool {
        STRUCTURED.contains(&self)
    }

    /// The kebab-case name used in configs and reports.
    pub fn name(self) -> &'static str {
        match self {
            PromptKind::Fibonacci => "fibonacci",
            PromptKind::Quicksort => "quicksort",
            PromptKind::Arithmetic => "arithmetic",
            PromptKind::JsonExtraction => "json-extraction",
            PromptKind::Haiku => "haiku",
            PromptKind::ToolCall => "tool-call",
            PromptKind::JsonSchema => "json-schema",
            PromptKind::JsonObject => "json-object",
            PromptKind::ToolCallText => "tool-call-text",
        }
    }

    /// The prompts of this kind.
    pub fn variants(self) -> &'static [&'static str] {
        match self {
            PromptKind::Fibonacci => FIBONACCI,
            PromptKind::Quicksort => QUICKSORT,
            PromptKind::Arithmetic => ARITHMETIC,
            PromptKind::JsonExtraction => JSON_EXTRACTION,
            PromptKind::Haiku => HAIKU,
            PromptKind::ToolCall | PromptKind::ToolCallText => TOOL_CALL,
            // The same prompts as JSON extraction: the pairs show what the
            // schema, or JSON mode, costs.
            PromptKind::JsonSchema | PromptKind::JsonObject => JSON_EXTRACTION,
        }
    }

    fn allowed() -> String {
        Self::named().map(Self::name).collect::<Vec<_>>().join(", ")
    }
}

impl fmt::Display for PromptKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for PromptKind {
    type Err = WorkloadError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::named()
            .find(|k| k.name() == s.trim())
            .ok_or_else(|| WorkloadError::UnknownName {
                what: "prompt kind",
                given: s.to_string(),
                allowed: PromptKind::allowed(),
            })
    }
}

/// Which prompt kinds to use: one, several, or `all`.
///
/// Parsed from `all`, `haiku` or `fibonacci,haiku`; in TOML/JSON it is the
/// string `"all"`, one kind name, or a list of kind names. Kinds keep the
/// order given, without duplicates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "SelectionRepr", into = "SelectionRepr")]
pub struct PromptSelection {
    kinds: Vec<PromptKind>,
}

impl PromptSelection {
    /// All built-in kinds.
    pub fn all() -> Self {
        Self {
            kinds: ALL.to_vec(),
        }
    }

    /// The given kinds (duplicates removed); an empty list is an error.
    pub fn new(kinds: impl IntoIterator<Item = PromptKind>) -> Result<Self, WorkloadError> {
        let mut out: Vec<PromptKind> = Vec::new();
        for k in kinds {
            if !out.contains(&k) {
                out.push(k);
            }
        }
        if out.is_empty() {
            return Err(WorkloadError::InvalidArgument(format!(
                "a prompt selection needs at least one kind (allowed: all, {})",
                PromptKind::allowed()
            )));
        }
        Ok(Self { kinds: out })
    }

    /// The selected kinds.
    pub fn kinds(&self) -> &[PromptKind] {
        &self.kinds
    }
}

impl Default for PromptSelection {
    fn default() -> Self {
        Self::all()
    }
}

impl FromStr for PromptSelection {
    type Err = WorkloadError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.trim() == "all" {
            return Ok(Self::all());
        }
        let kinds = s
            .split(',')
            .map(str::parse)
            .collect::<Result<Vec<PromptKind>, _>>()?;
        Self::new(kinds)
    }
}

impl fmt::Display for PromptSelection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.kinds == ALL {
            return f.write_str("all");
        }
        let names: Vec<&str> = self.kinds.iter().map(|k| k.name()).collect();
        f.write_str(&names.join(","))
    }
}

/// Serialized form of [`PromptSelection`]: a string (`all`, a name, `a,b`) or a list of names.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum SelectionRepr {
    One(String),
    Many(Vec<PromptKind>),
}

impl TryFrom<SelectionRepr> for PromptSelection {
    type Error = WorkloadError;

    fn try_from(r: SelectionRepr) -> Result<Self, Self::Error> {
        match r {
            SelectionRepr::One(s) => s.parse(),
            SelectionRepr::Many(kinds) => Self::new(kinds),
        }
    }
}

impl From<PromptSelection> for SelectionRepr {
    fn from(s: PromptSelection) -> Self {
        SelectionRepr::One(s.to_string())
    }
}

/// Deterministic, seeded stream of (kind, prompt) pairs over a selection.
///
/// Kinds are taken in turn so every kind gets the same share of requests;
/// within a kind, variants come in a seeded order and are all used before
/// any repeats.
#[derive(Debug, Clone)]
pub struct PromptSampler {
    kinds: Vec<PromptKind>,
    rng: SeededRng,
    /// Per kind: the current shuffled order of its variants and the position in it.
    decks: Vec<(Vec<usize>, usize)>,
    next_kind: usize,
}

impl PromptSampler {
    /// A sampler over `selection`, reproducible from `seed`.
    pub fn new(selection: &PromptSelection, seed: u64) -> Self {
        let kinds = selection.kinds().to_vec();
        let decks = kinds.iter().map(|_| (Vec::new(), 0)).collect();
        Self {
            kinds,
            rng: seeded(seed),
            decks,
            next_kind: 0,
        }
    }

    /// The next (kind, prompt) pair.
    pub fn next_prompt(&mut self) -> (PromptKind, &'static str) {
        let slot = self.next_kind;
        self.next_kind = (self.next_kind + 1) % self.kinds.len();
        let kind = self.kinds[slot];
        let variants = kind.variants();
        let (order, pos) = &mut self.decks[slot];
        if *pos >= order.len() {
            *order = (0..variants.len()).collect();
            order.shuffle(&mut self.rng);
            *pos = 0;
        }
        let text = variants[order[*pos]];
        *pos += 1;
        (kind, text)
    }
}

impl Iterator for PromptSampler {
    type Item = (PromptKind, &'static str);

    fn next(&mut self) -> Option<Self::Item> {
        Some(self.next_prompt())
    }
}

const FIBONACCI: &[&str] = &[
    "Write a Python function `fib(n)` that returns the n-th Fibonacci number using iteration, with a docstring and three doctest examples.",
    "Write a Rust function `fn fibonacci(n: u32) -> u64` that computes the n-th Fibonacci number iteratively and returns an error-free result for n up to 93. Include unit tests.",
    "Implement a memoized recursive Fibonacci function in JavaScript and explain why memoization changes its running time from exponential to linear.",
    "Write a C function that fills an array with the first n Fibonacci numbers, checking for overflow of a 64-bit unsigned integer, and a main function that prints the first 20.",
    "Write a Python generator that yields Fibonacci numbers forever, then use it to print the first Fibonacci number with more than 100 digits and its index.",
    "Write a Go function that computes the n-th Fibonacci number in O(log n) time with matrix exponentiation, and a table-driven test for it.",
    "Write a Haskell definition of the infinite list of Fibonacci numbers using zipWith, and a function that returns the sum of the even-valued terms below four million.",
];

const QUICKSORT: &[&str] = &[
    "Write an in-place quicksort in Python using the Lomuto partition scheme, and explain how the choice of pivot affects the worst case.",
    "Implement quicksort in Rust as a generic function `fn quicksort<T: Ord>(v: &mut [T])` using Hoare partitioning, with tests for empty, sorted and reverse-sorted input.",
    "Write a quicksort in C that sorts an array of integers, uses median-of-three pivot selection and switches to insertion sort for ranges shorter than 16 elements.",
    "Write a functional quicksort in Haskell using list comprehensions, then explain why it is not in-place and what that costs.",
    "Implement a three-way partitioning quicksort in Java that handles many duplicate keys efficiently, and describe a test that shows the improvement.",
    "Write a JavaScript quicksort that sorts an array of objects by a given key without mutating the input, with a few example calls.",
    "Write an iterative quicksort in Python that uses an explicit stack instead of recursion, and show it sorting the list [9, 4, 7, 1, 8, 2, 2, 6].",
];

const ARITHMETIC: &[&str] = &[
    "A shop sells pencils at 35 cents each and notebooks at $2.40 each. Maria buys 12 pencils and 7 notebooks and pays with a $50 bill. How much change does she get? Show each step.",
    "Compute 487 × 326 step by step using long multiplication, then check the result by dividing it by 326.",
    "A train leaves at 09:47 and travels 318 km at an average speed of 84 km/h. At what time does it arrive? Show your working and round to the nearest minute.",
    "What is 17% of 2,450, plus 3/8 of 1,216, minus 12 squared? Work it out step by step.",
    "A tank holds 1,200 litres. A pipe fills it at 45 litres per minute while a leak drains 7 litres per minute. Starting empty, how long until it is full? Show the arithmetic.",
    "Find the sum of all integers from 1 to 250 that are divisible by 3 or by 5. Explain the method and show the calculation.",
    "A recipe for 6 people uses 450 g of flour, 3 eggs and 240 ml of milk. Scale it for 14 people, rounding eggs up to whole eggs, and show each calculation.",
];

const JSON_EXTRACTION: &[&str] = &[
    "Extract the following fields from the text into a JSON object with keys name, age, city, occupation and start_year. Text: \"Dr. Lena Okafor, 41, moved to Rotterdam in 2016 where she has worked as a marine biologist at the port authority since 2018.\" Reply with JSON only.",
    "From this order confirmation, extract order_id, customer, items (a list of {sku, quantity, unit_price}) and total as JSON: \"Order #A-55312 for Jonas Berg: 2 x SKU-1180 at 14.99, 1 x SKU-2051 at 89.00, 3 x SKU-0007 at 2.50. Total 126.48 EUR.\" Reply with JSON only.",
    "Read the log line and return a JSON object with timestamp, level, service, request_id, latency_ms and message: \"2024-11-03T14:22:09.481Z WARN checkout-api req=7f3c9a latency=1843ms upstream payment gateway slow\". Reply with JSON only.",
    "Extract every event from this text as a JSON array of {date, title, location}: \"The board meets on 4 March in Lyon; the product launch follows on 19 March in Berlin, and the team retreat is planned for 2 May in Porto.\" Reply with JSON only.",
    "Turn this job posting into JSON with keys title, company, location, remote (boolean), salary_min, salary_max and skills (list): \"Acme Robotics is hiring a Senior Embedded Engineer in Austin, TX (hybrid, not fully remote). Pay: $145k-$175k. Must know C, Rust, RTOS and CAN bus.\" Reply with JSON only.",
    "Extract the address fields street, number, postal_code, city and country as JSON from: \"Please ship to Karlsgatan 17, 411 04 Göteborg, Sweden, attention Ms. Holm.\" Reply with JSON only.",
    "Convert this medication note to JSON with keys drug, dose_mg, frequency_per_day, duration_days and with_food (boolean): \"Amoxicillin 500 mg three times daily for seven days, taken with meals.\" Reply with JSON only.",
];

/// Each asks for one call of the calculator or unit-conversion tool of
/// [`crate::workload::structured::builtin_tools`]; the expected calls are
/// in `answer_check`, in the same order.
const TOOL_CALL: &[&str] = &[
    "A warehouse has 37 pallets with 41 boxes on each. Use the calculator tool to find how many boxes there are.",
    "Use the calculator tool to work out 1,250 divided by 8.",
    "A runner covered 26.2 miles. Convert that distance to kilometres with the unit conversion tool.",
    "Use the calculator tool to compute 2 to the power of 20.",
    "Our budget is 9,400 and we have spent 2,785 of it. Use the calculator tool to find what is left.",
    "The oven is set to 180 degrees Celsius. Convert that to Fahrenheit with the unit conversion tool.",
    "Use the calculator tool to add 318.75 and 44.5.",
];

const HAIKU: &[&str] = &[
    "Write a haiku about the first snow falling on a quiet city street.",
    "Write a haiku about a programmer debugging code late at night.",
    "Write a haiku about the sound of rain on a tin roof in summer.",
    "Write a haiku about an old lighthouse keeper watching the sea.",
    "Write a haiku about autumn leaves drifting down a slow river.",
    "Write a haiku about the moment a kettle starts to boil in the morning.",
    "Write a haiku about a fox crossing a frozen field at dawn.",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_at_least_five_distinct_variants() {
        for k in PromptKind::named() {
            let v = k.variants();
            assert!(v.len() >= 5, "{k}");
            let mut sorted = v.to_vec();
            sorted.sort();
            sorted.dedup();
            assert_eq!(sorted.len(), v.len(), "{k} has duplicates");
        }
    }

    #[test]
    fn kind_names_round_trip_through_fromstr_display_and_serde() {
        for k in PromptKind::named() {
            assert_eq!(k.name().parse::<PromptKind>().unwrap(), k);
            assert_eq!(k.to_string(), k.name());
            let json = serde_json::to_string(&k).unwrap();
            assert_eq!(json, format!("\"{}\"", k.name()));
            assert_eq!(serde_json::from_str::<PromptKind>(&json).unwrap(), k);
        }
    }

    #[test]
    fn unknown_kind_lists_allowed_values() {
        let err = "fib".parse::<PromptKind>().unwrap_err().to_string();
        assert!(err.contains("`fib`"), "{err}");
        for k in PromptKind::named() {
            assert!(err.contains(k.name()), "{err}");
        }
    }

    #[test]
    fn selection_accepts_all_one_or_several() {
        assert_eq!(
            "all".parse::<PromptSelection>().unwrap().kinds(),
            PromptKind::all()
        );
        assert!(PromptKind::all().iter().all(|k| !k.is_structured()));
        assert_eq!(
            "json-extraction,json-schema"
                .parse::<PromptSelection>()
                .unwrap()
                .kinds(),
            [PromptKind::JsonExtraction, PromptKind::JsonSchema]
        );
        assert_eq!(
            "haiku".parse::<PromptSelection>().unwrap().kinds(),
            [PromptKind::Haiku]
        );
        assert_eq!(
            "haiku, fibonacci,haiku"
                .parse::<PromptSelection>()
                .unwrap()
                .kinds(),
            [PromptKind::Haiku, PromptKind::Fibonacci]
        );
        assert!("haiku,nope".parse::<PromptSelection>().is_err());
        assert!("".parse::<PromptSelection>().is_err());
        assert!(PromptSelection::new([]).is_err());
    }

    #[test]
    fn selection_deserializes_from_string_or_list() {
        #[derive(Debug, Deserialize)]
        struct Cfg {
            prompts: PromptSelection,
        }
        let all: Cfg = toml::from_str("prompts = \"all\"").unwrap();
        assert_eq!(all.prompts, PromptSelection::all());
        let list: Cfg = toml::from_str("prompts = [\"quicksort\", \"json-extraction\"]").unwrap();
        assert_eq!(
            list.prompts.kinds(),
            [PromptKind::Quicksort, PromptKind::JsonExtraction]
        );
        let err = toml::from_str::<Cfg>("prompts = \"sonnet\"").unwrap_err();
        assert!(err.to_string().contains("haiku"), "{err}");
        let json = serde_json::to_string(&list.prompts).unwrap();
        assert_eq!(json, "\"quicksort,json-extraction\"");
    }

    #[test]
    fn sampler_is_deterministic_balanced_and_varied() {
        let sel = PromptSelection::all();
        let a: Vec<_> = PromptSampler::new(&sel, 7).take(50).collect();
        let b: Vec<_> = PromptSampler::new(&sel, 7).take(50).collect();
        let c: Vec<_> = PromptSampler::new(&sel, 8).take(50).collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        for &k in PromptKind::all() {
            let of_kind: Vec<&str> = a.iter().filter(|(kk, _)| *kk == k).map(|p| p.1).collect();
            assert_eq!(of_kind.len(), 10);
            // A full deck is dealt before any variant repeats.
            let n = k.variants().len();
            let mut first: Vec<&str> = of_kind[..n].to_vec();
            first.sort();
            first.dedup();
            assert_eq!(first.len(), n, "{k}");
        }
    }
}
