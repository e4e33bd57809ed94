//! The `acp client` terminal REPL: a real ACP client that spawns `acp serve` (or any ACP agent) and renders its sessions.
