//! [`Scripted`]: a model that answers from a fixed script.

use std::sync::{Mutex, PoisonError};

use crate::llm::{Model, ModelError, ModelRequest, ModelResponse};
use crate::model::BoxFuture;

/// The name a [`Scripted`] model reports unless given another.
pub const SCRIPTED_MODEL_NAME: &str = "scripted";

/// A model that answers call `i` (from 0) with `errors[i]` if set, else
/// `responses[i]`, else a [`ModelError::Other`] saying the script is
/// exhausted; it keeps every request it received.
///
/// ```
/// use agentrt::replay::Scripted;
/// use agentrt::{Model, ModelError, ModelRequest, ModelResponse, Usage};
/// # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
/// let reply = ModelResponse {
///     text: "hello".into(),
///     tool_uses: vec![],
///     stop_reason: None,
///     usage: Usage::default(),
///     raw: None,
/// };
/// let model = Scripted::new([reply.clone(), reply.clone()])
///     .with_error(0, ModelError::Timeout { message: "slow".into() });
/// let request = ModelRequest { system: String::new(), messages: vec![], tools: vec![], max_output_tokens: None };
/// assert!(matches!(model.generate(&request).await, Err(ModelError::Timeout { .. })));
/// assert_eq!(model.generate(&request).await, Ok(reply));
/// assert!(matches!(model.generate(&request).await, Err(ModelError::Other { .. })));
/// assert_eq!(model.requests().len(), 3);
/// assert_eq!(model.name(), "scripted");
/// # });
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct Scripted {
    model_name: String,
    responses: Vec<ModelResponse>,
    errors: Vec<Option<ModelError>>,
    requests: Mutex<Vec<ModelRequest>>,
}

impl Scripted {
    /// A model named `scripted` answering with `responses` in order.
    pub fn new(responses: impl IntoIterator<Item = ModelResponse>) -> Scripted {
        Scripted {
            model_name: SCRIPTED_MODEL_NAME.to_owned(),
            responses: responses.into_iter().collect(),
            errors: Vec::new(),
            requests: Mutex::new(Vec::new()),
        }
    }

    /// Sets the model name.
    #[must_use]
    pub fn with_name(mut self, name: impl Into<String>) -> Scripted {
        self.model_name = name.into();
        self
    }

    /// Sets the errors: `errors[i]`, when `Some`, answers call `i`.
    #[must_use]
    pub fn with_errors(mut self, errors: impl IntoIterator<Item = Option<ModelError>>) -> Scripted {
        self.errors = errors.into_iter().collect();
        self
    }

    /// Makes call `call` (from 0) fail with `error`.
    #[must_use]
    pub fn with_error(mut self, call: usize, error: ModelError) -> Scripted {
        if self.errors.len() <= call {
            self.errors.resize(call + 1, None);
        }
        if let Some(slot) = self.errors.get_mut(call) {
            *slot = Some(error);
        }
        self
    }

    /// The requests received so far, in order.
    #[must_use]
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// How many calls were made.
    #[must_use]
    pub fn calls(&self) -> usize {
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// The answer to call `i`.
    fn answer(&self, i: usize) -> Result<ModelResponse, ModelError> {
        if let Some(Some(error)) = self.errors.get(i) {
            return Err(error.clone());
        }
        self.responses
            .get(i)
            .cloned()
            .ok_or_else(|| ModelError::Other {
                message: format!(
                    "scripted model {:?}: the script is exhausted (call {} of {} scripted)",
                    self.model_name,
                    i + 1,
                    self.responses.len().max(self.errors.len())
                ),
            })
    }
}

impl Model for Scripted {
    fn name(&self) -> &str {
        &self.model_name
    }

    fn generate<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        let i = {
            let mut requests = self.requests.lock().unwrap_or_else(PoisonError::into_inner);
            requests.push(request.clone());
            requests.len() - 1
        };
        let answer = self.answer(i);
        Box::pin(async move { answer })
    }
}
