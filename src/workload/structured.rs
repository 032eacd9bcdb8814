//! What a structured request carries beside its prompt: OpenAI `tools`
//! (function definitions the model may call) and a `response_format` (a
//! JSON schema the answer must follow, enforced by the engine's grammar
//! backend).
//!
//! The built-in tools are a calculator and a unit converter (the
//! `tool-call` kind); the `json-schema` kind sends the JSON-extraction
//! prompts with a schema derived from each one's reference answer
//! ([`schema_of`]), so the pair measures what constrained decoding costs on
//! the same prompts. Invariants: every built-in definition is valid JSON
//! Schema, and a derived schema accepts its reference answer.

use std::sync::{Arc, OnceLock};

use serde_json::{json, Value};

pub use crate::client::openai::{response_format, Structured};
pub use crate::client::tool_calls::{ToolCall, ToolCalls};

/// The built-in tools: `calculator` (one operation on two numbers) and
/// `convert_units` (a value from one unit to another), strict as agents
/// send them (every argument required, no other; engines that enforce
/// `strict` constrain a call's arguments to the schema).
pub fn builtin_tools() -> Arc<Value> {
    static TOOLS: OnceLock<Arc<Value>> = OnceLock::new();
    TOOLS
        .get_or_init(|| {
            Arc::new(json!([
                {"type": "function", "function": {
                    "name": "calculator",
                    "description": "Compute one arithmetic operation on two numbers and return the result.",
                    "parameters": {
                        "type": "object",
                        "properties": {
                            "operation": {"type": "string", "enum": ["add", "subtract", "multiply", "divide", "power"]},
                            "a": {"type": "number", "description": "The first operand."},
                            "b": {"type": "number", "description": "The second operand."}
                        },
                        "required": ["operation", "a", "b"],
                        "additionalProperties": false
                    },
                    "strict": true
                }},
                {"type": "function", "function": {
                    "name": "convert_units",
                    "description": "Convert a value from one unit to another.",
                    "parameters": {
                        "type": "object",
                        "properties": {
                            "value": {"type": "number"},
                            "from_unit": {"type": "string", "enum": ["miles", "kilometres", "celsius", "fahrenheit", "pounds", "kilograms"]},
                            "to_unit": {"type": "string", "enum": ["miles", "kilometres", "celsius", "fahrenheit", "pounds", "kilograms"]}
                        },
                        "required": ["value", "from_unit", "to_unit"],
                        "additionalProperties": false
                    },
                    "strict": true
                }}
            ]))
        })
        .clone()
}

/// A JSON schema that `reference` satisfies and that pins its shape:
/// every object key required and no other allowed, lists of the first
/// item's shape, numbers, strings and booleans typed. Written for
/// extraction answers, whose shape is what the prompt asks for.
pub fn schema_of(reference: &Value) -> Value {
    match reference {
        Value::Object(map) => json!({
            "type": "object",
            "properties": map.iter().map(|(k, v)| (k.clone(), schema_of(v))).collect::<serde_json::Map<_, _>>(),
            "required": map.keys().collect::<Vec<_>>(),
            "additionalProperties": false,
        }),
        Value::Array(items) => match items.first() {
            Some(first) => json!({"type": "array", "items": schema_of(first)}),
            None => json!({"type": "array"}),
        },
        Value::String(_) => json!({"type": "string"}),
        Value::Number(_) => json!({"type": "number"}),
        Value::Bool(_) => json!({"type": "boolean"}),
        Value::Null => json!({"type": "null"}),
    }
}

/// Names of the functions `tools` defines, in order.
pub fn tool_names(tools: &Value) -> Vec<&str> {
    tools
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t.pointer("/function/name").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default()
}

/// Why a tool definition or a schema is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DefinitionError {
    /// `tools` is not a non-empty list.
    #[error("`tools` must be a non-empty list of function definitions")]
    NotAList,
    /// A tool is not `type = "function"`.
    #[error("tool {0}: `type` must be \"function\"")]
    NotAFunction(usize),
    /// A tool has no name.
    #[error("tool {0}: `function.name` is missing")]
    NoName(usize),
    /// A tool's parameters do not compile as a JSON schema.
    #[error("tool `{name}`: parameters are not a JSON schema: {reason}")]
    BadParameters {
        /// The tool.
        name: String,
        /// The schema compiler's message.
        reason: String,
    },
    /// A schema does not compile.
    #[error("not a JSON schema: {0}")]
    BadSchema(String),
    /// A value could not be read as JSON.
    #[error("not JSON: {0}")]
    NotJson(String),
}

/// Why `tools` is not a list of OpenAI function definitions, if it is not:
/// each needs `type = "function"`, a name, and object `parameters` that
/// compile as a JSON schema.
pub fn check_tools(tools: &Value) -> Result<(), DefinitionError> {
    let list = tools
        .as_array()
        .filter(|a| !a.is_empty())
        .ok_or(DefinitionError::NotAList)?;
    for (i, t) in list.iter().enumerate() {
        if t.get("type").and_then(Value::as_str) != Some("function") {
            return Err(DefinitionError::NotAFunction(i));
        }
        let name = t
            .pointer("/function/name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or(DefinitionError::NoName(i))?;
        if let Some(p) = t.pointer("/function/parameters") {
            jsonschema::validator_for(p).map_err(|e| DefinitionError::BadParameters {
                name: name.to_string(),
                reason: e.to_string(),
            })?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_derived_schema_accepts_its_reference_and_rejects_a_changed_shape() {
        let reference =
            json!({"name": "Lena", "age": 41, "skills": ["C", "Rust"], "remote": false});
        let schema = schema_of(&reference);
        let v = jsonschema::validator_for(&schema).unwrap();
        assert!(v.is_valid(&reference));
        // A number written as a string, a missing key, an extra key.
        assert!(!v.is_valid(&json!({"name": "Lena", "age": "41", "skills": [], "remote": false})));
        assert!(!v.is_valid(&json!({"name": "Lena", "skills": [], "remote": false})));
        assert!(
            !v.is_valid(&json!({"name": "Lena", "age": 41, "skills": [], "remote": false, "x": 1}))
        );
        let s = Structured::schema("extraction", &schema);
        let format = s.response_format.as_deref().unwrap();
        assert_eq!(format["type"], "json_schema");
        assert_eq!(format.pointer("/json_schema/schema"), Some(&schema));
        assert_eq!(format["json_schema"]["strict"], true);
        let mode = Structured::json_object();
        assert_eq!(
            *mode.response_format.unwrap(),
            json!({"type": "json_object"})
        );
        assert!(mode.tools.is_none());
    }

    #[test]
    fn builtin_tools_are_valid_definitions_and_bad_ones_are_named() {
        let tools = builtin_tools();
        check_tools(&tools).unwrap();
        assert_eq!(tool_names(&tools), ["calculator", "convert_units"]);
        assert!(check_tools(&json!([])).is_err());
        let e = check_tools(&json!([{"type": "function", "function": {}}])).unwrap_err();
        assert_eq!(e, DefinitionError::NoName(0));
        let e = check_tools(
            &json!([{"type": "function", "function": {"name": "f", "parameters": {"type": 7}}}]),
        )
        .unwrap_err();
        assert!(e.to_string().contains("tool `f`"), "{e}");
    }
}
