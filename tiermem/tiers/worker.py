"""A background lane for work the agent must not wait for (LLM summaries of trimmed turns).

Jobs run one at a time, in the order they were submitted, on one daemon thread, so two flushes
of a session reach the journal in order. :meth:`BackgroundWorker.wait_idle` lets tests and
``close()`` wait for the lane to drain on a condition variable — never by sleeping.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable

log = logging.getLogger(__name__)

Job = Callable[[], None]


class BackgroundWorker:
    """A FIFO of jobs run on a daemon thread, started on first use."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._jobs: deque[Job] = deque()
        self._busy = 0  # jobs queued or running
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    def submit(self, job: Job) -> None:
        with self._cond:
            if self._closed:
                raise RuntimeError(f"{self.name} is closed")
            self._jobs.append(job)
            self._busy += 1
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._jobs:
                    if self._closed:
                        return
                    self._cond.wait()
                job = self._jobs.popleft()
            try:
                job()
            except Exception:  # a job handles its own failures; this is the last guard
                log.exception("background job of %s failed", self.name)
            finally:
                with self._cond:
                    self._busy -= 1
                    self._cond.notify_all()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until every submitted job has finished; False if ``timeout`` ran out first
        (or when called from one of the jobs, which cannot wait for itself)."""
        if threading.current_thread() is self._thread:
            return False
        with self._cond:
            return self._cond.wait_for(lambda: self._busy == 0, timeout)

    @property
    def busy(self) -> int:
        with self._cond:
            return self._busy

    def close(self, timeout: float | None = None) -> bool:
        """Finish the queued jobs, then stop the thread; False if ``timeout`` ran out first."""
        idle = self.wait_idle(timeout)
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        return idle
