"""Norms written out as separate ops: an RMSNorm or LayerNorm that a model spells in
elementwise ops and a reduction instead of calling one norm kernel.

Why (issue 15, H200 truth run of a Hugging Face Trainer on a small Llama): HF's
`LlamaRMSNorm.forward` is `x.to(float32)`, `pow(2)`, `mean(-1, keepdim=True)`, `+ eps`,
`rsqrt`, `*`, `.to(dtype)`, `weight *`: eight ops forward and about fifteen in autograd's
backward, each a kernel that reads and writes the whole activation. No op of the trace is a
norm, so no finding named membound's norms, yet `membound.swap_norms` (one fused kernel each
way) saved 7.35 ms/step (17%) there.

Recognised by what the ops compute, on one host thread in kernel order (`SIGNATURES`):
    RMSNorm:   [cast] square, mean, [+ eps], rsqrt, multiply, [cast], [× weight]
    LayerNorm: [cast] mean, subtract, square, mean, [+ eps], rsqrt or sqrt, multiply or
               divide, [cast], [× weight], [+ bias]
where "square" is `pow` or `mul` and the normalizing multiply reads a tensor of the squared
input's size. The backward ops are those autograd ran for these forward ops: the calls inside
the backward nodes that carry the forward ops' sequence numbers (`OpCall.seq`); a trace with
no sequence numbers gives the forward ops only (and says so in the evidence).

Fewer kernels also mean fewer launch gaps: of the step's `launch` idle (the GPU waiting for
the host to issue the next kernel), the written-out norm is charged the share of kernels its
fusion removes (their calls' kernels less `fused_kernels`, over all op kernels), and
`launch-bound` keeps the rest (one instant in one finding). On the H200 HF Llama that made the
prediction 5.51 and 6.55 ms/step against 7.35 and 6.02 measured (4.82 without it).

What one fused kernel would move instead, at minimum: the input read and the output written
forward (2 × the input's bytes, in the dtype the model hands the norm, before its own cast
to fp32), and dy and x read and dx written backward (3 ×); the weight and per-row statistics
are small and left out. Its time is those bytes at the memory roof they would be held to.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

#: op name -> the letter the signatures below are written in
TOKENS = {
    "aten::pow": "P",
    "aten::square": "P",
    "aten::mean": "M",
    "aten::add": "A",
    "aten::add_": "A",
    "aten::rsqrt": "R",
    "aten::sqrt": "Q",
    "aten::mul": "X",
    "aten::mul_": "X",
    "aten::div": "D",
    "aten::div_": "D",
    "aten::sub": "S",
    "aten::sub_": "S",
    "aten::copy_": "C",
    "aten::_to_copy": "C",
    "aten::to": "C",
}
#: (kind, pattern over the tokens, the group holding the square, the group holding the
#: normalizing multiply/divide, the group holding a leading cast)
SIGNATURES = (
    ("layer_norm", re.compile(r"(C)?M(S)([PX])MA?[RQ]([XD])C?X?A?"), 3, 4, 1),
    ("rms_norm", re.compile(r"(C)?([PX])MA?R(X)C?X?"), 2, 3, 1),
)
#: fused kernel's minimal bytes, in units of the norm input's bytes: forward (x in, y out)
#: and backward (dy and x in, dx out)
FWD_PASSES, BWD_PASSES = 2, 3
#: kernels membound's fused norm launches for one call: one forward; backward the row kernel,
#: the parameter-gradient partials and their reduction (`kernels/add_norm/launch.py`)
FUSED_KERNELS_FWD, FUSED_KERNELS_BWD = 1, 3


@dataclass
class WrittenNorm:
    """One norm call written out: its forward and backward op calls (indexes into the calls)."""

    kind: str  # "rms_norm" or "layer_norm"
    forward: list[int]
    backward: list[int] = field(default_factory=list)
    #: bytes of the tensor the model hands the norm (before its own cast, if any)
    input_bytes: float = 0.0
    fp32: bool = False

    @property
    def calls(self) -> list[int]:
        return self.forward + self.backward


def letters_of(names) -> np.ndarray:
    """Each op name's letter in `SIGNATURES` ("." for the others): made once per distinct
    name by a caller holding name codes (`letters_of(distinct)[codes]`)."""
    return np.array([TOKENS.get(nm, ".") for nm in names], dtype="<U1")


def find(letters: np.ndarray, tid: np.ndarray, out: np.ndarray, seq: np.ndarray,
         backward: np.ndarray, storage) -> list[WrittenNorm]:  # fmt: skip
    """The written-out norms among op calls given as columns in kernel order: `letters`
    (`letters_of` their names), `tid`, `out` (each call's first input's bytes),
    `seq`/`backward` (`OpCall.seq`/`.backward`), `storage` (each call's storage dtype)."""
    n = len(letters)
    if n < 4:
        return []
    groups: list[WrittenNorm] = []
    taken = np.zeros(n, dtype=bool)
    fwd = ~np.asarray(backward, dtype=bool)
    for t in np.unique(tid[fwd]).tolist():
        idx = np.flatnonzero((tid == t) & fwd)
        text = "".join(letters[idx].tolist())
        for kind, pattern, square_g, norm_g, cast_g in SIGNATURES:
            for m in pattern.finditer(text):
                span = idx[m.start() : m.end()]
                if taken[span].any():
                    continue
                sq, nm = idx[m.start(square_g)], idx[m.start(norm_g)]
                size = out[sq]
                if not size > 0 or out[nm] != size:
                    continue  # the normalizing op does not read the squared tensor's size
                first = idx[m.start(cast_g)] if m.group(cast_g) else sq
                taken[span] = True
                groups.append(
                    WrittenNorm(
                        kind,
                        span.tolist(),
                        input_bytes=float(out[first]),
                        fp32=storage[first] == "float",
                    )
                )
    if not groups:
        return []
    groups.sort(key=lambda g: g.forward[0])
    # backward: the calls inside backward nodes that carry a forward op's sequence number
    owner: dict[int, int] = {}
    for k, g in enumerate(groups):
        for i in g.forward:
            if seq[i] >= 0:
                owner.setdefault(int(seq[i]), k)
    # an add in the backward node of the norm's first op sums the input's gradient with its
    # other users' (the residual stream): that stays with a fused norm too, so it is not the
    # norm's work
    entry = {k: int(seq[g.forward[0]]) for k, g in enumerate(groups)}
    if owner:
        for i in np.flatnonzero(np.asarray(backward, dtype=bool) & (seq >= 0)).tolist():
            k = owner.get(int(seq[i]))
            if k is not None and not (letters[i] == "A" and seq[i] == entry[k]):
                groups[k].backward.append(i)
    return groups


def fused_kernels(g: WrittenNorm) -> int:
    """Kernels one fused norm launches for `g`'s work (its backward only when found)."""
    return FUSED_KERNELS_FWD + (FUSED_KERNELS_BWD if g.backward else 0)


def fused_bytes(g: WrittenNorm) -> tuple[float, float]:
    """(forward, backward) minimal bytes of one fused kernel doing `g`'s work (backward 0
    when no backward op of it was found)."""
    return FWD_PASSES * g.input_bytes, (BWD_PASSES * g.input_bytes if g.backward else 0.0)
