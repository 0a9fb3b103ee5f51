"""A progress bar for a spawn being waited on: a widget in a notebook, text in a terminal.

``tqdm`` draws both. Its automatic choice warns when a notebook lacks ``ipywidgets``; this
chooses quietly instead: the widget only when a Jupyter kernel runs us and widgets import.
"""

from __future__ import annotations

import sys
from typing import Any

from labspawner.events import ERROR, FAILED, INFO, LabEvent


def _in_notebook() -> bool:
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except AttributeError:
        return False
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def _bar_class() -> Any:
    from tqdm.std import tqdm as text_tqdm

    if not _in_notebook():
        return text_tqdm
    try:
        import ipywidgets  # noqa: F401
        from tqdm.notebook import tqdm as notebook_tqdm
    except ImportError:
        return text_tqdm
    return notebook_tqdm


class ProgressDisplay:
    """Shows a lab operation's progress (0 to 100) and its latest message."""

    def __init__(self, title: str) -> None:
        self._bar = _bar_class()(total=100, desc=title, unit="%", leave=True)
        self.percent = 0
        self.messages: list[str] = []

    def update(self, event: LabEvent) -> None:
        percent = event.percent
        if percent is not None and percent > self.percent:
            self._bar.update(percent - self.percent)
            self.percent = percent
        elif event.type in (INFO, ERROR, FAILED) and event.data:
            self.messages.append(event.data)
            self._bar.set_postfix_str(event.data[:60], refresh=True)
        elif event.final and self.percent < 100 and event.type != FAILED:
            self._bar.update(100 - self.percent)
            self.percent = 100

    def close(self) -> None:
        self._bar.close()
