"""`trace.cupti_api`: the timeline pass's lighter mode records only the CUDA API calls the
timeline reads; every other runtime and driver function is switched off through CUPTI's
per-function switches, after the profiler turned the kinds on."""

from __future__ import annotations

import ctypes
import gzip
import json
from pathlib import Path

import pytest

from membound.errors import BadInput
from membound.trace import cupti_api
from membound.trace.capture import Capture
from membound.trace.capture_meta import notes_from_meta, timeline_in
from membound.trace.files import open_trace
from membound.trace.kineto_names import _call_of, api_kept, api_name
from membound.trace.model import OTHER_CALL

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

# names as CUPTI gives them (cuptiGetCallbackName), version and stream-mode suffixes included
READ = [
    "cudaLaunchKernel_v7000",
    "cudaLaunchKernel_ptsz_v7000",
    "cudaLaunchKernelExC_v11060",
    "cudaLaunchCooperativeKernel_v9000",
    "cudaGraphLaunch_v10000",
    "cudaMemcpyAsync_v3020",
    "cudaMemcpy_v3020",
    "cudaMemcpy2DAsync_ptsz_v7000",
    "cudaMemsetAsync_v3020",
    "cudaStreamSynchronize_v3020",
    "cudaDeviceSynchronize_v3020",
    "cudaEventSynchronize_v3020",
    "cudaStreamQuery_v3020",  # membound's clock anchor
    "cudaFree_v3020",
    "cudaHostAlloc_v3020",
    "cuLaunchKernel",
    "cuLaunchKernel_ptsz",
    "cuLaunchKernelEx",
    "cuGraphLaunch",
    "cuMemcpyHtoDAsync_v2",
    "cuMemsetD32Async",
    "cuStreamSynchronize_ptsz",
    "cuCtxSynchronize",
]
UNREAD = [
    "cudaGetErrorString_v3020",
    "cudaPeekAtLastError_v3020",
    "cudaGetLastError_v3020",
    "cudaGetDevice_v3020",
    "cudaStreamIsCapturing_v10000",
    "cudaFuncGetAttributes_v3020",
    "cudaFuncSetAttribute_v9000",
    "cudaDeviceGetAttribute_v5000",
    "cudaGetFuncBySymbol_v11000",
    "cudaPointerGetAttributes_v4000",
    "cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags_v7000",
    "cudaEventRecord_v3020",
    "cudaEventQuery_v3020",
    "cuCtxGetCurrent",
    "cuGetProcAddress_v2",
    "cuDevicePrimaryCtxGetState",
    "cuModuleGetFunction",
    "cuFuncGetAttribute",
]


@pytest.mark.parametrize("name", READ)
def test_the_calls_the_timeline_reads_are_kept(name):
    assert api_kept(name)


@pytest.mark.parametrize("name", UNREAD)
def test_the_others_are_switched_off(name):
    assert not api_kept(name)


def test_names_lose_their_suffixes_as_kineto_writes_them():
    assert api_name("cudaLaunchKernel_ptsz_v7000") == "cudaLaunchKernel"
    assert api_name("cuMemcpyHtoDAsync_v2") == "cuMemcpyHtoDAsync"
    assert api_name("cudaStreamSynchronize_ptds_v7000") == "cudaStreamSynchronize"
    assert api_name("cuLaunchKernelEx") == "cuLaunchKernelEx"


