"""Capture a kineto trace of N training steps, with step boundaries found automatically.

`Capture` drives `torch.profiler.profile` on a wait/warmup/active schedule. On a CUDA machine
it takes two passes, so that what it measures is disturbed as little as it can be:

1. the **timeline pass** (`trace.json.gz`) records GPU activity and CUDA runtime calls only
   (+1-13% on the step on the H200, against +12-34% with CPU ops and shapes:
   `benchmarks/bench_capture.py`); membound's own host marks (`trace.marks`: step boundaries,
   DataLoader waits) are written into it on the trace's clock. The timeline and every idle
   cause come from this trace.
2. the **ops pass** (`trace.ops.json.gz`), right after: a few steps (`ops_steps`) with CPU ops
   and their shapes, used only to join kernels to aten ops and cost them (the roofline),
   never for idle.

Passing `activities` (or having no GPU) takes one pass with those activities, as before.
Steps advance from exactly one source per capture, so a loop is never double-stepped:

1. ``explicit``  - the user calls `membound.step()`; once seen it wins over everything else;
2. ``optimizer`` - a global optimizer step post-hook (only the first optimizer that steps
   counts, so a GAN's two optimizers do not step twice per iteration);
3. ``dataloader`` - DataLoader `__next__` calls, for loops without an optimizer (inference).
   It is only trusted once two batches were fetched with no optimizer step in between.
4. ``zero_grad`` - `nn.Module.zero_grad` calls (only the first module's), for training loops
   that update their parameters by hand and slice their batches themselves, as the
   word-language-model example does (`examples/real/lstm_lm.py`: on the H100, 2026-12-06, no
   step was seen and nothing was recorded). Trusted once two calls came with no optimizer
   step in between, so an optimizer loop never steps on it; once per iteration however many
   micro-batches a step accumulates, where each backward would be one boundary per micro-batch.

A higher-priority source takes over the first time it fires; that firing only claims the role
(the previous source just marked that boundary), and a note records the switch. The hooks are
installed only while a capture is active and removed when it completes or exits.

What survives an abrupt end: every step boundary is appended to `capture.steps.jsonl`
(`trace.step_marks`) as it happens (one line, flushed), so even a SIGKILL leaves the steps a
run reached; a script that calls `os._exit` during the capture first has what was recorded
written (trace and meta: the hook is the capture's, active only in its own process and thread);
a run that ends inside a recorded step names that step in the meta (`partial_step`,
`trace.capture_meta`), and the complete ones (`recorded_steps`), so no partial step is counted.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
import weakref
from pathlib import Path
from typing import Any

from membound import _profiling
from membound.defaults import (
    API_RECORDS,
    CAPTURE_OP_STEPS,
    CAPTURE_STEPS,
    CAPTURE_WAIT,
    CAPTURE_WARMUP,
    CUPTI_BUFFERS,
    SYNC_MODES,
)
from membound.trace.capture_meta import build_meta, notes_from_meta, shortfall_note
from membound.trace.graph_hooks import GraphHooks, graph_capture_name
from membound.trace.marks import HostMarks, inject
from membound.trace.step_clock import StepClock, gpu_event_recorder
from membound.trace.step_marks import StepMarks

TRACE_NAME = "trace.json.gz"
META_NAME = "capture.json"

# source -> priority; higher wins. A dict rather than an if-chain so the rule is one line.
_PRIORITY = {"zero_grad": -1, "dataloader": 0, "optimizer": 1, "explicit": 2}

_ACTIVE: Capture | None = None


class CaptureDone(BaseException):
    """Raised from a step hook to end the script once the capture is complete.

    A BaseException so that a script's own `except Exception` cannot swallow it.
    """


class Capture:
    """One capture: the profiler, its schedule, the step source, and the written trace."""

    def __init__(
        self,
        steps: int = CAPTURE_STEPS,
        wait: int = CAPTURE_WAIT,
        warmup: int = CAPTURE_WARMUP,
        out: str | os.PathLike | None = None,
        record_shapes: bool = True,
        activities: list | None = None,
        stop_after_capture: bool = False,
        auto_steps: bool = True,
        ops_steps: int = CAPTURE_OP_STEPS,
        listener: Any = None,
        api_records: str = API_RECORDS[0],
        cupti_buffers: str = CUPTI_BUFFERS[0],
        sleeping_syncs: bool | str = SYNC_MODES[0],
    ) -> None:
        from membound.errors import BadInput

        if steps < 1 or wait < 0 or warmup < 0:
            raise BadInput(
                f"cannot capture steps={steps}, wait={wait}, warmup={warmup}: "
                "steps must be at least 1 and wait/warmup at least 0."
            )
        if api_records not in API_RECORDS:
            raise BadInput(
                f"cannot record CUDA API calls {api_records!r}: give one of "
                f"{', '.join(API_RECORDS)}."
            )
        if cupti_buffers not in CUPTI_BUFFERS:
            raise BadInput(
                f"cannot keep CUPTI's records in {cupti_buffers!r} buffers: give one of "
                f"{', '.join(CUPTI_BUFFERS)}."
            )
        #: "per-thread": CUPTI's per-thread activity buffers, asked of kineto on entry
        #: (`trace.kineto_config`); what was done is `kineto_config`
        self.cupti_buffers = cupti_buffers
        self.kineto_config: dict[str, Any] | None = None
        #: make the run's CUDA syncs sleep (`trace.sync_mode`): "sleep" (True) from entry,
        #: "sleep-profiled" (the default, `defaults.SYNC_MODES`; `membound.profile` too) in
        #: `SLEPT_STEPS` unprofiled steps added to the wait and in the passes, "spin" (False)
        #: never; what was done ("ok", or why not) is `sleeping_syncs_state`
        #: (None: not asked for), in which phases `slept_phases`
        from membound.trace import sync_mode

        try:
            self.sync_mode = sync_mode.mode_of(sleeping_syncs)
        except ValueError as exc:
            raise BadInput(f"cannot run the syncs as asked: {exc}.") from None
        self.sleeping_syncs_state: str | None = None
        self.slept_phases: tuple[str, ...] = ()
        self._live_syncs: Any = None  # sync_mode.LiveSwitch while the syncs sleep
        #: sleep-profiled on CUDA: the boundary where the syncs start sleeping (set on entry)
        self._sleep_at: int | None = None
        slept = 0
        if self.sync_mode == "sleep-profiled":
            # the default: it never changes the steps the report gives as the loop's. Where it
            # cannot switch, the syncs spin throughout and the meta says why
            if not _has_cuda():
                self.sync_mode, self.sleeping_syncs_state = "spin", "no CUDA device"
            elif int(wait) == 0:  # no unprofiled step before the capture to time it in
                self.sync_mode = "spin"
                self.sleeping_syncs_state = (
                    "not switched: --wait 0 leaves no unprofiled step before the capture"
                )
            else:  # the host work's own steps, added at the end of the wait
                slept = sync_mode.SLEPT_STEPS
                wait = int(wait) + slept
        self.steps, self.wait, self.warmup = int(steps), int(wait), int(warmup)
        #: which CUDA API records the timeline pass keeps: "all" (as the profiler makes them)
        #: or "launches" (those the timeline reads: `trace.cupti_api`)
        self.api_records = api_records
        self.api_filter: dict[str, Any] | None = None  # what `cupti_api` did, once it ran
        # Absolute now: the script may chdir before the trace is exported.
        self.out = Path(
            os.path.abspath(out if out is not None else tempfile.mkdtemp(prefix="membound-"))
        )
        # [distributed] under torchrun every rank writes its own trace.rank{R}.json.gz
        from membound.trace.distributed import (
            meta_name,
            ops_name,
            rank_info,
            steps_name,
            trace_name,
        )

        info = rank_info()
        self.rank = info.rank if info.distributed else None
        self.trace_path = self.out / trace_name(self.rank)
        self.ops_path = self.out / ops_name(self.rank)
        self.meta_path = self.out / meta_name(self.rank)
        self.steps_path = self.out / steps_name(self.rank)
        self.step_marks = StepMarks(self.steps_path)
        self._pid = os.getpid()
        self._real_exit: Any = None
        self.ended: str | None = None  # how the run ended, when not by itself ("crashed")
        self.exit_code: int | None = None  # the code the script gave os._exit, if it did
        self.ops_steps = max(int(ops_steps), 0)
        self.two_pass = False  # decided on entry: CUDA, and no activities given
        self.marks = HostMarks()
        self._marking = False  # inside the timeline pass's recorded steps
        self._ops_prof: Any = None
        self.ops_written = False
        self.kernel_args: dict[str, list[str]] = {}  # [inductor] kernel -> launch parameters
        self.record_shapes = record_shapes
        self.activities = activities
        self.stop_after_capture = stop_after_capture
        self.auto_steps = auto_steps
        self.source: str | None = None  # which step source drives the profiler
        self.steps_taken = 0  # boundaries passed to the profiler
        #: samples the loop's DataLoader batches held while the steps were recorded (the
        #: leading dim of each batch's first tensor), for per-sample throughput in compare
        self._samples = 0
        self.notes: list[str] = []
        self.complete = False  # the schedule finished: all `steps` recorded
        self.written = False  # a trace file was exported
        self._prof: Any = None
        self._lead_optimizer: weakref.ref | None = None
        self._pending_batch = False  # a DataLoader batch was fetched since the last opt step
        self._hook_handle: Any = None
        self._orig_next: Any = None
        self._orig_zero_grad: Any = None  # nn.Module.zero_grad, while it is wrapped
        self._lead_module: weakref.ref | None = None  # the module whose zero_grad counts
        self._pending_zero = False  # a zero_grad came since the last optimizer step
        # unprofiled steps timed after the recorded ones (none when the script is stopped)
        self.clock = StepClock(
            self.wait,
            self.warmup,
            self.steps,
            0 if stop_after_capture else self.steps,
            slept=slept,
        )
        self._query: Any = None
        # called as listener(event, capture) on "recording" (the recorded steps begin) and
        # "complete" (every pass written): `membound diagnose` says so, and starts the analysis
        self.listener = listener
        self._thread: int | None = None  # the loop's thread: its steps, its DataLoader waits
        self._after_left = 0
        self.cupti_teardown: str | None = None
        # [graphs] CUDA-graph captures recorded before the timeline pass (GRAPH_CAPTURES)
        self.graph_captures: list[dict[str, Any]] = []
        self.graph_hooks = GraphHooks(self)

    # ---- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> Capture:
        global _ACTIVE
        from membound.errors import BadInput

        if _ACTIVE is not None:
            raise BadInput(
                "a membound capture is already active; finish it before starting another."
            )
        import torch
        from torch.profiler import ProfilerActivity, schedule

        if self.sync_mode == "sleep":  # before anything makes a CUDA context
            from membound.trace import sync_mode

            self.sleeping_syncs_state = sync_mode.sleep_syncs(torch)
            if self.sleeping_syncs_state == "ok":
                self.slept_phases = sync_mode.SLEEPS_IN["sleep"]
        elif self.sync_mode == "sleep-profiled":  # on CUDA, with a wait (`__init__`)
            self.sleeping_syncs_state = "not switched: the run ended before the profiled steps"
            self._sleep_at = self.wait - self.clock.slept
        activities = self.activities
        shapes = self.record_shapes
        if activities is None:
            if torch.cuda.is_available():
                # the timeline pass: GPU activity and runtime calls only; the ops pass follows
                self.two_pass = self.ops_steps > 0
                activities = [ProfilerActivity.CUDA]
                if not self.two_pass:
                    activities.insert(0, ProfilerActivity.CPU)
                shapes = shapes and not self.two_pass
                self._query = torch.cuda.current_stream().query
                self._ask_kineto()  # before the profiler's trace starts
                self.clock.record = gpu_event_recorder(torch)
                self.cupti_teardown = os.environ.get(CUPTI_TEARDOWN_ENV)
            else:
                activities = [ProfilerActivity.CPU]
        self.clock.extra = 1 + self.ops_steps if self.two_pass else 0
        self.out.mkdir(parents=True, exist_ok=True)
        stale_captures = self.out.glob(graph_capture_name(self.rank, 0).replace("0.", "*."))
        for stale in (self.trace_path, self.ops_path, *stale_captures):
            if stale.exists():  # never report an earlier run's trace
                stale.unlink()
        self._prof = torch.profiler.profile(
            activities=activities,
            schedule=_schedule(schedule, self.wait, self.warmup, self.steps),
            on_trace_ready=self._on_trace_ready,
            record_shapes=shapes,
        )
        _ACTIVE = self
        self._thread = threading.get_ident()
        self._install_exit_hook()
        if self.two_pass:
            self.graph_hooks.install()
        if self.auto_steps:
            self._install_hooks()
        note = self.step_marks.open(
            pid=self._pid, wait=self.wait, warmup=self.warmup, steps=self.steps
        )
        if note is not None:
            self.notes.append(note)
        # membound's own code stays on its cheapest path while only GPU activity is traced
        _profiling.timeline_pass = self.two_pass
        _quiet_cycle_warning()
        self._prof.start()
        self._filter_api()
        self.clock.start()
        self.step_marks.mark(0, self.clock.times[-1])
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close()

    def close(self, ended: str | None = None) -> None:
        """Stop profiling (exporting whatever was recorded), remove hooks; idempotent.

        `ended`: how the run ended when it did not finish by itself ("crashed", "was
        interrupted (Ctrl-C)"), for the notes and the meta."""
        if ended is not None and self.ended is None:
            self.ended = ended
        self._stop(keep_optimizer_hook=False)
        self.step_marks.close()

    def _stop(self, keep_optimizer_hook: bool) -> None:
        was_timing = self._after_left > 0
        self._release(keep_optimizer_hook)
        prof, self._prof = self._prof, None
        ops, self._ops_prof = self._ops_prof, None
        if prof is None and ops is None:
            if was_timing:
                self.clock.settle()
                self._write_meta()  # the steps timed after the capture, up to now
            return
        try:
            for p in (prof, ops):
                if p is not None:
                    p.stop()  # inside the recording window this exports a partial trace
        finally:
            if not self.complete and self.steps_captured < self.steps:
                self.notes.append(shortfall_note(self))
            self.clock.settle()
            self._write_meta()
            self.step_marks.end(partial_step=self.partial_step, ended=self.ended)

    def _tell(self, event: str) -> None:
        self.step_marks.flush()  # a phase changes: its marks are on disk before anyone reads
        if self.listener is not None:
            try:
                self.listener(event, self)
            except Exception as exc:  # a listener must never break the user's loop
                self.notes.append(f"capture listener failed on {event!r} ({exc})")

    def _release(self, keep_optimizer_hook: bool) -> None:
        """Remove the hooks; the capture is no longer the active one."""
        global _ACTIVE
        _profiling.timeline_pass = False
        self._after_left = 0
        self._spin_again()
        self._remove_hooks(keep_optimizer_hook)
        if _ACTIVE is self:
            _ACTIVE = None

    # ---- step handling ---------------------------------------------------------------------

    def step(self, source: str = "explicit") -> None:
        """Advance the profiler by one step if `source` is (or now becomes) the step source;
        after the recorded steps, only time the next ones."""
        if self.complete:
            if self._after_left > 0 and source == self.source:
                self.clock.mark()
                self._after_left -= 1
                self.step_marks.mark(len(self.clock.times) - 1, self.clock.times[-1])
                if self._after_left == 0:  # timed enough: nothing of membound's runs any more
                    self._release(keep_optimizer_hook=True)
                    self.clock.settle()
                    self._write_meta()
                    self._tell("timed")
            return
        if self._prof is None and self._ops_prof is None:
            return
        if self.source != source:
            if self.source is not None and _PRIORITY[source] <= _PRIORITY[self.source]:
                return
            previous, self.source = self.source, source
            if previous is not None:
                # The lower source just marked this boundary; claiming must not step again.
                self.notes.append(
                    f"step boundaries switched from {previous} to {source} after "
                    f"{self.steps_taken} step(s)"
                    + ("; the first recorded step may be partial." if self._recording() else ".")
                )
                return
        self.steps_taken += 1
        t = self.clock.mark()  # before the profiler's own work at this boundary
        self.step_marks.mark(self.steps_taken, self.clock.times[-1])
        if self.steps_taken == self._sleep_at:
            self._sleep_syncs_now()
        if self._ops_prof is not None:
            self._ops_prof.step()
        else:
            recorded = self.steps_taken - self.wait - self.warmup
            if recorded == 0:
                self._tell("recording")
            self._marking = self.two_pass and 0 <= recorded < self.steps
            if self.two_pass and 0 <= recorded <= self.steps:
                self.marks.boundary(self.steps_taken, t, self._query)
            if self.steps_taken < self.wait:
                # an unprofiled step: the schedule waits, and torch's step() would only count
                # it, at a host cost the step timer would charge to the loop (its step record
                # and schedule transit: ~13 us a step on a CI core); the count is kept in step
                # (`step_num`), so the step that ends the wait transits and records as before
                self._prof.step_num = self.steps_taken
            else:
                self._prof.step()
                self._filter_api()
            if self.written and self.two_pass and not self.complete:
                self._start_ops_pass()
        if self.complete:
            self._finish_early()

    def _sleep_syncs_now(self) -> None:
        """`sleep-profiled`: the spinning unprofiled steps are done; the syncs sleep from here
        (the "slept" steps, then the passes) until the passes end (`_spin_again`)."""
        from membound.trace import sync_mode

        self._live_syncs = sync_mode.LiveSwitch()
        self.sleeping_syncs_state = self._live_syncs.sleep()
        if self.sleeping_syncs_state == "ok":
            self.slept_phases = sync_mode.SLEEPS_IN["sleep-profiled"]
        else:
            self.notes.append(f"the syncs spun throughout ({self.sleeping_syncs_state})")

    def _spin_again(self) -> None:
        """Set back the syncs `_sleep_syncs_now` made sleep: the passes are over (or the run
        ended), and the rest runs as the user runs it."""
        if self._live_syncs is not None and self._live_syncs.saved is not None:
            back = self._live_syncs.restore()
            if back != "ok":
                self.notes.append(f"the syncs sleep to the end of the run ({back})")

    def _ask_kineto(self) -> None:
        """With `cupti_buffers="per-thread"`, ask kineto for CUPTI's per-thread activity
        buffers (`trace.kineto_config`): it applies where no trace ran in this process yet."""
        if self.cupti_buffers != "per-thread" or self.kineto_config is not None:
            return
        from membound.trace import kineto_config

        self.kineto_config = kineto_config.request(
            {kineto_config.PER_THREAD_BUFFERS: "true"}, self.out
        )
        if self.kineto_config.get("file") is None:
            self.notes.append(
                "CUPTI's per-thread buffers were not asked for: writing kineto's config "
                f"failed ({self.kineto_config.get('why')})"
            )

    def _filter_api(self) -> None:
        """With `api_records="launches"`, once the timeline pass's profiler has turned CUPTI's
        API records on (its schedule left the wait), switch off those the timeline does not
        read (`trace.cupti_api`); once per capture, and never a failed capture."""
        if self.api_records == "all" or not self.two_pass or self.api_filter is not None:
            return
        from torch.profiler import ProfilerAction

        if self._prof is None or getattr(self._prof, "current_action", None) in (
            None,
            ProfilerAction.NONE,
        ):
            return
        from membound.trace import cupti_api

        try:
            self.api_filter = cupti_api.keep_launches()
        except Exception as exc:  # noqa: BLE001 - the capture goes on with every record
            self.api_filter = {"applied": False, "why": f"{type(exc).__name__}: {exc}"}
        if not self.api_filter.get("applied"):
            self.notes.append(
                "every CUDA API call was recorded: switching the unread ones off failed "
                f"({self.api_filter.get('why')})"
            )

    def _recording(self) -> bool:
        return self.steps_taken >= self.wait + self.warmup

    @property
    def samples_per_step(self) -> float | None:
        """DataLoader samples per recorded step; None where no loader batch was seen, or none
        with a tensor whose leading dim is the batch."""
        return (
            self._samples / self.steps_captured if self._samples and self.steps_captured else None
        )

    @property
    def steps_captured(self) -> int:
        """Complete steps inside the recorded window."""
        return max(0, min(self.steps, self.steps_taken - self.wait - self.warmup))

    @property
    def timing_after(self) -> bool:
        """Still timing unprofiled steps after the capture (the "timed" event ends it)."""
        return self._after_left > 0

    @property
    def recorded_steps(self) -> list[int]:
        """The complete recorded steps, by their trace marker number (`ProfilerStep#N`)."""
        first = self.wait + self.warmup
        return list(range(first, first + self.steps_captured)) if self.written else []

    @property
    def partial_step(self) -> int | None:
        """The recorded step the run ended inside (`ProfilerStep#N`: its marker is in the
        trace, cut short), None when the recording was complete or never began."""
        if self.complete or not self.written or self.source is None:
            return None
        n = self.steps_taken
        first = self.wait + self.warmup
        return n if first <= n < first + self.steps else None

    def _on_trace_ready(self, prof: Any) -> None:
        # Written first, before any analysis can fail: the trace is the product.
        prof.export_chrome_trace(str(self.trace_path))
        self.written = True
        self._marking = False
        if self.two_pass:
            try:
                self.host_marks = inject(self.trace_path, self.marks, None)
            except (OSError, ValueError) as exc:  # the trace stays; it lacks the marks
                self.host_marks = None
                self.notes.append(f"could not write membound's host marks into the trace ({exc})")
            if self.host_marks is None:
                self.notes.append(
                    "the timeline trace holds no anchor call: its steps could not be marked"
                )
        done = self.steps_taken >= self.wait + self.warmup + self.steps
        self.complete = done and not self.two_pass

    def _start_ops_pass(self) -> None:
        """The timeline pass is written: record `ops_steps` steps with CPU ops and shapes."""
        import torch
        from torch.profiler import ProfilerActivity, schedule

        prof, self._prof = self._prof, None
        prof.stop()
        _profiling.timeline_pass = False  # the ops pass records CPU ops: let them show
        self._ops_prof = torch.profiler.profile(
            activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
            schedule=_schedule(schedule, 0, 1, self.ops_steps),
            on_trace_ready=self._on_ops_ready,
            record_shapes=self.record_shapes,
        )
        self._ops_prof.start()

    def _on_ops_ready(self, prof: Any) -> None:
        prof.export_chrome_trace(str(self.ops_path))
        self.ops_written = True
        # [inductor] what each compiled kernel's arguments are (read, written): its source
        # names them, the trace does not (`trace.kernel_args`)
        from membound.trace.kernel_args import inductor_kernel_args

        try:
            self.kernel_args = inductor_kernel_args()
        except Exception:  # noqa: BLE001 - never lose the capture over a side table
            self.kernel_args = {}
        self.complete = True

    def _finish_early(self) -> None:
        """The schedule is done: drop the profiler now so the rest runs at full speed, and
        time up to `clock.after` more steps (unprofiled) before dropping the hooks too.

        The optimizer hook may be what called us, and torch iterates its hook dict while calling
        them, so that one handle stays registered (inert) until the context exits.
        """
        for name in ("_prof", "_ops_prof"):
            prof = getattr(self, name)
            setattr(self, name, None)
            if prof is not None:
                prof.stop()
        _profiling.timeline_pass = False
        self._spin_again()  # the steps after the capture run as the user runs them
        self.clock.settle()  # the GPU's clock of the steps so far, read before the next starts
        self.clock.restart()
        self._after_left = self.clock.after
        if self._after_left == 0:
            self._release(keep_optimizer_hook=True)
        self._write_meta()
        self._tell("complete")
        if self.stop_after_capture:
            raise CaptureDone()

    # ---- what survives an abrupt end ----------------------------------------------------

    def _on_os_exit(self, code: Any) -> None:
        """The script called `os._exit(code)`: nothing else will run, so write what was
        recorded now (in the capture's own process and thread), or say that it cannot be."""
        if os.getpid() != self._pid:
            return  # a forked child (a DataLoader worker) ending: not the script
        self.exit_code = code if isinstance(code, int) else None
        if threading.get_ident() != self._thread:
            self.step_marks.flush()  # what the message below points to
            self._tell("os_exit_unwritten")
            return
        try:
            self.close(ended=f"called os._exit({code})")
        except BaseException as exc:  # noqa: BLE001 - exiting anyway; say what was lost
            self.notes.append(f"could not write the capture on os._exit ({exc})")
        self._tell("os_exit")

    # ---- hooks -----------------------------------------------------------------------------

    def _install_exit_hook(self) -> None:
        """`os._exit` runs no `finally` and no atexit: while capturing, it first writes what
        was recorded (`_on_os_exit`), then exits with the script's code."""
        real_exit, capture = os._exit, self

        def _exit(code):
            try:
                capture._on_os_exit(code)
            finally:
                real_exit(code)

        _exit.__wrapped__ = real_exit  # type: ignore[attr-defined]
        self._real_exit, os._exit = real_exit, _exit

    def _install_hooks(self) -> None:
        from torch.optim.optimizer import register_optimizer_step_post_hook
        from torch.utils.data.dataloader import _BaseDataLoaderIter

        self._hook_handle = register_optimizer_step_post_hook(self._on_optimizer_step)
        self._orig_next = _BaseDataLoaderIter.__dict__["__next__"]
        orig, capture = self._orig_next, self

        def __next__(it):  # noqa: N807 - replaces the dunder on the class
            capture._on_batch()
            if threading.get_ident() != capture._thread:
                return orig(it)
            if not capture._marking:
                batch = orig(it)
                capture._count_samples(batch)
                return batch
            t0 = time.perf_counter_ns()
            try:
                batch = orig(it)
            finally:  # the host waited this long for the batch (a DataLoader span, on the GPU-only trace)
                capture.marks.loader.append((t0, time.perf_counter_ns(), type(it).__name__))
            capture._count_samples(batch)
            return batch

        __next__.__wrapped__ = orig  # type: ignore[attr-defined]
        _BaseDataLoaderIter.__next__ = __next__

        import torch.nn

        self._orig_zero_grad = orig_zero_grad = torch.nn.Module.__dict__["zero_grad"]

        def zero_grad(module, *args, **kwargs):
            capture._on_zero_grad(module)  # before: the iteration starts here
            return orig_zero_grad(module, *args, **kwargs)

        zero_grad.__wrapped__ = orig_zero_grad  # type: ignore[attr-defined]
        torch.nn.Module.zero_grad = zero_grad

    def _count_samples(self, batch: Any) -> None:
        """Add a recorded step's batch to the sample count (nothing outside the record)."""
        if self.written or not self._recording() or self.steps_captured >= self.steps:
            return
        n = batch_size(batch)
        if n:
            self._samples += n

    def _remove_hooks(self, keep_optimizer_hook: bool = False) -> None:
        self.graph_hooks.remove()
        if self._real_exit is not None:
            if getattr(os._exit, "__wrapped__", None) is self._real_exit:
                os._exit = self._real_exit
            self._real_exit = None
        if self._hook_handle is not None and not keep_optimizer_hook:
            self._hook_handle.remove()
            self._hook_handle = None
        if self._orig_zero_grad is not None and (
            not keep_optimizer_hook or self.source != "zero_grad"
        ):
            import torch.nn

            if getattr(torch.nn.Module.zero_grad, "__wrapped__", None) is self._orig_zero_grad:
                torch.nn.Module.zero_grad = self._orig_zero_grad
            self._orig_zero_grad = None
        if self._orig_next is not None:
            from torch.utils.data.dataloader import _BaseDataLoaderIter

            _BaseDataLoaderIter.__next__ = self._orig_next
            self._orig_next = None

    def _on_optimizer_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if self._prof is None and self._ops_prof is None and self._after_left == 0:
            return
        self._pending_batch = self._pending_zero = False
        lead = self._lead_optimizer() if self._lead_optimizer is not None else None
        if lead is None:
            self._lead_optimizer = weakref.ref(optimizer)
        elif lead is not optimizer:
            return  # one boundary per iteration, however many optimizers step
        self.step("optimizer")

    def _on_batch(self) -> None:
        # A loader iterated on another thread (a prefetcher's producer) marks no step of
        # the loop's; trust DataLoader boundaries only after two fetches without an optimizer
        # step in between: a training loop's first optimizer step comes before its second batch.
        if threading.get_ident() != self._thread:
            return
        if self.source is None and not self._pending_batch:
            self._pending_batch = True
            return
        self.step("dataloader")

    def _on_zero_grad(self, module: Any) -> None:
        # The loop's thread, the first module that zeroes its gradients (an encoder's and a
        # decoder's zero_grad are one iteration), trusted from the second call with no
        # optimizer step in between (the optimizer's hook marks such a loop).
        if threading.get_ident() != self._thread:
            return
        if self._prof is None and self._ops_prof is None and self._after_left == 0:
            return
        lead = self._lead_module() if self._lead_module is not None else None
        if lead is None:
            self._lead_module = weakref.ref(module)
        elif lead is not module:
            return
        if self.source is None and not self._pending_zero:
            self._pending_zero = True
            return
        self.step("zero_grad")

    # ---- results ---------------------------------------------------------------------------

    def _write_meta(self) -> None:
        self.meta_path.write_text(json.dumps(self._meta(), indent=1) + "\n")

    def _meta(self) -> dict[str, Any]:
        return build_meta(self, list(sys.argv))

    def capture_notes(self) -> list[str]:
        """Sentences about the capture itself, for the report's notes."""
        return notes_from_meta(self._meta())


def _has_cuda() -> bool:
    """Whether torch sees a CUDA device (no context is made); `--syncs sleep-profiled` adds
    its steps to the wait only there."""
    import torch

    return bool(torch.cuda.is_available())


def batch_size(batch: Any, depth: int = 3) -> int | None:
    """The leading dim of the first tensor in a batch (a tensor, or a tuple/list/dict of
    them, a few levels deep), None when there is none."""
    shape = getattr(batch, "shape", None)
    if shape is not None and hasattr(batch, "dtype"):
        return int(shape[0]) if len(shape) else None
    if depth <= 0:
        return None
    items = batch.values() if isinstance(batch, dict) else batch
    if isinstance(items, (tuple, list)) or isinstance(batch, dict):
        for item in list(items)[:8]:
            n = batch_size(item, depth - 1)
            if n:
                return n
    return None


#: kineto's switch for finalizing CUPTI when a profiler stops. membound leaves it as the
#: user has it and records it in the meta (`cupti_teardown`). Tried on the H200 (2026-12-03,
#: HF Trainer Llama, one diagnose per setting and call): the steps after the capture against
#: those before it ran +25% with TEARDOWN_CUPTI=1 and +1% with "0" in one call, -8% and +10%
#: in the next; the run-to-run spread of the host (+-10%) decides, not the switch
#: (benchmarks/results/cupti_teardown_steps_2026-12-03*.txt). Again on an H100 (2026-12-08,
#: `benchmarks/probe_cupti_teardown.py`, a fresh diagnose each): after/before 1.53 and 0.88
#: unset against 0.93 and 1.04 with "1" on the LSTM LM, 1.07 against 1.09 and 0.92 on the
#: DDPM U-Net (benchmarks/results/truth_2026-12-08_h100.txt): no effect above the spread.
CUPTI_TEARDOWN_ENV = "TEARDOWN_CUPTI"


def _quiet_cycle_warning() -> None:
    """Keep torch's cycle warning out of the user's output: membound's two passes are one
    cycle each and it reads every event of each (on an H100 with torch 2.11 the warning
    printed between the script's own lines under `membound diagnose`, 2026-12-07). The filter
    matches that one message only; adding it again replaces it."""
    import warnings

    warnings.filterwarnings("ignore", message=_profiling.CYCLE_WARNING, category=UserWarning)


def _schedule(schedule, wait: int, warmup: int, active: int):
    """torch's schedule, without its warning about no warm-up (the user asked for it, and the
    capture says what it recorded)."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*warmup.*", category=UserWarning)
        return schedule(wait=wait, warmup=warmup, active=active, repeat=1)


def step() -> None:
    """Mark the end of one training step for the active capture; a no-op when none is active."""
    if _ACTIVE is not None:
        _ACTIVE.step("explicit")


def active() -> Capture | None:
    """The capture in progress, if any."""
    return _ACTIVE
