# SPDX-License-Identifier: Apache-2.0
# Copyright (c) 2026 the warp-rewrite authors
"""The contract between generated code and the runtime: the version, the ABI number, the names generated code
calls (``RuntimeNames``, the one table of them), and the enums its launch specs hold.

Generated code is written against one ABI: an emitted file's blocks record the number they were generated for and
call ``require_abi`` first, which refuses a runtime of another ABI (the runtime folder beside the file replaced
by hand, or the file copied next to another). Change ``ABI`` whenever a name of the table goes or changes what it
takes; ``require_abi`` and ``ABI`` themselves never change, so that any runtime can tell any emitted file apart.
"""

import dataclasses
import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import warp as wp

from .errors import RewriteError

if TYPE_CHECKING:
    from .specs import RecordSpec, SiteSpec

__version__ = "0.7.0"
ABI = 13  # the contract generated code is written against (see above); not the version, which changes more often


class Op(str, enum.Enum):
    """What a recorded site does: a Warp atomic (``wp.atomic_<op>``), or a plain read of an array the launch
    writes."""

    ADD = "add"
    SUB = "sub"
    MIN = "min"
    MAX = "max"
    EXCH = "exch"
    CAS = "cas"
    AND = "and"
    OR = "or"
    XOR = "xor"
    READ = "read"

    def __str__(self) -> str:  # in messages ("wp.atomic_add()"), as in code
        return self.value

    def __call__(self, target: str, location: str, **fields: Any) -> "SiteSpec":
        """A site of this op, as launch specs in generated code spell one: ``Op.READ("state.count", "f.py:12:9")``
        (``"12:9"`` in the spec's own file), a line where ``SiteSpec(target=..., op=..., location=...)`` takes five."""
        from .specs import SiteSpec  # (specs imports this module)

        return SiteSpec(target, self, location, **fields)


# The ops whose float returns get exact gradients, in the order of the device's op codes (``exact_atomics``).
EXACT_OPS = (Op.ADD, Op.SUB, Op.MIN, Op.MAX, Op.EXCH, Op.CAS)


class RecordKind(str, enum.Enum):
    """How a launch allocates a record parameter of the generated kernels (see ``specs.RecordSpec``)."""

    RETURNED = "returned"  # an atomic's returned values: the target's dtype
    VALUES = "values"  # exact returns: the operands (the target's dtype)
    COMPARES = "compares"  # exact atomic_cas: the compare operands (the target's dtype)
    ORDER = "order"  # exact returns: each operation's place on its address, one int32 column per component
    ADDRESSES = "addresses"  # exact returns: the flat address each operation touched (int32)
    SHADOW = "shadow"  # exact returns: the target's values and tickets while the record kernel runs
    TRIPS = "trips"  # how often a loop ran (its own dtype)
    CARRIED = "carried"  # ints a loop hands on (their own dtype)
    MARKS = "marks"  # an append pool's read and written elements (int32, one per element; empty: unchecked)

    def __str__(self) -> str:
        return self.value

    def __call__(self, name: str, **fields: Any) -> "RecordSpec":
        """A record of this kind, as launch specs in generated code spell one: ``RecordKind.CARRIED("x_in_loop0",
        dtype=wp.float32, loops=(0,))``, a line where ``RecordSpec(name=..., kind=..., ...)`` takes five."""
        from .specs import RecordSpec  # (specs imports this module)

        return RecordSpec(name, self, **fields)


