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
        let mark = agentrt::ids::random_id();
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
            Err(ServiceError::McpError(e)) => return Err(error_answer(&protocol, &e)),
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
                // Not a refusal before the call: what the server did before
                // asking is not known.
                return Err(ToolError::Unknown {
                    message: protocol(
                        "the server asked for more input, which this client never gives; \
                         what it did before asking is not known"
                            .into(),
                    ),
                });
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

/// JSON-RPC's "invalid params" code: the one error answer to `tools/call`
/// taken as "the call did not run". Any other error answer is an unknown
/// outcome (design §38); the MCP specification has a server answer
/// arguments its tool cannot take with `-32602` before running the tool.
pub const INVALID_PARAMS: i32 = -32602;

/// What a JSON-RPC error answer to `tools/call` says about the call
/// (design §38): only a tool result with `isError` or a refusal before
/// anything was sent is a known failure, so an error answer is an unknown
/// outcome (a change that failed halfway blocks its request until an
/// operator settles it), except [`INVALID_PARAMS`]. The MCP specification
/// has a server answer arguments its tool cannot take with `-32602`
/// before running the tool; that one is a known failure, and the agent may
/// correct its arguments. The risk, taken knowingly: a server that ran
/// part of a change and then answered `-32602` has its request run again.
fn error_answer(protocol: &dyn Fn(String) -> String, error: &rmcp::ErrorData) -> ToolError {
    let message = agentrt::text::sanitize(&error.message);
    let code = error.code.0;
    if code == INVALID_PARAMS {
        return ToolError::failed(protocol(format!("invalid arguments ({code}): {message}")));
    }
    ToolError::Unknown {
        message: protocol(format!(
            "the server answered with error {code}, not a result: {message}; \
             what it did is not known"
        )),
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
