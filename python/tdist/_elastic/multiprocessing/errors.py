"""tdist.elastic.multiprocessing.errors, at torch's path: ``record`` (tdist.elastic.record),
``ChildFailedError`` and ``ProcessFailure``, with torch's fields and message layout, so that code
that raises or catches them runs unchanged."""
import json
import os
import signal
import socket
import time
from dataclasses import dataclass, field
from datetime import datetime

from tdist.elastic import record  # noqa: F401

__all__ = ["ProcessFailure", "ChildFailedError", "record"]

_NOT_AVAILABLE = "<N/A>"


@dataclass
class ProcessFailure:
    """A failed worker: its local rank, pid, exit code (negative: the signal) and error file. The
    message and timestamp come from the error file where it exists (the JSON that record and
    tdist's excepthook write), else from the exit code."""

    local_rank: int
    pid: int
    exitcode: int
    error_file: str
    error_file_data: dict = field(init=False)
    message: object = field(init=False)
    timestamp: int = field(init=False)

    def __post_init__(self):
        self.error_file_data = {"message": "<NONE>"}
        self.message = ""
        self.timestamp = int(time.time())
        if self.error_file and os.path.isfile(self.error_file):
            with open(self.error_file) as f:
                self.error_file_data = json.load(f)
            message = self.error_file_data["message"]
            self.message = message
            if isinstance(message, str):
                self.timestamp = int(self.error_file_data.get("timestamp", 0))
            else:
                self.timestamp = int(message["extraInfo"]["timestamp"])
        else:
            self.error_file = _NOT_AVAILABLE
        if not self.message:
            if self.exitcode < 0:
                self.message = f"Signal {-self.exitcode} ({self.signal_name()}) received by PID {self.pid}"
            else:
                self.message = "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"

    def signal_name(self) -> str:
        if self.exitcode < 0:
            try:
                return signal.Signals(-self.exitcode).name
            except ValueError:
                return _NOT_AVAILABLE
        return _NOT_AVAILABLE

    def timestamp_isoformat(self):
        return datetime.fromtimestamp(self.timestamp).isoformat(sep="_")


class ChildFailedError(Exception):
    """Raised by a parent whose workers failed: ``failures`` maps each failed global rank to its
    ProcessFailure; the message lists them, the first observed one as the root cause (torch's
    layout). Under ``@record`` the root failure's error file becomes the parent's."""

    def __init__(self, name: str, failures: dict):
        if not failures:
            raise ValueError("ChildFailedError: failures must name at least one failed rank")
        self.name = name
        self.failures = failures
        super().__init__(self.format_msg())

    def get_first_failure(self):
        rank = min(self.failures, key=lambda r: self.failures[r].timestamp)
        return rank, self.failures[rank]

    def format_msg(self, boarder_delim="=", section_delim="-"):
        title = f"{self.name} FAILED"
        root_rank, _ = self.get_first_failure()
        root, others, width = "", [], len(title)
        for idx, (rank, failure) in enumerate(self.failures.items()):
            text = self._format_failure(idx, rank, failure)
            width = max(width, *(len(line) for line in text.split("\n")))
            if rank == root_rank:
                root = text
            else:
                others.append(text)
        width = min(width, 60)
        return "\n".join(["", boarder_delim * width, title, section_delim * width, "Failures:",
                          "\n".join(others or ["  <NO_OTHER_FAILURES>"]), section_delim * width,
                          "Root Cause (first observed failure):", root, boarder_delim * width])

    @staticmethod
    def _format_failure(idx, rank, failure):
        message = failure.message
        if isinstance(message, dict):
            message = message.get("extraInfo", {}).get("py_callstack", message.get("message", _NOT_AVAILABLE))
            message = message.replace("\n", "\n  ")
        signal_name = failure.signal_name()
        signal_text = f" ({signal_name})" if signal_name != _NOT_AVAILABLE else ""
        return (f"[{idx}]:\n  time      : {failure.timestamp_isoformat()}\n  host      : {socket.gethostname()}\n"
                f"  rank      : {rank} (local_rank: {failure.local_rank})\n"
                f"  exitcode  : {failure.exitcode} (pid: {failure.pid}){signal_text}\n"
                f"  error_file: {failure.error_file}\n  traceback : {message}")
