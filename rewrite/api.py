"""Public API: ``wp_rewrite(kernel)`` and ``launch(...)``, a drop-in for ``wp.launch``."""

from __future__ import annotations

import hashlib
import inspect
import threading
import warnings
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, overload

import warp as wp
from warp._src.context import ModuleHasher

from warp_rewrite import pipeline
from warp_rewrite.live_frontend import LiveFrontend, compile_generated
from warp_rewrite.pipeline import LeftToWarp, RewriteOptions
from warp_rewrite.runtime import KernelPair, RewriteError, RewrittenKernel, hook
from warp_rewrite.runtime.errors import RewriteWarning, left_to_warp
from warp_rewrite.switch import switched_on

_defined_in_module: dict[str, set[str]] = {}  # Warp module -> names the generated code defined there


@dataclass(frozen=True)
class Options:
    """``wp_rewrite``'s options: one ``RewrittenKernel`` per kernel and options."""

    max_records: int | None
    detach_returns: bool
    on_refusal: str
    verify: bool


@dataclass(frozen=True)
class Generated:
    """The compiled record and replay kernels of one kernel for some options, their source, and where they went."""

    pair: KernelPair
    text: str
    module: str  # the Warp module they joined
    definitions: tuple[str, ...]  # the names they defined there


@dataclass(frozen=True)
class Made:
    """What the rewrite made of a kernel as it was (``content``): the generated kernels, or None where it consumes
    no atomic's return."""

    content: bytes
    generated: Generated | None


# The generated kernels per kernel and (detach_returns, max_records), each kept while its content is the kernel's.
_generated: weakref.WeakKeyDictionary[wp.Kernel, dict[tuple[bool, int | None], Made]] = weakref.WeakKeyDictionary()
# The rewritten kernel per kernel and options (``Options``' fields, in order).
_rewritten: weakref.WeakKeyDictionary[wp.Kernel, dict[tuple, RewrittenKernel]] = weakref.WeakKeyDictionary()


class _AsDecorator:
    """The default of ``wp_rewrite``'s kernel: called without one it is a decorator; ``wp_rewrite(None)`` is a
    mistake (a kernel variable left unset), refused like any other non-kernel."""

    def __repr__(self) -> str:
        return "<decorator>"


_DECORATOR = _AsDecorator()
_lock = threading.RLock()  # one RewrittenKernel per kernel and options, however many threads ask at once
REFUSALS = ("raise", "original")


@overload
def wp_rewrite(
    kernel: wp.Kernel | RewrittenKernel,
    *,
    max_records: int | None = None,
    detach_returns: bool = False,
    on_refusal: str = "raise",
    verify: bool = False,
) -> RewrittenKernel: ...


@overload
def wp_rewrite(
    *, max_records: int | None = None, detach_returns: bool = False, on_refusal: str = "raise", verify: bool = False
) -> Callable[[wp.Kernel], RewrittenKernel]: ...


