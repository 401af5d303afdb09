"""`nsdiag mcp`: nsdiag's commands as tools of a Model Context Protocol server, for coding agents
(the optional extra `nsdiag[mcp]`: the official MCP Python SDK). A front end beside cli/, whose
entry points it calls so that each tool answers what its command prints.

server.py     the server: tools with their input schemas, resources, stdio
calls.py      explain, diff, report and rules through the CLI's entry points (no SDK here)
profiling.py  profile: `nsdiag profile` in a child process, progress, cancellation
summary.py    the short text beside each JSON document
docs.py       the resources: docs/diagnosis.md's cause table, each rule's documentation
errors.py     every failure as the CLI's one line
"""
