"""Issue 13: a broad corpus of everyday PyTorch one-liners must behave the same in PyFlame.

tests/idioms/run_idioms.py evaluates every idiom of tests/idioms/corpus.py with PyTorch
and with PyFlame; the agreement rate must not fall below tests/idioms/THRESHOLD (raised
as features land; the goal is 0.97).
"""

import json
import os
import subprocess
import sys

IDIOMS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "idioms")


def test_idiom_agreement(tmp_path):
    report_path = tmp_path / "idioms.json"
    proc = subprocess.run(
        [sys.executable, os.path.join(IDIOMS, "run_idioms.py"), "-q", "--json", str(report_path)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(report_path.read_text())
    with open(os.path.join(IDIOMS, "THRESHOLD")) as f:
        threshold = float(f.read().strip())
    assert report["total"] >= 550
    diffs = "\n".join(
        f"[{r['category']}] {r['expr']}  ::  {r['reason']}  ::  torch: {r['torch']}  ::  pyflame: {r['pyflame']}"
        for r in report["disagreements"]
    )
    assert report["rate"] >= threshold, (
        f"idiom agreement {report['rate']:.4f} ({report['agree']}/{report['total']}) "
        f"is below the threshold {threshold}; disagreements:\n{diffs}"
    )
