"""Doctor's look at the coding agents' hook log (``<root>/agents/hooks.log``, R73).

A hook that failed or ran past its budget printed nothing and exited 0, so the client never
said so: the log is the only trace. Lines there are a notice (how many, and the last ones), not
damage to the store.
"""

from __future__ import annotations

from pathlib import Path

from tiermem.agents.hook_log import LOG_FILE, log_path, summary
from tiermem.doctor.report import DoctorReport
from tiermem.plural import counted

SHOWN = 3  # the last lines a notice quotes


def check_hook_log(root: Path, report: DoctorReport) -> None:
    """A notice with the number of lines in the hook log and the last ones (a root no coding
    agent's hook wrote to has no log, and nothing is checked)."""
    if not log_path(root).is_file():
        return
    found = summary(root, SHOWN)
    report.checked.append("hook log")
    if found.empty:
        return
    lines = counted(found.count, "coding-agent hook failure or overrun", "coding-agent hook failures or overruns")
    report.notices.append(f"{lines} in agents/{LOG_FILE} (nothing was injected or saved by those hooks);"
                          f" the last: {' | '.join(found.last)}")
