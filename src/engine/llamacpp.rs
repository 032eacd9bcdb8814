//! Flags of the `llamacpp` engine.

use super::{EngineError, ServerSpec};

/// The engine-specific arguments for `spec`.
pub fn args(spec: &ServerSpec) -> Result<Vec<String>, EngineError> {
    Err(EngineError::new(spec.engine, "not yet supported"))
}