def wp_rewrite(
    kernel: Any = _DECORATOR,  # anything: what is not a kernel is refused with a TypeError
    *,
    max_records: int | None = None,
    detach_returns: bool = False,
    on_refusal: str = "raise",
    verify: bool = False,
) -> RewrittenKernel | Callable[[wp.Kernel], RewrittenKernel]:
    """Rewrite a kernel whose code uses atomics' returned values into a record and a replay kernel.

    Launch the result as you would the kernel, with ``wp.launch`` (or its own ``.launch``): under a ``wp.Tape``
    its gradients are right, or it raises ``RewriteError`` saying why they cannot be. For example::

        @wp_rewrite  # or @wp_rewrite(max_records=4), on top of @wp.kernel
        @wp.kernel
        def compact(x: wp.array(dtype=float), count: wp.array(dtype=int), out: wp.array(dtype=float)):
            slot = wp.atomic_add(count, 0, 1)
            out[slot] = x[wp.tid()] * 2.0

        with wp.Tape() as tape:
            wp.launch(compact, dim=n, inputs=[x, count, out])
        tape.backward(grads={out: seed})

    Floating-point returns get exact gradients (through the target's initial values and every earlier
    operand on the same address). ``detach_returns=True`` records them as constants instead, which is
    exact only when nothing they are made of requires grad: launches refuse otherwise.

    ``max_records`` bounds how many times any loop around a consumed atomic runs in one execution, for
    loops whose trip count is not a constant; without it each launch counts the trips in a dry run of the
    record kernel on scratch copies of what the kernel writes first.

    ``on_refusal="original"``: a kernel the rewrite refuses is not an error here; its launches run the original
    kernel where no gradient can flow (no tape records them, or nothing handed to them requires grad) and raise the
    ``RewriteError`` where one could.

    ``verify=True`` (or ``WP_REWRITE_VERIFY=1`` for every rewritten launch): each launch fingerprints the arrays
    its replay reads from memory, and ``tape.backward()`` raises ``RewriteError`` if one changed since.

    Takes what ``@wp.kernel`` returns (a ``RewrittenKernel`` is rewritten from its original kernel); called without
    a kernel it is a decorator. Raises ``TypeError`` for anything else, and ``RewriteError`` for a pattern that
    cannot be made differentiable correctly. Repeated calls on the same kernel and options return the cached
    result, from any thread.
    """
    check_options(max_records, detach_returns, on_refusal, verify)

    def with_options(target: wp.Kernel) -> RewrittenKernel:
        return wp_rewrite(
            target, max_records=max_records, detach_returns=detach_returns, on_refusal=on_refusal, verify=verify
        )

    if kernel is _DECORATOR:
        return with_options
    if hasattr(kernel, "launches_rewritten"):  # a RewrittenKernel, this runtime's or an emitted module's copy's
        return with_options(kernel.kernel)
    if not isinstance(kernel, wp.Kernel):
        raise TypeError(f"wp_rewrite() expects a Warp kernel (the object @wp.kernel returns), got {_what(kernel)}")
    with _lock:
        by_option = _rewritten.setdefault(kernel, {})
        key = (max_records, detach_returns, on_refusal, verify)  # a tuple: rewrite_launches() asks at every launch
        if key not in by_option:
            by_option[key] = _rewrite(kernel, Options(*key))
        return by_option[key]


def check_options(max_records: object, detach_returns: object, on_refusal: object, verify: object) -> None:
    """Refuse options of the wrong type (``max_records=True`` is a bool, not a count) or value."""
    if max_records is not None and (type(max_records) is not int):
        raise TypeError(f"max_records must be an int or None, got {max_records!r}")
    if max_records is not None and max_records < 0:
        raise ValueError(f"max_records must be a non-negative int, got {max_records!r}")
    for name, value in (("detach_returns", detach_returns), ("verify", verify)):
        if type(value) is not bool:
            raise TypeError(f"{name} must be True or False, got {value!r}")
    if on_refusal not in REFUSALS:
        raise (TypeError if not isinstance(on_refusal, str) else ValueError)(
            f"on_refusal must be one of {', '.join(map(repr, REFUSALS))}, got {on_refusal!r}"
        )


def _what(value: object) -> str:
    """What ``wp_rewrite`` was given instead of a kernel, and what to do about it."""
    if isinstance(value, wp._src.context.Function):
        return "a @wp.func: rewrite the kernels that call it"
    if inspect.isfunction(value):
        return (
            f"the plain function '{value.__name__}': put @wp_rewrite above @wp.kernel (decorators apply from "
            "the bottom up, so @wp.kernel must make the kernel first)"
        )
    return repr(type(value).__name__)


