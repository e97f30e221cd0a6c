"""Public API: ``wp_rewrite(kernel)`` and ``launch(...)``, a drop-in for ``wp.launch``."""

from __future__ import annotations

import ast
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import warp as wp

from passes.atomics import AtomicCall, find_atomic_calls, parent_map
from passes.dataflow import argument_path, gradient_sources, single_assignments
from passes.naming import Namer
from passes.two_phase import Names, Site, helper_functions, phase_kernel
from rewrite.errors import RewriteError
from rewrite.runtime import is_float_dtype, launch_two_phase, resolve_path
from rewrite.source import FunctionSource, compile_generated, consumed_atomic_in_helpers


@dataclass(frozen=True)
class SiteInfo:
    """What the launch needs to know about one consumed atomic."""

    op: str
    location: str
    target: str  # argument path of the target array, e.g. "count" or "w.count"
    gradient_sources: frozenset[str]  # argument paths the returned value may be differentiable in


@dataclass
class RewrittenKernel:
    """A kernel rewritten into a record kernel (forward) and a replay kernel (backward).

    Launch it with ``launch(...)`` or ``.launch(...)``, exactly as you would launch ``kernel`` with
    ``wp.launch``. A kernel that consumes no atomic return has no phases and launches unchanged.
    """

    kernel: wp.Kernel
    record_kernel: wp.Kernel | None = None
    replay_kernel: wp.Kernel | None = None
    source: str = ""
    sites: list[SiteInfo] = field(default_factory=list)

    @property
    def key(self) -> str:
        return self.kernel.key

    def launch(
        self,
        dim: int | Sequence[int],
        inputs: Sequence[Any] = (),
        outputs: Sequence[Any] = (),
        device: wp.context.Devicelike = None,
        stream: wp.Stream | None = None,
        record_tape: bool = True,
        block_dim: int | None = None,
        max_blocks: int = 0,
    ) -> None:
        launch_two_phase(self, dim, inputs, outputs, device, stream, record_tape, block_dim, max_blocks)

    def check_float_returns(self, args: Sequence[Any]) -> None:
        """Refuse a launch whose floating-point returns would need gradients the replay cannot give.

        A recorded float return is treated as a constant. That is exact only when nothing it is made of
        (the target's initial values, the values written into it) carries a gradient in this launch.
        """
        for site in self.sites:
            if not is_float_dtype(resolve_path(self.kernel, args, site.target).dtype):
                continue
            for path in sorted(site.gradient_sources):
                value = resolve_path(self.kernel, args, path)
                if isinstance(value, wp.array) and value.requires_grad:
                    raise RewriteError(
                        self.kernel.key,
                        site.location,
                        f"the value returned by wp.atomic_{site.op}() on '{site.target}' is a float that depends on "
                        f"'{path}', which requires grad; its exact gradient through the returned value is not "
                        "supported",
                        f"Launch with '{path}' not requiring grad, or compute the value without using the atomic's "
                        "return",
                    )


def _refuse(source: FunctionSource, node: ast.AST, problem: str, advice: str) -> RewriteError:
    return RewriteError(source.name, source.location(node), problem, advice)


def _check_supported(source: FunctionSource, consumed: list[AtomicCall], params: list[str]) -> None:
    parents = parent_map(source.tree)
    aliases = single_assignments(source.tree)
    for call in consumed:
        name = f"wp.atomic_{call.op}()"
        if call.node.keywords:
            raise _refuse(source, call.node, f"{name} called with keyword arguments", "Pass its arguments by position")
        ancestor = parents.get(call.node)
        while ancestor is not None and ancestor is not source.tree:
            if isinstance(ancestor, ast.For | ast.While):
                raise _refuse(
                    source,
                    call.node,
                    f"the value returned by {name} is used inside a loop, which is not supported yet",
                    "Move the atomic out of the loop, or record its value by hand with @wp.func_replay",
                )
            ancestor = parents.get(ancestor)
        if argument_path(call.target, params, aliases) is None:
            raise _refuse(
                source,
                call.target,
                f"the target of {name} is not a kernel argument or a struct field of one",
                "Pass the target array to the kernel as an argument and apply the atomic to it directly",
            )
    hazard = consumed_atomic_in_helpers(source)
    if hazard is not None:
        call, helper_name, helper, atomic = hazard
        raise _refuse(
            source,
            call,
            f"helper '{helper_name}' uses the value returned by wp.atomic_{atomic.op}() "
            f"(at {helper.location(atomic.node)}); helpers that consume atomic returns are not supported yet",
            "Inline the helper into the kernel",
        )


def _dtype_text(kernel: wp.Kernel, path: str, warp_alias: str, any_alias: str) -> str:
    """Source text of the target's dtype when it is known before launch; ``Any`` (generic) otherwise."""
    root, *fields = path.split(".")
    arg_type = kernel.adj.arg_types.get(root)
    for name in fields:
        struct_var = getattr(arg_type, "vars", {}).get(name)
        arg_type = struct_var.type if struct_var is not None else None
    dtype = getattr(arg_type, "dtype", None)
    if dtype is not None and getattr(wp, getattr(dtype, "__name__", ""), None) is dtype:
        return f"{warp_alias}.{dtype.__name__}"
    return any_alias


