"""The Temporal worker of the peer workload: a workflow that waits for an Update carrying the answer.

    python bench/peers/_temporal_worker.py TARGET TASK_QUEUE

Run by bench/peers/peer_temporal.py as a process of its own (its CPU is the system's). Prints
``ready`` once it polls its task queue; stops on SIGTERM or SIGINT.
"""

from __future__ import annotations

import asyncio
import signal
import os
import sys
from pathlib import Path

from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _temporal_workflow import AskWorkflow


async def main(target: str, task_queue: str) -> None:
    client = await Client.connect(target)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    extra = {"workflow_runner": UnsandboxedWorkflowRunner()} if os.environ.get("PEERS_UNSANDBOXED") else {}
    async with Worker(client, task_queue=task_queue, workflows=[AskWorkflow], **extra):
        print("ready", flush=True)
        await stop.wait()


if __name__ == "__main__":
    import uvloop  # like the load generator and Layby's services

    uvloop.run(main(sys.argv[1], sys.argv[2]))
