//! Where an example's model replies come from: an OpenAI-compatible
//! endpoint (optionally recorded) or a recording replayed byte for byte.
//! Shared by the `live` and `mcp` examples.

use std::path::PathBuf;
use std::sync::Arc;

use agentrt::Model;
use agentrt::replay::{Recorder, Replayer};

/// Where the model's replies come from.
pub enum Source {
    /// An OpenAI-compatible endpoint.
    Url {
        /// The base URL (`…/v1`).
        base_url: String,
        /// The model id.
        model: String,
        /// The API key, if the endpoint needs one.
        api_key: Option<String>,
        /// Record every exchange into this directory too.
        record: Option<PathBuf>,
    },
    /// A recording made earlier (offline, byte-identical).
    Replay(PathBuf),
}

/// The model for a source, named `name` (the name its recordings carry).
pub fn model(source: &Source, name: &str) -> Result<Arc<dyn Model>, String> {
    match source {
        Source::Replay(dir) => Ok(Arc::new(Replayer::new(name, dir))),
        Source::Url {
            base_url,
            model,
            api_key,
            record,
        } => {
            let mut config = agentrt_provider::openai::Config::new(model.clone());
            config.name = Some(name.to_owned());
            config.base_url = Some(base_url.clone());
            config.api_key = api_key.clone().map(agentrt_provider::ApiKey::new);
            let adapter: Arc<dyn Model> = Arc::new(config.build().map_err(|e| e.to_string())?);
            match record {
                None => Ok(adapter),
                Some(dir) => Ok(Arc::new(
                    Recorder::new(adapter, dir).map_err(|e| e.to_string())?,
                )),
            }
        }
    }
}
