"""One Triton launch as a launcher makes it, and the device facts that choose it.

Every launcher (``sparse_mla_decode.py``, ``fp8_ds_mla.py``, ``gather.py``)
builds its kernel launches in one function that both the call path and the
ahead-of-time compile check (``aot.py``) use: the call path runs the
:class:`Launch` objects, the check compiles them for sm_90 and sm_100 from
meta tensors of the production shapes. So the check compiles exactly the
argument dtypes, constexprs, ``num_warps`` and ``num_stages`` that run, and
cannot drift from them.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from ._common import INTERPRET


@dataclass(frozen=True)
class GpuArch:
    """What a launcher needs to know about the GPU to choose a tiling.

    ``capability``: compute capability as one number (90 = sm_90, H100 / H200;
    100 = sm_100, B200), which decides tile shapes; ``num_sms``: streaming
    multiprocessors, which decide how finely work is split (grid size only,
    never the compiled code).
    """

    capability: int
    num_sms: int


INTERPRETER_ARCH = GpuArch(capability=90, num_sms=4)
"""Under ``TRITON_INTERPRET=1`` the kernels take the sm_90 tiling (the tighter one:
Hopper keeps MMA accumulators in registers), on an assumed 4-SM device."""


@functools.cache
def _cuda_arch(index: int) -> GpuArch:
    major, minor = torch.cuda.get_device_capability(index)
    props = torch.cuda.get_device_properties(index)
    return GpuArch(capability=10 * major + minor, num_sms=int(props.multi_processor_count))


def device_arch(device: torch.device) -> GpuArch:
    """The :class:`GpuArch` kernels launched on ``device`` are tiled for (read once per device)."""
    if INTERPRET or device.type != "cuda":
        return INTERPRETER_ARCH
    return _cuda_arch(device.index if device.index is not None else torch.cuda.current_device())


@dataclass(frozen=True)
class Launch:
    """One kernel launch: ``kernel[grid](*args, **constexprs, num_warps=..., num_stages=...)``.

    ``args`` are the runtime arguments in the kernel's parameter order (tensors,
    ints, floats); ``constexprs`` the ``tl.constexpr`` ones by name. Built by
    the launchers; run with :meth:`run`, compiled ahead of time by ``aot.py``.
    """

    kernel: Any  # a @triton.jit function (triton ships no types)
    grid: tuple[int, ...]
    args: tuple[Any, ...]
    constexprs: Mapping[str, Any]
    num_warps: int
    num_stages: int

    def run(self) -> Any:
        """Launch the kernel (tensors on CUDA, or on the CPU under the interpreter).

        Returns Triton's handle of the compiled kernel (``n_regs``, ``n_spills``,
        ``metadata``) on CUDA; ``benches/gpu_kernels.py`` compares them with ``aot.py``.
        """
        return self.kernel[self.grid](
            *self.args, **self.constexprs, num_warps=self.num_warps, num_stages=self.num_stages
        )
