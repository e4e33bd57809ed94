"""A small ACP agent written with the official Python SDK (agent-client-protocol on PyPI), used to
show that `acp client` drives agents other than acp. Each prompt: a reply chunk, then a tool call
that asks permission, runs `echo` in a client terminal and reads a file through the client, then a
closing chunk. The prompt "crash" makes it exit in the middle of a turn; "late" makes it wait for a
cancel and then still send text (as an agent with output in flight does) before it answers."""

import asyncio
import os
import sys

from acp import (
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    run_agent,
    start_tool_call,
    text_block,
    update_agent_message,
    update_tool_call,
)
from acp.schema import AgentCapabilities, Implementation, PermissionOption, ToolCallUpdate


class PyAgent:
    def on_connect(self, conn):
        self.conn = conn
        self.cwd = "."
        self.cancelled = asyncio.Event()

    async def initialize(self, protocol_version, client_capabilities=None, client_info=None, **kwargs):
        return InitializeResponse(
            protocol_version=1,
            agent_capabilities=AgentCapabilities(load_session=False),
            agent_info=Implementation(name="py-agent", title="Python test agent", version="1.0"),
        )

    async def new_session(self, cwd, additional_directories=None, mcp_servers=None, **kwargs):
        self.cwd = cwd
        return NewSessionResponse(session_id="py-session-1")

    async def authenticate(self, method_id, **kwargs):
        return None

    async def cancel(self, session_id, **kwargs):
        self.cancelled.set()
        return None

    async def say(self, session_id, text):
        await self.conn.session_update(session_id=session_id, update=update_agent_message(text_block(text)))

    async def prompt(self, session_id, prompt, **kwargs):
        said = " ".join(getattr(block, "text", "") for block in prompt)
        await self.say(session_id, f"Python agent heard: {said}\n")
        if said.strip() == "crash":
            sys.stdout.flush()
            await asyncio.sleep(0.2)
            os._exit(3)
        if said.strip() == "late":
            self.cancelled.clear()
            await self.cancelled.wait()
            await self.say(session_id, "LATE TEXT AFTER THE CANCEL")
            return PromptResponse(stop_reason="cancelled")
        await self.conn.session_update(
            session_id=session_id,
            update=start_tool_call("py-call-1", "Run echo", kind="execute", status="pending", raw_input={"command": "echo from-terminal"}),
        )
        answer = await self.conn.request_permission(
            session_id=session_id,
            tool_call=ToolCallUpdate(tool_call_id="py-call-1", title="Run echo"),
            options=[
                PermissionOption(option_id="yes", name="Allow", kind="allow_once"),
                PermissionOption(option_id="no", name="Deny", kind="reject_once"),
            ],
        )
        outcome = answer.outcome
        if getattr(outcome, "option_id", None) != "yes":
            await self.conn.session_update(session_id=session_id, update=update_tool_call("py-call-1", status="failed"))
            await self.say(session_id, "Not allowed.")
            return PromptResponse(stop_reason="end_turn")
        terminal = await self.conn.create_terminal(session_id=session_id, command="echo", args=["from-terminal"], cwd=self.cwd)
        exit_status = await self.conn.wait_for_terminal_exit(session_id=session_id, terminal_id=terminal.terminal_id)
        output = await self.conn.terminal_output(session_id=session_id, terminal_id=terminal.terminal_id)
        await self.conn.release_terminal(session_id=session_id, terminal_id=terminal.terminal_id)
        note = await self.conn.read_text_file(session_id=session_id, path=os.path.join(self.cwd, "note.txt"))
        await self.conn.session_update(session_id=session_id, update=update_tool_call("py-call-1", status="completed"))
        await self.say(
            session_id,
            f"The terminal said {output.output.strip()!r} (exit {exit_status.exit_code}); note.txt says {note.content.strip()!r}.",
        )
        return PromptResponse(stop_reason="end_turn")


if __name__ == "__main__":
    asyncio.run(run_agent(PyAgent()))
