# SPDX-License-Identifier: Apache-2.0
# Copyright (c) 2026 the warp-rewrite authors
"""Verify mode: memory a replay kernel reads must hold in backward what it held in the forward.

A replay kernel reads the launch's records and memory the launch never writes. Something launched later can still
change that memory before ``tape.backward()`` (a free list refilled by the next step): the replay would then
differentiate other values, silently, as plain Warp's replay does. With verify on (``wp_rewrite(k, verify=True)``,
or ``WP_REWRITE_VERIFY=1`` for every rewritten launch) each launch fingerprints, on the device, the bytes of every
array its replay reads from memory, and its backward fingerprints them again before the replay's adjoint runs: a
change raises ``RewriteError`` naming the argument, the kernel and the launch. The check reads two words per array
back to the host, in backward only.
"""

import os
import sys
from collections.abc import Sequence
from types import FrameType
from typing import Any

import warp as wp

from .errors import RewriteError
from .specs import KernelSpec


def verify_everywhere() -> bool:
    """``WP_REWRITE_VERIFY=1``: verify every rewritten launch."""
    return os.environ.get("WP_REWRITE_VERIFY", "") not in ("", "0")


# The ignores: Warp's annotations are calls (wp.array(dtype=...)), and its scalar types declare no bit operators.
@wp.kernel(enable_backward=False)
def fingerprint_words(words: wp.array(dtype=Any), fingerprint: wp.array(dtype=wp.uint64)):  # type: ignore[valid-type]
    """Adds a mix of each word and its place (splitmix64's finaliser) into ``fingerprint``: any order of the
    threads gives the same sum, and moving or changing a word changes it."""
    i = wp.tid()
    z = (wp.uint64(i) << wp.uint64(32)) ^ wp.uint64(words[i])  # type: ignore[operator, arg-type]
    z = (z ^ (z >> wp.uint64(30))) * wp.uint64(0x3F58476D1CE4E5B9)
    z = (z ^ (z >> wp.uint64(27))) * wp.uint64(0x14D049BB133111EB)
    wp.atomic_add(fingerprint, 0, z ^ (z >> wp.uint64(31)))


def memory_of(array: Any) -> wp.array | None:
    """The array whose bytes hold ``array``'s elements (an indexed array's data), contiguous; None for kinds of
    arrays verify mode does not read (fabric arrays)."""
    if isinstance(array, wp.indexedarray):
        array = array.data
    if type(array) is not wp.array or array.size == 0:
        return None
    return array if array.is_contiguous else wp.clone(array, requires_grad=False)


def fingerprint(array: wp.array) -> wp.array:
    """The fingerprint of a contiguous array's bytes, computed on its device (nothing waits for it)."""
    size = array.size * wp._src.types.type_size_in_bytes(array.dtype)
    word = wp.uint32 if size % 4 == 0 else wp.uint8
    words: wp.array = wp.array(
        ptr=array.ptr, dtype=word, shape=(size // wp._src.types.type_size_in_bytes(word),), device=array.device
    )
    result = wp.zeros(1, dtype=wp.uint64, device=array.device)
    wp.launch(fingerprint_words, words.shape, inputs=[words, result], device=array.device, record_tape=False)
    return result


def launch_site() -> str:
    """``file:line`` of the user's call that launched the kernel: the first frame outside this runtime, Warp, and
    the ``wp.launch`` hooks of other copies of the runtime (emitted modules' copies wrap the one before)."""
    skipped = (os.path.dirname(__file__), os.path.dirname(wp.__file__))

    def inside(frame: FrameType) -> bool:
        hook = frame.f_globals.get("__name__", "").endswith(".hook") and "warp_launch" in frame.f_globals
        return hook or frame.f_code.co_filename.startswith(skipped)

    frame: FrameType | None = sys._getframe(1)
    while frame is not None and inside(frame):
        frame = frame.f_back
    return f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame is not None else "an unknown place"


class ReadMemory:
    """The fingerprints a launch took of the memory its replay reads; ``check`` is its first step in backward."""

    def __init__(self, spec: KernelSpec, read: Sequence[tuple[str, Any]]):
        self.spec = spec
        self.site = launch_site()
        read_memory = [(path, array, memory) for path, array in read if (memory := memory_of(array)) is not None]
        self.arrays = [(path, array) for path, array, _ in read_memory]
        self.fingerprints = [fingerprint(memory) for _, _, memory in read_memory]

    def check(self) -> None:
        for (path, array), before in zip(self.arrays, self.fingerprints, strict=True):
            if array.device.is_capturing:
                raise RewriteError(
                    self.spec.key,
                    self.spec.location,
                    f"verify mode compares the fingerprints of '{path}' on the host, which a CUDA graph capture of "
                    "tape.backward() cannot wait for",
                    "Capture the backward without verify mode (verify=False, WP_REWRITE_VERIFY unset)",
                )
            memory = memory_of(array)
            assert memory is not None  # the array it was at the launch
            if fingerprint(memory).numpy()[0] != before.numpy()[0]:
                raise RewriteError(
                    self.spec.key,
                    self.spec.location,
                    f"the array passed as '{path}' to its launch at {self.site} changed between that launch and "
                    "tape.backward(); its replay reads it, so the gradients of that launch would be wrong",
                    f"Launch it with a copy (wp.clone) of '{path}', or change the array only after tape.backward() "
                    "(or launch the kernel after the change)",
                )
