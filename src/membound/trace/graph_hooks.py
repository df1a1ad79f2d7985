"""Recording the CUDA-graph captures a script makes before the timeline pass.

A CUDA graph's replays run kernels that carry no op of their own in a trace; the ops that
launched them are seen only while the graph is captured. So, while a capture's schedule waits,
membound wraps `torch.cuda.CUDAGraph.capture_begin/capture_end` (what `torch.cuda.graph` and
torch.compile's CUDA graphs call) and records each graph capture, up to `GRAPH_CAPTURES`, with
CPU ops and shapes into its own trace beside the timeline's (`graph_capture_name`). The
analysis gives the replays' kernels those ops (`trace.graph_ops`). The hooks are installed by
the two-pass `trace.capture.Capture` and removed with its other hooks.
"""

from __future__ import annotations

from typing import Any

#: CUDA-graph captures recorded per run (each into `graph_capture_name`): torch.compile's
#: CUDA graphs capture one graph per compiled region and shape (forward and backward)
GRAPH_CAPTURES = 8


def graph_capture_name(rank: int | None, index: int) -> str:
    """The trace of the `index`-th recorded CUDA-graph capture, beside the timeline's."""
    from membound.trace.distributed import trace_name

    return trace_name(rank).replace(".json.gz", f".capture{index}.json.gz")


class GraphHooks:
    """The CUDA-graph capture hooks of one capture (a `trace.capture.Capture`): where it
    writes (`out`, `rank`), which step it is at (`steps_taken`, `wait`, `written`), and where
    the recorded captures and any trouble go (`graph_captures`, `notes`)."""

    def __init__(self, capture: Any) -> None:
        self.capture = capture
        self._prof: Any = None
        self._orig: Any = None

    def install(self) -> None:
        """Wrap `torch.cuda.CUDAGraph.capture_begin/capture_end` (what `torch.cuda.graph` and
        torch.compile's CUDA graphs call): a capture before the timeline pass is recorded
        with CPU ops and shapes into its own trace, so the kernels its replays run can be
        given the ops that launched them (their replays carry no op of their own)."""
        import torch

        cls = getattr(torch.cuda, "CUDAGraph", None)
        if cls is None or "capture_begin" not in cls.__dict__ or "capture_end" not in cls.__dict__:
            return
        begin, end = cls.__dict__["capture_begin"], cls.__dict__["capture_end"]
        hooks = self

        def capture_begin(graph, *args, **kwargs):
            hooks._start()
            try:
                return begin(graph, *args, **kwargs)
            except BaseException:
                hooks._stop(failed=True)
                raise

        def capture_end(graph, *args, **kwargs):
            try:
                return end(graph, *args, **kwargs)
            finally:
                hooks._stop()

        capture_begin.__wrapped__ = begin  # type: ignore[attr-defined]
        capture_end.__wrapped__ = end  # type: ignore[attr-defined]
        self._orig = (cls, begin, end)
        cls.capture_begin, cls.capture_end = capture_begin, capture_end

    def remove(self) -> None:
        if self._orig is None:
            return
        cls, begin, end = self._orig
        self._orig = None
        if getattr(cls.__dict__.get("capture_begin"), "__wrapped__", None) is begin:
            cls.capture_begin = begin
        if getattr(cls.__dict__.get("capture_end"), "__wrapped__", None) is end:
            cls.capture_end = end

    def _start(self) -> None:
        """Start a CPU-ops profiler for the capture about to begin, where one may run: in
        the unprofiled steps before the timeline pass (the capture's schedule is waiting, so
        no kineto session is open), up to `GRAPH_CAPTURES`, and not under the user's own
        profiler. Started before the capture: nothing may synchronize inside one."""
        import torch

        capture = self.capture
        if (
            self._prof is not None
            or len(capture.graph_captures) >= GRAPH_CAPTURES
            or capture.steps_taken >= capture.wait
            or capture.written
            or torch.autograd.profiler._is_profiler_enabled
        ):
            return
        from torch.profiler import ProfilerActivity

        try:
            gpu = [ProfilerActivity.CUDA] if torch.cuda.is_available() else []
            prof = torch.profiler.profile(
                activities=[ProfilerActivity.CPU, *gpu], record_shapes=True
            )
            prof.start()
        except Exception as exc:  # noqa: BLE001 - the user's capture must go on regardless
            capture.notes.append(f"could not record a CUDA-graph capture ({exc})")
            return
        self._prof = prof

    def _stop(self, failed: bool = False) -> None:
        prof, self._prof = self._prof, None
        if prof is None:
            return
        capture = self.capture
        n = len(capture.graph_captures)
        path = capture.out / graph_capture_name(capture.rank, n)
        try:
            prof.stop()
            if not failed:
                prof.export_chrome_trace(str(path))
        except Exception as exc:  # noqa: BLE001 - a lost capture trace must not stop the run
            capture.notes.append(f"could not write CUDA-graph capture {n} ({exc})")
            return
        if not failed:
            capture.graph_captures.append(
                {"trace": path.name, "index": n, "step": capture.steps_taken}
            )
