"""`python -m pyflame.info`: what PyFlame was built with and which devices it can use.

    python -m pyflame.info                      # the report
    python -m pyflame.info --cmake-prefix-path  # for find_package(pyflame) from C++
    python -m pyflame.info --flavour            # which flavour was built, and why
"""

import os
import sys

import pyflame as pf


def cmake_prefix_path():
    """The folder to pass as CMAKE_PREFIX_PATH so that C++ code can find_package(pyflame)."""
    return os.path.dirname(os.path.abspath(pf.__file__))


def flavour():
    """Which flavour this build is (CPU, or the GPU flavour of a platform) and why it was chosen."""
    path = os.path.join(cmake_prefix_path(), "build_flavour.txt")
    if not os.path.exists(path):
        return "unknown (built before build_flavour.txt existed)"
    with open(path) as f:
        return f.read().strip()


def report():
    """The device report as text: the CPU, and whether a GPU is usable and why (not)."""
    import scipy_openblas32

    cpu = pf.device_info() if pf.get_device() == "cpu" else None
    lines = [f"PyFlame {pf.__version__} ({cmake_prefix_path()})", f"  built as {flavour()}"]
    if cpu is None:
        import os as _os

        lines.append(f"  cpu: {_os.cpu_count()} cores")
    else:
        lines.append(f"  cpu: {cpu['name']}, {cpu['cores']} cores, {cpu['threads']} threads for kernels")
    lines.append(f"  cpu BLAS: {scipy_openblas32.get_openblas_config().strip()}")
    lines.append(pf.backend.rocm.diagnose())
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if "--cmake-prefix-path" in argv:
        print(cmake_prefix_path())
        return 0
    if "--flavour" in argv:
        print(flavour())
        return 0
    print(report())
    return 0


if __name__ == "__main__":
    sys.exit(main())