def _records_name(call: ast.Call, parents: dict[ast.AST, ast.AST], op: str) -> str:
    parent = parents.get(call)
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name):
        return f"{parent.targets[0].id}_records"
    return f"atomic_{op}_records"


def _build(kernel: wp.Kernel) -> RewrittenKernel:
    source = FunctionSource.of(kernel)
    names = source.warp_names()
    consumed = [c for c in find_atomic_calls(source.tree, names) if c.consumed]
    params = [arg.label for arg in kernel.adj.args]
    _check_supported(source, consumed, params)
    if not consumed:
        return RewrittenKernel(kernel, source=f"# kernel '{kernel.key}' uses no atomic's return: launched unchanged\n")

    namer = Namer.for_tree(source.tree, set(source.namespace))
    warp_alias = source.warp_alias()
    any_alias = source.any_alias() or namer.fresh("Any")
    parents = parent_map(source.tree)
    aliases = single_assignments(source.tree)
    sources = gradient_sources(source.tree, params, names, consumed)
    sites, infos = [], []
    for call in consumed:
        target = argument_path(call.target, params, aliases)
        records = namer.fresh(_records_name(call.node, parents, call.op))
        sites.append(Site(call.node, records, _dtype_text(kernel, target, warp_alias, any_alias)))
        infos.append(SiteInfo(call.op, source.location(call.node), target, sources[call.node]))

    generated = Names(
        warp=warp_alias,
        any=any_alias,
        record_helper=namer.fresh("record_returned"),
        replay_helper=namer.fresh("replay_returned"),
        launch_shape=namer.fresh("launch_shape"),
        thread=namer.fresh("thread"),
        coords=tuple(namer.fresh(f"coord{i}") for i in range(4)),
    )
    record_name, replay_name = namer.fresh(f"{source.tree.name}_record"), namer.fresh(f"{source.tree.name}_replay")
    record_options = {**kernel.options, "enable_backward": False}
    definitions = [
        *helper_functions(generated),
        phase_kernel(source.tree, sites, generated, name=record_name, helper=generated.record_helper,
                     options=record_options),
        phase_kernel(source.tree, sites, generated, name=replay_name, helper=generated.replay_helper,
                     options=dict(kernel.options)),
    ]  # fmt: skip
    # ast.unparse (not astor): it follows the running Python's grammar, so every construct the kernel's
    # own Python version parsed prints back, with no third-party dependency to keep in step.
    header = [f"# Generated by warp-rewrite from kernel '{kernel.key}' ({source.filename}:{source.first_line})"]
    if source.any_alias() is None:
        header.append(f"from typing import Any as {any_alias}" if any_alias != "Any" else "from typing import Any")
    if warp_alias not in source.namespace:
        header.append(f"import warp as {warp_alias}")
    text = "\n".join(header) + "\n\n\n" + "\n\n\n".join(ast.unparse(d) for d in definitions) + "\n"

    module = f"wp_rewrite.{kernel.module.name}"
    scope = compile_generated(text, source.namespace, kernel.key, module)
    wp.get_module(module).options.update(kernel.module.options)
    return RewrittenKernel(kernel, scope[record_name], scope[replay_name], text, infos)


_cache: weakref.WeakKeyDictionary[wp.Kernel, RewrittenKernel] = weakref.WeakKeyDictionary()


def wp_rewrite(kernel: wp.Kernel) -> RewrittenKernel:
    """Rewrite a kernel whose code uses atomics' returned values into a record and a replay kernel.

    Raises ``TypeError`` for anything but a ``@wp.kernel`` and ``RewriteError`` for a pattern that
    cannot be made differentiable correctly. Repeated calls on the same kernel return the cached result.
    """
    if not isinstance(kernel, wp.Kernel):
        what = "a @wp.func" if isinstance(kernel, wp._src.context.Function) else repr(type(kernel).__name__)
        raise TypeError(f"wp_rewrite() expects a Warp kernel (the object @wp.kernel returns), got {what}")
    rewritten = _cache.get(kernel)
    if rewritten is None:
        rewritten = _cache[kernel] = _build(kernel)
    return rewritten


def launch(
    kernel: RewrittenKernel | wp.Kernel,
    dim: int | Sequence[int],
    inputs: Sequence[Any] = (),
    outputs: Sequence[Any] = (),
    device: wp.context.Devicelike = None,
    stream: wp.Stream | None = None,
    record_tape: bool = True,
    block_dim: int | None = None,
    max_blocks: int = 0,
) -> None:
    """``wp.launch`` for rewritten kernels: the same arguments with the same meaning.

    A ``RewrittenKernel`` runs as its two phases; a plain ``wp.Kernel`` goes straight to ``wp.launch``.
    """
    if isinstance(kernel, RewrittenKernel):
        kernel.launch(dim, inputs, outputs, device, stream, record_tape, block_dim, max_blocks)
    else:
        wp.launch(kernel, dim, inputs, outputs, device=device, stream=stream, record_tape=record_tape,
                  block_dim=block_dim, max_blocks=max_blocks)  # fmt: skip
