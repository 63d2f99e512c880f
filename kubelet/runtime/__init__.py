"""The per-node CRI-like runtime of kplane (``python -m kubelet.runtime``) and its client.

Containers are simulated — no process runs — but each one keeps its full lifecycle (created,
running, exited, with times, exit codes and reasons), the resources asked for and those applied,
restart attempts, and a usage model (memory and cpu) that can OOM-kill it. The runtime is a
separate process that outlives kubelet restarts, and optionally persists its state so it also
survives its own; the kubelet is its only client.

- ``methods``: the RPC table (CRI names, snake_case names, messages, failpoints) everything uses.
- ``errors``: the exceptions a caller of the runtime can act on.
- ``fake``: ``FakeRuntime``, the whole runtime as a pure asyncio object (hollow nodes run many).
- ``statefile``: atomic, coalesced saves of the state and its recovery at start.
- ``client``: ``RuntimeClient`` (gRPC) and ``InProcessRuntime`` (a ``FakeRuntime``), one interface.
- ``server``: the process — gRPC server, admin HTTP, logs, failpoints, SIGTERM.

See docs/runtime.md.
"""
