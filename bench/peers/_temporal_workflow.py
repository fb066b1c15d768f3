"""The workflow of the Temporal peer, alone in its module: Temporal's sandbox re-imports a
workflow's module for every run, so it holds nothing else (bench/peers/_temporal_worker.py)."""

from __future__ import annotations

from temporalio import workflow


@workflow.defn(name="AskWorkflow")
class AskWorkflow:
    """Asks (its input is the question), waits for the ``answer`` Update, returns the answer."""

    def __init__(self) -> None:
        self._answer: str | None = None

    @workflow.run
    async def run(self, question: str) -> str:
        await workflow.wait_condition(lambda: self._answer is not None)
        assert self._answer is not None
        return self._answer

    @workflow.update(name="answer")
    def answer(self, value: str) -> None:
        self._answer = value
