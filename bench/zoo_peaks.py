"""Host-order / worst-case / arena-bound peaks (MiB of activations) per zoo model and policy.

.venv/bin/python bench/zoo_peaks.py
"""

from streamplan.memory.report import analyze_memory
from streamplan.models import load_model
from streamplan.schedule.registry import make_schedule

M = 1 << 20
MODELS = ("inception_v3", "randwire", "nasnet_a", "nasnet_a_large", "resnet50")

for m in MODELS:
    g = load_model(m)
    cells = []
    for p in ("sequential", "wavefront", "asap", "nimble"):
        r = analyze_memory(g, make_schedule(g, p)).to_dict()
        wc = r["worst_case_peak_bytes"]
        w = f"{wc['upper'] / M:.2f}" if wc["exact"] else f"[{wc['lower'] / M:.2f}, {wc['upper'] / M:.2f}]"
        cells.append(f"{r['host_order_peak_bytes'] / M:.2f} / {w} / {r['arena_lower_bound_bytes'] / M:.2f}")
    print("|", m, "|", " | ".join(cells), "|", flush=True)