class Reader(str, enum.Enum):
    """The families of device functions generated code names by a record's Warp type (``recorded_float32``), each
    made when code first names it: Warp allows custom gradients only for concrete types."""

    RECORDED = "recorded_"  # recorded_<type>(records, index): a record read back, with no gradient
    # carried_<type>(value, records, index): a local a loop carries, restored from its record in the replay; its
    # gradient passes on to ``value``, the local as the replay has it, so that it flows from one trip to the next
    CARRIED = "carried_"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class RuntimeNames:
    """The names generated code calls in the runtime: the ABI's table (every field but ``alias``), each spelled as
    the generated code of one module spells it, after that module's name of the runtime (``alias``).

    Besides these, generated code names only the readers of records by dtype (``Reader``: ``recorded_<dtype>``,
    ``carried_<dtype>``). The code generators
    (``warp_rewrite.passes.two_phase``, ``warp_rewrite.cli.emit``) get an instance through their settings and never
    spell a runtime name themselves; ``tests/conftest.py`` checks every kernel the suite generates against it.
    """

    alias: str  # the module's name of the runtime: wp_rewrite_runtime, unless the module uses that name
    # device functions the record and replay kernels call (``device``, ``exact_atomics``)
    record_returned: str
    record_if_room: str
    replay_returned: str
    range_length: str
    check_trips: str
    refused: str
    flat_index: str
    exact_add: str
    exact_sub: str
    exact_min: str
    exact_max: str
    exact_exch: str
    exact_cas: str
    exact_returned: str
    shadowed_read: str
    pool_read: str
    pool_written: str
    pool_value: str
    replays: str  # a helper's replay clone's twin: ``@<runtime>.replays(f_replay)`` (``replays``)
    fresh: str  # a local's value in a variable of its own, before a loop that assigns it (``device.fresh``)
    Any: str  # record annotations of generic kernels: wp.array(dtype=<runtime>.Any)
    # what an emitted block makes: its checks at import (``abi``, ``fingerprints``), its launch, spelled out
    # (``specs``, ``launch``)
    require_abi: str
    check_fingerprint: str
    known_int: str  # a range bound read at rewrite time, checked when Warp builds the kernel (``fingerprints``)
    RewrittenKernel: str
    KernelRewrite: str
    KernelPair: str
    KernelSpec: str
    SiteSpec: str
    RecordSpec: str
    LoopSpec: str
    ArgumentBound: str
    ExactRecords: str
    Op: str
    RecordKind: str

    @classmethod
    def spelled(cls, alias: str) -> "RuntimeNames":
        """The table as a module naming the runtime ``alias`` spells it."""
        return cls(alias, **{name: f"{alias}.{name}" for name in GENERATED})

    def named(self, name: str) -> str:
        """The spelling of the table's ``name`` (``KeyError`` for a name not in it)."""
        if name not in GENERATED:
            raise KeyError(f"'{name}' is not a runtime name generated code may call (see RuntimeNames)")
        return getattr(self, name)

    def exact(self, op: str) -> str:
        """The exact float atomic standing in for ``wp.atomic_<op>`` in a record kernel."""
        return self.named(f"exact_{Op(op).value}")

    def reader(self, dtype: type) -> str | None:
        """The reader of records of ``dtype`` (a Warp type), or None where there is none (a type Warp does not
        export by name): such records are read plainly."""
        name = reader_name(dtype, Reader.RECORDED)
        return f"{self.alias}.{name}" if name is not None else None

    def is_reader(self, called: str) -> bool:
        """Does ``called``, as generated code spells a callee, name a reader of records (``Reader``)?"""
        alias, _, name = called.rpartition(".")
        return alias == self.alias and reader_of(name) is not None

    def carrier(self, dtype: type) -> str:
        """The function restoring a loop's carried local of ``dtype`` (a Warp type Warp exports by name: the planner
        refuses others) from its record, its gradient passed on (``Reader.CARRIED``)."""
        name = reader_name(dtype, Reader.CARRIED)
        assert name is not None, dtype
        return f"{self.alias}.{name}"


def reader_name(dtype: type, family: Reader = Reader.RECORDED) -> str | None:
    """The runtime's name of the reader of ``family`` of records of ``dtype``, or None where ``dtype`` is not Warp's
    own type."""
    name = getattr(dtype, "__name__", "")
    return f"{family}{name}" if name and getattr(wp, name, None) is dtype else None


def reader_of(name: str) -> tuple[Reader, type] | None:
    """The family and Warp type of the reader ``name``, or None if ``name`` names no reader."""
    for family in Reader:
        dtype = getattr(wp, name.removeprefix(family), None) if name.startswith(family.value) else None
        if isinstance(dtype, type) and reader_name(dtype, family) == name:
            return family, dtype
    return None


# The table: what generated code calls in the runtime (besides the readers).
GENERATED = tuple(f.name for f in dataclasses.fields(RuntimeNames) if f.name != "alias")
# The device functions of the table only the record and count kernels call: each writes memory (a record, the
# launch's status, an atomic's target and its shadow) or reads a shadow as the record kernel leaves it. Warp's
# backward runs a replay's forward again, after the forward, against memory in its final state: a replay calling one
# would write twice, or read what is no longer there (``tests/support/generated_names.forward_calls_in_replays``).
FORWARD_ONLY = (
    "record_returned",
    "record_if_room",
    "check_trips",
    *(f"exact_{op.value}" for op in EXACT_OPS),
    "shadowed_read",
    "pool_read",
    "pool_written",
)
# What users of an emitted module reach through its runtime: refusals, the kernels it rebinds, the device's checks.
PUBLIC = ("__version__", "ABI", "RewriteError", "RewrittenLaunch", "check")
# What the runtime package exports: exactly these (``__init__``).
EXPORTED = (*PUBLIC, *GENERATED)


def require_abi(expected: int, kernel: str, location: str) -> None:
    """Refuse to run blocks generated for another ABI than this runtime's (see above)."""
    if expected != ABI:
        raise RewriteError(
            kernel,
            location,
            f"the code generated for this kernel expects warp-rewrite's runtime ABI {expected}, but the runtime it "
            f"imports ({__package__}, version {__version__}) has ABI {ABI}",
            "re-run wp-rewrite on this file: it regenerates the blocks and writes the runtime beside the file anew",
        )
