"""Progress bars of ``progress=True``: one per phase (the gradient pass, the plan, each
stage-3 or training epoch), with the rate and the time left, on ``sys.stderr`` (tqdm, which
also draws them in notebooks)."""

from __future__ import annotations

import sys
from typing import Any, Dict, Iterable, Iterator, Optional, TypeVar

from tqdm.auto import tqdm

T = TypeVar("T")


def bar(total: Optional[int], desc: str, unit: str = "step") -> "tqdm[Any]":
    """A bar of ``total`` steps named ``desc`` (no total: elapsed time and rate only)."""
    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True, leave=True)


def track(items: Iterable[T], total: Optional[int], desc: str, unit: str = "batch", on: bool = True) -> Iterator[T]:
    """``items``, with a bar over them when ``on``."""
    if not on:
        yield from items
        return
    with bar(total, desc, unit) as b:
        for item in items:
            # Counted as it is handed out: a caller that stops early still sees it done.
            b.update(1)
            yield item


def write(line: str) -> None:
    """``line`` on stderr, above any open bar."""
    tqdm.write(line, file=sys.stderr)


class NativeBars:
    """Draws the Rust commands' progress events: the native side calls this object with
    ``(event, info)`` for every step (``"step"``: ``epoch``, ``step``, ``steps``, ``loss``),
    every finished epoch (``"epoch"``: ``epoch``, ``line``) and every judged search candidate
    (``"candidate"``: ``line``). Before the first step of a compression, the time of stages
    1-2 (gradient pass and plan, which report no steps of their own) shows as an open bar."""

    def __init__(self, first_phase: Optional[str] = None) -> None:
        self._bar: Optional["tqdm[Any]"] = None
        self._epoch = -1
        if first_phase is not None:
            self._bar = bar(None, first_phase, unit="s")

    def __call__(self, event: str, info: Dict[str, Any]) -> None:
        if event == "step":
            epoch, steps = int(info["epoch"]), int(info["steps"])
            if epoch != self._epoch or self._bar is None:
                self._close()
                self._epoch = epoch
                self._bar = bar(steps, f"epoch {epoch + 1}", unit="step")
            self._bar.set_postfix(loss=f"{float(info['loss']):.4f}", refresh=False)
            self._bar.update(int(info["step"]) - self._bar.n)
        elif event == "epoch":
            self._close()
            tqdm.write(str(info["line"]), file=sys.stderr)
        elif event == "candidate":
            self._close()
            self._epoch = -1
            tqdm.write(str(info["line"]), file=sys.stderr)

    def _close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def close(self) -> None:
        """Closes the open bar (the call returned or failed)."""
        self._close()
