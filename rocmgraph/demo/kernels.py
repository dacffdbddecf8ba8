"""The demo sources' kernels: the real image's compile cost, in proportion.

vLLM, sgl-kernel and causal-conv1d spend their real build hours compiling many
translation units, through ccache (vLLM's CMake has it as its compiler launcher),
``MAX_JOBS`` at a time; a small upstream change recompiles the few it touches. Each demo
source has a folder of C++ kernels that compiles the same way. A kernel's compile time
is constant evaluation of ``DEMO_KERNEL_STEPS`` steps, a variable of the source's build
(``[sources.<name>.env]``), so the files (and the pinned commits) are the same at
every scale:

    steps per kernel = real minutes (docker/durations.toml) x scale / kernels x STEPS_PER_SECOND

``scale`` is the demo seconds one real minute takes; demo/pins.toml holds the steps at
TEST_SCALE, and the change-log benchmark sets its own (``--scale``).
"""

from __future__ import annotations

KERNELS = {"vllm": 16, "sgl_kernel": 16, "causal_conv1d": 4}  # translation units per source
FOLDERS = {"vllm": "csrc/kernels", "sgl_kernel": "sgl-kernel/csrc/kernels",
           "causal_conv1d": "csrc/kernels"}  # fmt: skip
# g++ 12 evaluates about this many steps of the loop below per second on this machine's
# cores (measured: 1,000,000 steps in 2.0 s); another machine is proportional.
STEPS_PER_SECOND = 500_000
TEST_SCALE = 0.02  # demo seconds per real minute in demo/pins.toml: vLLM's hour is 1.2 s


def steps(source: str, minutes: float, scale: float) -> int:
    """``DEMO_KERNEL_STEPS`` for ``source``, whose real build takes ``minutes``."""
    return round(minutes * scale / KERNELS[source] * STEPS_PER_SECOND)


def files(source: str, title: str) -> dict[str, str]:
    """The kernel folder of ``source`` (``title`` names it in each file): a header and
    its translation units."""
    folder = FOLDERS[source]
    units = {f"{folder}/k{n:02d}.cpp": unit(title, n) for n in range(KERNELS[source])}
    return {f"{folder}/spin.h": HEADER, **units}


HEADER = """// The demo's stand-in for a kernel's templates: DEMO_KERNEL_STEPS steps of constant
// evaluation, which the compiler runs and the library only returns.
#pragma once

#ifndef DEMO_KERNEL_STEPS
#define DEMO_KERNEL_STEPS 0
#endif

namespace demo {

// Two loops: g++ bounds the iterations of one loop in a constant expression (262144).
constexpr unsigned long spin(unsigned long steps, unsigned long seed) {
  unsigned long x = seed;
  for (unsigned long i = 0; i < steps / 1000; ++i) {
    for (unsigned long j = 0; j < 1000; ++j) {
      x = x * 6364136223846793005UL + 1442695040888963407UL;
    }
  }
  return x;
}

}  // namespace demo
"""


def unit(title: str, n: int, variant: int = 0) -> str:
    """Kernel ``n``: ``variant`` is an upstream change to its code (a new seed)."""
    name = f"{title.lower().replace('-', '_')}_kernel_{n:02d}"
    return f"""// {title} (demo): kernel {n}.
#include "spin.h"

extern "C" unsigned long {name}() {{
  constexpr unsigned long value = demo::spin(DEMO_KERNEL_STEPS, {n + 1 + 1000 * variant}UL);
  return value;
}}
"""


# The lines each setup script runs to compile its kernels (it imports concurrent.futures,
# glob, os, subprocess and tempfile).
BUILD = '''

def compile_kernels(folder, into):
    """Every .cpp of ``folder`` through ccache, MAX_JOBS at a time (as CMake's compiler
    launcher), linked into ``into``: an extension, or a library's path. DEMO_KERNEL_STEPS
    is each one's compile-time work."""
    define = "-DDEMO_KERNEL_STEPS=" + os.environ.get("DEMO_KERNEL_STEPS", "0")
    objects = tempfile.mkdtemp(prefix="kernels-")

    def compile_one(source):
        target = os.path.join(objects, os.path.basename(source)[:-4] + ".o")
        command = ["ccache", "g++", "-std=c++17", "-O2", "-fPIC", define, "-c", source]
        subprocess.run([*command, "-o", target], check=True)
        return target

    jobs = int(os.environ.get("MAX_JOBS") or 1)
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        built = list(pool.map(compile_one, sorted(glob.glob(os.path.join(folder, "*.cpp")))))
    if isinstance(into, str):
        os.makedirs(os.path.dirname(into), exist_ok=True)
        subprocess.run(["g++", "-shared", "-o", into, *built], check=True)
    else:
        into.extra_objects = built
'''
