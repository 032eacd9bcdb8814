//! Request sources for campaign workload points: exact-length synthetic
//! prompts or built-in prompt kinds, counted with the best tokenizer
//! available (the model's tokenizer.json, the simulator's own word count,
//! or a declared approximation).

use std::sync::Arc;

use crate::campaign::{Campaign, PromptSource as Source, WorkloadPoint};
use crate::engine::EngineKind;
use crate::load::source::PromptSource;
use crate::workload::{
    ApproxCounter, ExactPromptBuilder, ExactPromptSpec, HfTokenizer, PromptKind, PromptSampler,
    PromptSelection, TokenCounter,
};

/// The token counter for a campaign: exact when possible.
pub fn counter(c: &Campaign) -> Result<Arc<dyn TokenCounter>, String> {
    if let Some(p) = &c.model.tokenizer {
        return Ok(Arc::new(
            HfTokenizer::from_file(p).map_err(|e| e.to_string())?,
        ));
    }
    if c.engine.kind == EngineKind::Sim {
        return Ok(Arc::new(crate::sim::model::SimTokenizer));
    }
    Ok(Arc::new(ApproxCounter))
}

/// Build the request source for one workload point.
pub async fn for_workload(
    c: &Campaign,
    w: &WorkloadPoint,
    _url: &str,
) -> Result<PromptSource, String> {
    let model = c.model.served_name.clone();
    let prompt: crate::load::source::PromptFn = match &w.source {
        Source::Synthetic => {
            let counter = counter(c)?;
            let exact = counter.exact();
            let builder = ExactPromptBuilder::new(counter).map_err(|e| e.to_string())?;
            let spec = ExactPromptSpec {
                tokens: w.input_len as usize,
                shared_prefix_tokens: w.shared_prefix as usize,
                seed: w.seed,
            };
            let label = if exact {
                "synthetic"
            } else {
                "synthetic-approx"
            };
            Box::new(move |i| {
                let p = builder.build(&spec, i).map_err(|e| e.to_string())?;
                Ok((p.text, Some(p.tokens as u64), Some(label.to_string())))
            })
        }
        Source::PromptKinds { kinds } => {
            let parsed = kinds
                .iter()
                .map(|k| k.parse::<PromptKind>().map_err(|e| e.to_string()))
                .collect::<Result<Vec<_>, _>>()?;
            let selection = PromptSelection::new(parsed).map_err(|e| e.to_string())?;
            let mut sampler = PromptSampler::new(&selection, w.seed);
            Box::new(move |_| {
                let (kind, text) = sampler.next_prompt();
                Ok((text.to_string(), None, Some(kind.name().to_string())))
            })
        }
    };
    Ok(PromptSource::new(
        w.api,
        model,
        w.output_len,
        w.ignore_eos,
        prompt,
    ))
}
