#!/usr/bin/env bash
# 2026-12-04 (evening), call 4: issue 15. membound.data.prefetch trailed DataLoader(pin_memory=True)
# by 2.5-3 ms a step on Lightning and the ViT (calls 2 and 3). Does its copy-thread count
# (8 on this 16-core host, beside 8 busy workers) compete with the training thread? The
# synthetic worker-fed loop of probe_loader_host.py, with a training thread that launches
# 800 kernels a step and workers that normalize each image, pinned against the prefetcher with
# 1, 2 and 8 copy threads, 8 workers. The first attempt (two worker counts) died: a forked worker
# freed the last variant's CUDA tensors (the probe now collects garbage between variants);
# its first rows are in prefetch_threads_2026-12-04i_first.jsonl. Products: prefetch_threads.jsonl.
source "$(dirname "$0")/_session.sh"
for w in 8; do
  timeout 200 python benchmarks/probe_loader_host.py --normalize --launches 800 --gpu-ms 15 \
    --steps 30 --warmup 8 --workers $w \
    --variants pinned,prefetch-t1,prefetch-t2,prefetch-t8,pinned,prefetch-t1,prefetch-t8 \
    >> "$DEST/prefetch_threads.jsonl" 2>>"$DEST/prefetch_threads.err"
  echo "workers $w rc=$? at $(( $(date +%s) - t0 )) s"
done
cat "$DEST/prefetch_threads.jsonl"; tail -3 "$DEST/prefetch_threads.err"
echo "session done in $(( $(date +%s) - t0 )) s"