def _rewrite(kernel: wp.Kernel, options: Options) -> RewrittenKernel:
    """The kernel rewritten as it is now: helpers, structs and constants as its namespace holds them."""
    freshness = Freshness(kernel, options, kernel.module, kernel.module.hashers, content(kernel))
    max_records = options.max_records
    try:
        generated = _generated_for(kernel, options.detach_returns, max_records, freshness.content)
    except LeftToWarp as left:
        warnings.warn(f"{left.location}: {left_to_warp(left)}", RewriteWarning, stacklevel=3)
        source = f"# kernel '{kernel.key}' left as plain Warp: {left}\n"
        return RewrittenKernel(kernel, None, max_records=max_records, source=source, left=left, freshness=freshness)
    except RewriteError as refusal:
        if options.on_refusal == "raise":
            raise
        source = f"# kernel '{kernel.key}' refused, launched as it is where no gradient can flow: {refusal}\n"
        return RewrittenKernel(
            kernel, None, max_records=max_records, source=source, refusal=refusal, freshness=freshness
        )
    if generated is None:
        source = f"# kernel '{kernel.key}' uses no atomic's return: launched unchanged\n"
        return RewrittenKernel(kernel, None, max_records=max_records, source=source, freshness=freshness)
    exact = any(site.exact for site in generated.pair.spec.sites)
    detached = (lambda: _detached(kernel, max_records)) if exact else None
    return RewrittenKernel(
        kernel,
        generated.pair,
        detached=detached,
        max_records=max_records,
        source=generated.text,
        verify=options.verify,
        freshness=freshness,
    )


def content(kernel: wp.Kernel) -> bytes:
    """Warp's hash of the kernel as its module cache keys it: its key, options, source and types, and the content of
    every helper, struct and constant it reaches, as its namespace binds them now. Empty where Warp cannot hash it
    (nor then build it): such a kernel is never made again."""
    digest = hashlib.sha256()
    try:
        ModuleHasher([], {})._hash_kernel_identity(digest, kernel)
    except Exception:  # Warp's own error, which its launch raises too
        return b""
    return digest.digest()


@dataclass
class Freshness:
    """Whether a helper, struct or constant the kernel reaches was redefined since its rewrite was made (a notebook
    cell run again), as Warp tells it for its own module cache: defining anything in a Warp module replaces the
    module's ``hashers``. Only then is the kernel's ``content`` read again, and the rewrite made again where it
    differs, from the kernel's own body: a kept ``RewrittenKernel`` runs its own body with the current helpers, as
    plain Warp runs a kernel object. A launch costs one identity check."""

    kernel: wp.Kernel
    options: Options
    module: wp._src.context.Module  # the kernel's
    hashers: dict  # the module's ``hashers`` when ``content`` was read
    content: bytes

    def stale(self) -> bool:
        return self.module.hashers is not self.hashers

    def renew(self, rewritten: RewrittenKernel) -> None:
        """Make the rewrite again if the kernel's content changed; raises its ``RewriteError`` if it is now refused
        (``on_refusal="raise"``), at every launch until it is not."""
        with _lock:
            if rewritten.freshness is not self or not self.stale():
                return  # another thread renewed it
            hashers = self.module.hashers
            if content(self.kernel) == self.content:
                self.hashers = hashers  # something else of the module was defined
                return
            rewritten.adopt(_rewrite(self.kernel, self.options))


def rewrite_launches(enabled: bool = True) -> None:
    """For code one cannot edit: ``wp.launch`` of a kernel that consumes an atomic's return, forward on a tape,
    launches ``wp_rewrite(kernel)`` instead (off by default; also ``WP_REWRITE_LAUNCHES=1`` in the environment).

    A kernel the rewrite refuses raises its ``RewriteError`` at a launch that something handed to it requiring
    grad could take a gradient through, and runs as it is at the others (``on_refusal="original"``); kernels
    without a backward pass, and launches without a tape, stay as they are.
    """
    hook.AUTO_REWRITE = _rewrite_or_keep if enabled else None


def _rewrite_or_keep(kernel: wp.Kernel) -> RewrittenKernel:
    return wp_rewrite(kernel, on_refusal="original")