@pytest.mark.parametrize(
    "fixture", ["h200_real_dcgan_oos2", "h200_real_t5_seq2seq_oos1", "h200_real_gpt2_compiled_run5"]
)
def test_no_call_the_analysis_classifies_is_switched_off(fixture):
    """Every runtime/driver record of a recorded H200 timeline that the analysis reads
    (launch, graph launch, sync, memcpy) or that launched GPU work is kept; what goes is
    only what it never reads."""
    events = json.load(open_trace(timeline_in(FIXTURES / fixture)))["traceEvents"]
    launched = {
        (e.get("args") or {}).get("correlation")
        for e in events
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
    }
    calls = [e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")]
    names = {e["name"] for e in calls}
    for name in names:
        if _call_of(name) != OTHER_CALL:
            assert api_kept(name), name
    for e in calls:
        if (e.get("args") or {}).get("correlation") in launched:
            assert api_kept(e["name"]), e["name"]
    dropped = [e for e in calls if not api_kept(e["name"])]
    assert dropped  # the filter has something to save on these traces
    assert not {e["name"] for e in dropped} & {"cudaLaunchKernel", "cuLaunchKernel"}


class _Fn:
    """A CUPTI function stand-in: records its calls, returns `rc`."""

    def __init__(self, body):
        self.body, self.calls = body, []

    def __call__(self, *args):
        self.calls.append(args)
        return self.body(*args)


class _FakeCupti:
    def __init__(self, runtime, driver, refuse=()):
        self.names = {cupti_api.RUNTIME_DOMAIN: runtime, cupti_api.DRIVER_DOMAIN: driver}
        self.refuse = set(refuse)

        def name(domain, cbid, ref):
            names = self.names[domain]
            if cbid not in names:
                return 1  # CUPTI_ERROR_INVALID_PARAMETER
            ref._obj.value = names[cbid].encode()
            return 0

        self.cuptiGetCallbackName = _Fn(name)
        self.cuptiActivityEnableRuntimeApi = _Fn(lambda cbid, on: 7 if cbid in self.refuse else 0)
        self.cuptiActivityEnableDriverApi = _Fn(lambda cbid, on: 0)


def test_switches_off_exactly_the_unread_functions():
    runtime = {1: "cudaLaunchKernel_v7000", 2: "cudaGetErrorString_v3020", 3: "cudaMemsetAsync_v3020",
               5: "cudaStreamIsCapturing_v10000", 6: "cudaStreamQuery_v3020"}  # fmt: skip
    driver = {
        1: "cuLaunchKernel",
        2: "cuCtxGetCurrent",
        40: "cuLaunchKernelEx",
        41: "cuGetProcAddress",
    }
    lib = _FakeCupti(runtime, driver)
    got = cupti_api.keep_launches(lib)
    assert got["applied"] and "why" not in got
    assert sorted(c[0] for c in lib.cuptiActivityEnableRuntimeApi.calls) == [2, 5]
    assert all(c[1] == 0 for c in lib.cuptiActivityEnableRuntimeApi.calls)
    assert sorted(c[0] for c in lib.cuptiActivityEnableDriverApi.calls) == [2, 41]
    assert got["runtime_off"] == 2 and got["driver_off"] == 2
    assert got["runtime_kept"] == ["cudaLaunchKernel", "cudaMemsetAsync", "cudaStreamQuery"]
    assert got["driver_kept"] == ["cuLaunchKernel", "cuLaunchKernelEx"]
    assert got["ms"] >= 0


def test_a_keep_rule_of_its_own_decides_what_stays():
    """`keep` replaces the timeline's rule: here launches go too, a sync stays."""
    runtime = {1: "cudaLaunchKernel_v7000", 2: "cudaStreamSynchronize_v3020",
               3: "cudaGetErrorString_v3020"}  # fmt: skip
    lib = _FakeCupti(runtime, {1: "cuLaunchKernel"})
    got = cupti_api.keep_launches(lib, keep=lambda n: "Synchronize" in n)
    assert sorted(c[0] for c in lib.cuptiActivityEnableRuntimeApi.calls) == [1, 3]
    assert [c[0] for c in lib.cuptiActivityEnableDriverApi.calls] == [1]
    assert got["runtime_kept"] == ["cudaStreamSynchronize"] and got["driver_kept"] == []


def test_the_scan_of_callback_ids_stops_after_a_run_of_unnamed_ones():
    runtime = {1: "cudaLaunchKernel_v7000", 3 + cupti_api.MISSES: "cudaGetErrorString_v3020"}
    lib = _FakeCupti(runtime, {1: "cuLaunchKernel"})
    assert cupti_api.callback_names(lib, cupti_api.RUNTIME_DOMAIN) == {1: "cudaLaunchKernel_v7000"}
    near = {1: "cudaLaunchKernel_v7000", cupti_api.MISSES: "cudaGetErrorString_v3020"}
    assert len(cupti_api.callback_names(_FakeCupti(near, {}), cupti_api.RUNTIME_DOMAIN)) == 2


def test_a_refused_switch_is_counted_and_said():
    runtime = {1: "cudaGetErrorString_v3020", 2: "cudaPeekAtLastError_v3020"}
    lib = _FakeCupti(runtime, {1: "cuCtxGetCurrent"}, refuse={2})
    got = cupti_api.keep_launches(lib)
    assert got["applied"] and got["runtime_off"] == 1 and got["runtime_refused"] == 1
    assert "refused to switch 1 runtime" in got["why"] and "-> 7" in got["why"]


def test_a_cupti_without_per_function_switches_is_left_as_it_is():
    lib = _FakeCupti({1: "cudaGetErrorString_v3020"}, {})
    del lib.cuptiActivityEnableDriverApi
    got = cupti_api.keep_launches(lib)
    assert got == {"applied": False,
                   "why": "this CUPTI has no cuptiActivityEnableDriverApi (CUPTI 12.x on)"}  # fmt: skip
    assert not lib.cuptiActivityEnableRuntimeApi.calls


def test_no_named_function_is_not_applied():
    got = cupti_api.keep_launches(_FakeCupti({}, {}))
    assert not got["applied"]
    assert "no runtime API function" in got["why"] and "no driver API function" in got["why"]


def test_finds_the_loaded_libcupti(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text(
        "7f00-7f01 r-xp 0 08:01 1 /usr/lib/libc.so.6\n\n"
        "7f02-7f03 r-xp 0 08:01 2 /opt/nvidia/cuda_cupti/lib/libcupti.so.13\n"
    )
    assert cupti_api.find_libcupti(str(maps)) == "/opt/nvidia/cuda_cupti/lib/libcupti.so.13"
    maps.write_text("7f00-7f01 r-xp 0 08:01 1 /usr/lib/libc.so.6\n")
    assert cupti_api.find_libcupti(str(maps)) is None
    assert cupti_api.find_libcupti(str(tmp_path / "none")) is None


def test_without_libcupti_nothing_is_switched(monkeypatch):
    monkeypatch.setattr(cupti_api, "find_libcupti", lambda: None)
    assert cupti_api.keep_launches() == {
        "applied": False,
        "why": "no libcupti is loaded in this process",
    }


def test_the_real_binding_types_fit_ctypes():
    """`_bind` sets what the real library's functions need (a char** out-parameter)."""
    lib = _FakeCupti({1: "cudaLaunchKernel_v7000"}, {})
    cupti_api._bind(lib)
    assert lib.cuptiGetCallbackName.argtypes[2] is ctypes.c_void_p
    assert lib.cuptiActivityEnableRuntimeApi.argtypes == [ctypes.c_uint32, ctypes.c_uint8]


# ---- Capture ------------------------------------------------------------------------------


def test_capture_refuses_an_unknown_mode(tmp_path):
    with pytest.raises(BadInput, match="give one of launches, all"):
        Capture(out=tmp_path, api_records="some")


class _Prof:
    def __init__(self, action):
        self.current_action = action


def test_capture_switches_off_once_the_profiler_left_its_wait(tmp_path, monkeypatch):
    from torch.profiler import ProfilerAction

    calls = []
    monkeypatch.setattr(
        cupti_api, "keep_launches", lambda: calls.append(1) or {"applied": True, "runtime_off": 3}
    )
    cap = Capture(out=tmp_path, api_records="launches")
    cap.two_pass = True
    cap._prof = _Prof(ProfilerAction.NONE)
    cap._filter_api()
    assert calls == [] and cap.api_filter is None  # waiting: kineto has not turned CUPTI on
    cap._prof = _Prof(ProfilerAction.WARMUP)
    cap._filter_api()
    cap._filter_api()
    assert calls == [1] and cap.api_filter == {"applied": True, "runtime_off": 3}
    assert cap._meta()["api_records"] == {"mode": "launches", "applied": True, "runtime_off": 3}


def test_capture_keeps_the_read_calls_by_default(tmp_path, monkeypatch):
    """The default mode is "launches" (`defaults.API_RECORDS`): a two-pass capture switches
    the unread functions off with no argument given."""
    from torch.profiler import ProfilerAction

    calls = []
    monkeypatch.setattr(cupti_api, "keep_launches", lambda: calls.append(1) or {"applied": True})
    cap = Capture(out=tmp_path)
    cap.two_pass, cap._prof = True, _Prof(ProfilerAction.RECORD)
    cap._filter_api()
    assert calls == [1] and cap._meta()["api_records"] == {"mode": "launches", "applied": True}


def test_capture_records_everything_when_asked_and_in_one_pass(tmp_path, monkeypatch):
    from torch.profiler import ProfilerAction

    monkeypatch.setattr(cupti_api, "keep_launches", lambda: pytest.fail("must not switch"))
    cap = Capture(out=tmp_path, api_records="all")
    cap.two_pass, cap._prof = True, _Prof(ProfilerAction.RECORD)
    cap._filter_api()
    assert cap._meta()["api_records"] == {"mode": "all"}
    one = Capture(out=tmp_path)  # no CUDA: one pass, CPU ops
    one._prof = _Prof(ProfilerAction.RECORD)
    one._filter_api()
    assert one._meta()["api_records"] is None


def test_a_failed_switch_is_a_note_and_the_capture_goes_on(tmp_path, monkeypatch):
    from torch.profiler import ProfilerAction

    def boom():
        raise OSError("bad lib")

    monkeypatch.setattr(cupti_api, "keep_launches", boom)
    cap = Capture(out=tmp_path, api_records="launches")
    cap.two_pass, cap._prof = True, _Prof(ProfilerAction.WARMUP)
    cap._filter_api()
    assert cap.api_filter == {"applied": False, "why": "OSError: bad lib"}
    assert any("every CUDA API call was recorded" in n and "bad lib" in n for n in cap.notes)


def test_the_report_says_what_was_not_recorded():
    meta = {"steps_captured": 8, "wait": 6, "warmup": 2, "step_source": "optimizer",
            "api_records": {"mode": "launches", "applied": True, "runtime_off": 412,
                            "driver_off": 803}}  # fmt: skip
    notes = notes_from_meta(meta)
    assert any("412 runtime and 803 driver functions were not recorded" in n for n in notes)
    meta["api_records"] = {"mode": "all"}
    assert not any("not recorded" in n for n in notes_from_meta(meta))


@pytest.mark.gpu
def test_on_a_gpu_only_the_read_calls_are_recorded(tmp_path):
    """Under a CUDA-only profiler, `keep_launches` leaves every kernel with its launch record
    and drops the calls the timeline does not read."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    x = torch.randn(256, 256, device="cuda")

    def work():
        for _ in range(20):
            y = torch.nn.functional.gelu(x @ x)
        torch.cuda.current_stream().query()
        return float(y.sum())  # a D2H copy and a sync

    work()
    traces = {}
    for mode in ("all", "launches"):
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            got = cupti_api.keep_launches() if mode == "launches" else {}
            work()
        path = tmp_path / f"{mode}.json"
        prof.export_chrome_trace(str(path))
        traces[mode] = json.loads(path.read_text())["traceEvents"]
        if mode == "launches":
            assert got["applied"], got
            assert got["runtime_off"] > 100 and "cudaLaunchKernel" in got["runtime_kept"]
    for mode, events in traces.items():
        calls = {
            (e.get("args") or {}).get("correlation"): e["name"]
            for e in events
            if e.get("cat") in ("cuda_runtime", "cuda_driver")
        }
        kernels = [e for e in events if e.get("cat") == "kernel"]
        assert len(kernels) >= 40, mode
        assert all((k.get("args") or {}).get("correlation") in calls for k in kernels), mode
        names = set(calls.values())
        assert "cudaStreamQuery" in names and any("Synchronize" in n for n in names), mode
    kept = {
        e["name"] for e in traces["launches"] if e.get("cat") in ("cuda_runtime", "cuda_driver")
    }
    assert all(api_kept(n) for n in kept), kept


@pytest.mark.parametrize("fixture", ["h200_real_dcgan_oos2", "h200_real_t5_seq2seq_oos1"])
def test_a_timeline_without_the_unread_calls_gives_the_same_report(fixture, tmp_path):
    """A recorded H200 timeline with the calls `--api-records launches` leaves out removed
    (2,025 of the DCGAN's records, 1,925 of the T5's) analyses to the same idle causes,
    findings and remedies; only the replays, which play every recorded call with its host
    cost, move: the GPU what-if's (the T5's fp32-matmul 15.87 -> 15.79 ms/step) and compile's
    (`analysis.compile_whatif`: the T5's compile 17.60 -> 17.35, the DCGAN's 0.01 -> -0.07)."""
    import shutil

    from membound.analysis import analyze
    from membound.device.ceilings import Ceilings
    from membound.report.json_report import to_dict

    src = FIXTURES / fixture
    dst = tmp_path / fixture
    shutil.copytree(src, dst)
    doc = json.load(open_trace(timeline_in(src)))
    (dst / timeline_in(src).name).unlink()  # rewritten as gzip below
    n = len(doc["traceEvents"])
    doc["traceEvents"] = [
        e
        for e in doc["traceEvents"]
        if e.get("cat") not in ("cuda_runtime", "cuda_driver") or api_kept(e.get("name", ""))
    ]
    assert n - len(doc["traceEvents"]) > 1000
    with gzip.open(dst / "trace.json.gz", "wt") as f:
        json.dump(doc, f)
    ceilings = Ceilings.load(FIXTURES / "h200_ceilings.json")
    full, light = (to_dict(analyze([timeline_in(d)], ceilings)) for d in (src, dst))
    assert light["gpu_busy_fraction"] == full["gpu_busy_fraction"]
    assert light["idle_breakdown"] == pytest.approx(full["idle_breakdown"], abs=1e-9)
    for key, saving in (("findings", "time_lost_ms_per_step"), ("remedies", "saving_ms_per_step")):
        a, b = full[key], light[key]
        assert [x.get("code", x.get("remedy")) for x in a] == [
            x.get("code", x.get("remedy")) for x in b
        ]
        assert [x[saving] for x in b] == pytest.approx([x[saving] for x in a], rel=0.02, abs=0.1)
