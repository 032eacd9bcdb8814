//! `report.json`: the aggregate view for other tools, versioned by
//! `schema_version` so consumers can refuse layouts they do not know.

use super::model::Report;
use super::Exporter;

/// Serialises the whole [`Report`].
pub struct JsonExporter;

impl Exporter for JsonExporter {
    fn file_name(&self) -> &'static str {
        "report.json"
    }

    fn render(&self, r: &Report) -> Vec<u8> {
        // Serialising plain data with string keys cannot fail.
        let mut v = serde_json::to_vec_pretty(r).expect("report serialises");
        v.push(b'\n');
        v
    }
}
