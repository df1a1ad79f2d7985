"""GPT-2 124M, the gpt2.py loop under torch.compile (nanoGPT's default, compile=True).

The same model, data, autocast, accumulation and per-step `loss.item()` as gpt2.py (this
entry point only turns compilation on and adds its knobs). Warm-up covers compilation and,
with CUDA graphs, their recording.

Fixes, one flag each:
  --mode reduce-overhead   CUDA graphs: one launch per graph instead of one per kernel
  --log-every N            read the loss (.item(), a sync) every N steps, not every step
  --swap-norms             membound.swap_norms(model) before compiling

    python examples/real/gpt2_compiled.py --steps 20
    membound diagnose --wait 5 -- python examples/real/gpt2_compiled.py
"""

from __future__ import annotations

import gpt2

if __name__ == "__main__":
    gpt2.main(compiled=True)