def _generated_for(kernel: wp.Kernel, detach_returns: bool, max_records: int | None, now: bytes) -> Generated | None:
    """The generated kernels for these options, made from the kernel's content ``now``: one with no loop of unknown
    length serves every max_records. Kernels made from other content give their names back to their module, for
    the new ones: Warp then keeps only the newest of each name compiled."""
    by_options = _generated.setdefault(kernel, {})
    for (detached, _), made in by_options.items():
        usable = made.generated is None or not _takes_room(made.generated.pair)
        if made.content == now and detached == detach_returns and usable:
            return made.generated
    old = by_options.get((detach_returns, max_records))
    if old is None or old.content != now:
        if old is not None and old.generated is not None:
            _defined_in_module[old.generated.module].difference_update(old.generated.definitions)
        by_options[detach_returns, max_records] = Made(now, generate(kernel, detach_returns, max_records))
    return by_options[detach_returns, max_records].generated


def _takes_room(pair: KernelPair) -> bool:
    return any(loop.counted for loop in pair.spec.loops)


def _detached(kernel: wp.Kernel, max_records: int | None) -> KernelPair | None:
    """The variant recording float returns as constants, for launches where no exact gradient can flow.

    Generated at the first such launch, into a Warp module of its own: kernels added to a module that has been
    loaded make Warp compile it all again, and a program that never needs the variant never compiles it.
    """
    with _lock:
        generated = generate(kernel, True, max_records, ".detached")
    return generated.pair if generated else None


def generate(
    kernel: wp.Kernel, detach_returns: bool = False, max_records: int | None = None, module_suffix: str = ""
) -> Generated | None:
    """The compiled record/replay kernels of ``kernel`` and their source, or None when it consumes no atomic's
    return.

    The kernels join the Warp module ``wp_rewrite.<kernel's module><module_suffix>``; those of a kernel with loops
    of unknown length and a ``max_records``, which they have compiled in, a module of their own per
    ``max_records`` (beside the others, they would make Warp compile those again).
    """
    module = f"wp_rewrite.{kernel.module.name}{module_suffix}"
    room_module = f"{module}.max_records{max_records}"
    # Fresh names avoid those of both modules the kernels may join (which one, the plan tells).
    taken = set(_defined_in_module.get(module, ()))
    taken |= _defined_in_module.get(room_module, set()) if max_records is not None else set()
    frontend = LiveFrontend(kernel, taken)
    generated = pipeline.rewrite_kernel(frontend, RewriteOptions(max_records, detach_returns))
    if generated is None:
        return None
    if generated.max_records is not None:
        module = room_module
    _defined_in_module.setdefault(module, set()).update(generated.definitions)
    if wp.config.log_level <= wp.LOG_INFO and not module_suffix:  # once a kernel: its variants are not told
        sites = len(generated.spec.sites)
        wp.get_logger().info(
            f"warp-rewrite: kernel '{frontend.kernel.name}' rewritten ({sites} recorded value"
            f"{'s' * (sites != 1)}) into Warp module '{module}'"
        )
    source = frontend.kernel
    header = f"# Generated by warp-rewrite from kernel '{kernel.key}' ({source.filename}:{source.first_line})\n\n\n"
    text = header + generated.source
    scope = compile_generated(text, frontend.namespace(), kernel.key, module)
    wp.get_module(module).options.update(kernel.module.options)
    count = scope[generated.count_kernel] if generated.count_kernel else None
    pair = KernelPair(scope[generated.record_kernel], scope[generated.replay_kernel], generated.spec, count)
    return Generated(pair, text, module, tuple(generated.definitions))


launch = hook.launch  # wp.launch, which takes rewritten kernels once warp_rewrite is imported

if switched_on():  # WP_REWRITE_LAUNCHES=1 (warp_rewrite.switch)
    rewrite_launches()
