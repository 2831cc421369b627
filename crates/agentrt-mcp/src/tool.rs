//! The tools load offers, as the core's [`Tool`]s: each call checked and
//! completed by the operator's rule, sent over the shared connection, and
//! its result mapped from the bytes the server sent.

use std::sync::Arc;

use agentrt::{BoxFuture, Tool, ToolCall, ToolError, ToolResult, ToolSpec};
use rmcp::model::{CallToolRequestParams, CallToolResponse, MetaObject, RequestMetaObject};
use rmcp::service::ServiceError;

use crate::call::{call_arguments, map_result};
use crate::capture::CALL_MARK;
use crate::check::OfferedTool;
use crate::connect::Connection;

/// One of a server's tools, offered through the gate.
pub struct McpTool {
    connection: Arc<Connection>,
    offered: OfferedTool,
}

impl McpTool {
    /// The tool `offered`, called over `connection`.
    pub fn new(connection: Arc<Connection>, offered: OfferedTool) -> McpTool {
        McpTool {
            connection,
            offered,
        }
    }

    async fn run(&self, call: ToolCall) -> Result<ToolResult, ToolError> {
        let server = self.connection.server().to_owned();
        let upstream = self.offered.upstream.clone();
        let protocol =
            |detail: String| format!("mcp: server {server:?}: tool {upstream:?}: {detail}");
        if self.connection.is_closed() {
            return Err(ToolError::failed(protocol(
                "the connection is closed".into(),
            )));
        }
        let args = call_arguments(&self.offered, call.args.as_bytes())?;
        let arguments: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(args.as_str()).map_err(|e| {
                ToolError::failed(protocol(format!("the arguments do not decode: {e}")))
            })?;
        let mark = agentrt::random_id();
        let mut meta = serde_json::Map::new();
        meta.insert(
            CALL_MARK.to_owned(),
            serde_json::Value::String(mark.clone()),
        );
        let mut params = CallToolRequestParams::new(upstream.clone());
        params.arguments = Some(arguments);
        params.meta = Some(RequestMetaObject(MetaObject(meta)));
        let forget = Forget {
            connection: &self.connection,
            mark: &mark,
        };
        let response = self.connection.peer().call_tool_once(params).await;
        let response = match response {
            Ok(response) => response,
            Err(ServiceError::McpError(e)) => {
                // The server answered with an error: it did not run the call.
                return Err(ToolError::failed(protocol(agentrt::text::sanitize(
                    &e.message,
                ))));
            }
            Err(e) if self.connection.is_closed() => {
                return Err(ToolError::Unknown {
                    message: protocol(format!(
                        "the connection was closed during the call: {}",
                        agentrt::text::sanitize(&e.to_string())
                    )),
                });
            }
            Err(e) => {
                // Sent (or perhaps sent) and no answer: what the server did
                // is not known.
                return Err(ToolError::Unknown {
                    message: protocol(agentrt::text::sanitize(&e.to_string())),
                });
            }
        };
        let result = match response {
            CallToolResponse::Complete(_) => self.connection.capture().take_call_result(&mark),
            CallToolResponse::InputRequired(_) => {
                return Err(ToolError::failed(protocol(
                    "the server asked for more input, which this client never gives".into(),
                )));
            }
            CallToolResponse::Task(_) => {
                return Err(ToolError::Unknown {
                    message: protocol(
                        "the server made the call a task, which this client does not follow; \
                         what it did is not known"
                            .into(),
                    ),
                });
            }
            // A kind of answer newer than this client: what the server did
            // is not known.
            _ => None,
        };
        drop(forget);
        let Some(raw) = result else {
            return Err(ToolError::Unknown {
                message: protocol("the server's reply was not seen on the wire".into()),
            });
        };
        map_result(&server, &upstream, &raw, self.connection.content_cap())
    }
}

/// Forgets a call's mark when its caller stops waiting.
struct Forget<'a> {
    connection: &'a Connection,
    mark: &'a str,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        self.connection.capture().forget_call(self.mark);
    }
}

impl Tool for McpTool {
    fn spec(&self) -> ToolSpec {
        self.offered.spec.clone()
    }

    fn call(&self, call: ToolCall) -> BoxFuture<'_, Result<ToolResult, ToolError>> {
        Box::pin(self.run(call))
    }
}
