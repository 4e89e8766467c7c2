"""Helpers shared by the benchmarks."""

import os
import subprocess


def git_commit():
    """The commit being measured: $PYFLAME_COMMIT where the tree has no .git (the GPU machine), else git's."""
    if os.environ.get("PYFLAME_COMMIT"):
        return os.environ["PYFLAME_COMMIT"]
    try:
        return subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], text=True, stderr=subprocess.DEVNULL,
                                       cwd=os.path.dirname(os.path.abspath(__file__))).strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
