//! ACP method names and types. The types are the official `agent-client-protocol-schema` crate's
//! (protocol version 1); each method string appears once, here, taken from that crate.

pub use agent_client_protocol_schema::ProtocolVersion;
pub use agent_client_protocol_schema::v1 as schema;
use agent_client_protocol_schema::v1::{AGENT_METHOD_NAMES, CLIENT_METHOD_NAMES};

/// The only ACP protocol version this crate speaks.
pub const PROTOCOL_VERSION: u16 = 1;

/// Methods the agent handles (client → agent).
pub mod agent_methods {
    use super::AGENT_METHOD_NAMES as N;

    pub const INITIALIZE: &str = N.initialize;
    pub const AUTHENTICATE: &str = N.authenticate;
    pub const LOGOUT: &str = N.logout;
    pub const SESSION_NEW: &str = N.session_new;
    pub const SESSION_LOAD: &str = N.session_load;
    pub const SESSION_RESUME: &str = N.session_resume;
    pub const SESSION_LIST: &str = N.session_list;
    pub const SESSION_DELETE: &str = N.session_delete;
    pub const SESSION_CLOSE: &str = N.session_close;
    pub const SESSION_SET_MODE: &str = N.session_set_mode;
    pub const SESSION_SET_CONFIG_OPTION: &str = N.session_set_config_option;
    pub const SESSION_PROMPT: &str = N.session_prompt;
    pub const SESSION_CANCEL: &str = N.session_cancel;
}

/// Methods the client handles (agent → client).
pub mod client_methods {
    use super::CLIENT_METHOD_NAMES as N;

    pub const SESSION_UPDATE: &str = N.session_update;
    pub const SESSION_REQUEST_PERMISSION: &str = N.session_request_permission;
    pub const FS_READ_TEXT_FILE: &str = N.fs_read_text_file;
    pub const FS_WRITE_TEXT_FILE: &str = N.fs_write_text_file;
    pub const TERMINAL_CREATE: &str = N.terminal_create;
    pub const TERMINAL_OUTPUT: &str = N.terminal_output;
    pub const TERMINAL_WAIT_FOR_EXIT: &str = N.terminal_wait_for_exit;
    pub const TERMINAL_KILL: &str = N.terminal_kill;
    pub const TERMINAL_RELEASE: &str = N.terminal_release;
    pub const ELICITATION_CREATE: &str = N.elicitation_create;
}

/// Protocol-level notification either side may send to cancel one of its own requests.
pub const CANCEL_REQUEST: &str = "$/cancel_request";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn method_names_match_the_spec() {
        assert_eq!(agent_methods::SESSION_PROMPT, "session/prompt");
        assert_eq!(agent_methods::SESSION_SET_CONFIG_OPTION, "session/set_config_option");
        assert_eq!(client_methods::SESSION_UPDATE, "session/update");
        assert_eq!(client_methods::TERMINAL_WAIT_FOR_EXIT, "terminal/wait_for_exit");
    }
}
