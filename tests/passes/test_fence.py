"""The language fence (passes/fence.py): the table's refused forms, and forms it does not have, are refused with the
same message through the API and the command line, before any code is generated; a kernel that consumes no atomic's
return is left alone whatever it holds."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import pytest

from tests.support import builtin_refused, updated_reads
from warp_rewrite import RewriteError, wp_rewrite
from warp_rewrite.cli.main import main
from warp_rewrite.live_frontend import LiveFrontend
from warp_rewrite.passes import builtins
from warp_rewrite.passes.fence import BY_NAME, FORMS, UNSUPPORTED, Fence, Kind, form_list, target_kind

KERNELS = """import warp as wp


@wp.kernel
def tile_return(count: wp.array(dtype=int), acc: wp.array(dtype=float), out: wp.array(dtype=float)):
    slot = wp.atomic_add(count, 0, 1)
    before = wp.tile_atomic_add(acc, wp.tile_ones(shape=2, dtype=float))
    out[slot] = wp.tile_sum(before)[0]


@wp.kernel
def matrix_update(count: wp.array(dtype=int), x: wp.array(dtype=float), out: wp.array(dtype=float)):
    slot = wp.atomic_add(count, 0, 1)
    m = wp.mat22(x[0], 0.0, 0.0, 1.0)
    m @= wp.mat22(2.0, 0.0, 0.0, 1.0)
    out[slot] = m[0, 0]


@wp.func
def claim(count: wp.array(dtype=int)) -> int:
    first = last = wp.atomic_add(count, 0, 1)
    return first + last


@wp.kernel
def chained_in_helper(count: wp.array(dtype=int), out: wp.array(dtype=float)):
    out[claim(count)] = 1.0


@wp.kernel
def plain(x: wp.array(dtype=float), out: wp.array(dtype=float)):
    m = wp.mat22(x[0], 0.0, 0.0, 1.0)
    m @= wp.mat22(2.0, 0.0, 0.0, 1.0)
    out[0] = m[0, 0]


@wp.kernel
def unpacked(count: wp.array(dtype=int), v: wp.array(dtype=wp.vec2), out: wp.array(dtype=wp.vec3)):
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = wp.vec3(*v[0], 1.0)  # as Newton's Kamino metrics build a vec6 of two vec3s
"""
REFUSALS = {
    "tile_return": (7, 14, "tile atomic, return used (wp.tile_atomic_add(acc, wp.tile_ones(shape=2, dtype=float)))"),
    "matrix_update": (15, 5, "@= on any target (m @= wp.mat22(2.0, 0.0, 0.0, 1.0))"),
    "chained_in_helper": (21, 5, "'Assign' (first = last = wp.atomic_add(count, 0, 1))"),
}


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    path = tmp_path_factory.mktemp("fence") / "fenced.py"
    path.write_text(KERNELS)
    spec = importlib.util.spec_from_file_location("fenced", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["fenced"] = module
    spec.loader.exec_module(module)
    return module


def _message(path: Path, name: str) -> str:
    line, column, form = REFUSALS[name]
    helper = " (in helper 'claim')" if name == "chained_in_helper" else ""
    return f"{path}:{line}:{column}: kernel '{name}': {form} is {UNSUPPORTED}{helper}. "


@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_refused_through_the_api(kernels, name):
    with pytest.raises(RewriteError) as error:
        wp_rewrite(getattr(kernels, name))
    assert str(error.value).startswith(_message(Path(kernels.__file__), name)), str(error.value)


def test_refused_alike_through_the_command_line(kernels, capsys):
    path = Path(kernels.__file__)
    main([str(path), "-o", str(path.with_name("fenced_out.py"))])
    captured = capsys.readouterr()
    for name in REFUSALS:
        assert _message(path, name) in captured.out + captured.err


def test_a_kernel_consuming_no_return_is_left_alone(kernels):
    """It runs as plain Warp, whatever forms it holds."""
    assert "uses no atomic's return: launched unchanged" in wp_rewrite(kernels.plain).source


def test_a_vector_unpacked_into_a_call_is_accepted(kernels):
    assert wp_rewrite(kernels.unpacked).source.count("def ") >= 2  # a record and a replay kernel


@pytest.mark.parametrize(
    ("target", "kind"),
    [
        ("v", "name"),
        ("s.f", "attribute"),
        ("s.counts[i]", "subscript"),
        ("a[i, j]", "subscript"),
        ("a[i][1]", "component"),
        ("a[i].f", "field"),
        ("a[i].f[1]", "nested"),
        ("a[i][0][1]", "nested"),
        ("f(x)[i]", None),
    ],
)
def test_target_kinds(target, kind):
    assert target_kind(ast.parse(f"{target} = 0").body[0].targets[0]) == kind


def test_every_form_is_named_once_and_refused_forms_say_what_to_do():
    assert len(BY_NAME) == len(FORMS)
    assert all(form.why for form in FORMS)
    assert {f.name for f in FORMS if f.kind is Kind.REFUSED} == {
        "@= on any target",
        "tile atomic, return used",
        "loop with an 'else' clause",
        "helper returning memory",
        "memory in an element of an array of structs",
        "builtin the rewrite cannot replay",
        "call of a local",
    }
    assert form_list().count("\n") == len(FORMS) + 2


COMPREHENSION = """import warp as wp


@wp.kernel
def listed(c: wp.array(dtype=wp.int32), o: wp.array(dtype=wp.float32)):
    s = wp.atomic_add(c, 0, 1)
    o[s] = float(sum([1.0 for i in range(3)]))
"""


def test_a_part_without_a_position_is_refused_at_its_function(tmp_path, capsys):
    """A comprehension's ``for`` has no line of its own: the refusal names the function's, in the API and the
    command line alike (it once failed inside the tool on the missing line number)."""
    path = tmp_path / "listed.py"
    path.write_text(COMPREHENSION)
    spec = importlib.util.spec_from_file_location("listed", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    expected = f"kernel 'listed': 'comprehension' ( for i in range(3)) is {UNSUPPORTED}"
    with pytest.raises(RewriteError, match=r"listed\.py:5:1: ") as error:
        wp_rewrite(module.listed)
    assert expected in str(error.value)
    assert main([str(path), "-o", str(tmp_path / "out.py")]) == 1
    assert f"listed.py:5:1: {expected}" in capsys.readouterr().err


# Builtins (passes/builtins.py): a class the rewrite cannot replay is refused with its group's reason and what to
# write instead; a builtin's write into a local a loop around a consumed atomic carries is seen, and the local kept
# or refused; a builtin reading an array the launch writes is refused by the planner.
BUILTIN_REFUSALS = {
    "local_array": (13, 12, "'wp.zeros' (wp.zeros(shape=4, dtype=F)) is not supported by warp-rewrite yet: a "
                    "thread-local array, whose stores Warp's replay skips"),
    "volume_store": (23, 5, "'wp.volume_store_f' (wp.volume_store_f(volume, i, 0, 0, float(x[i]))) is not supported "
                     "by warp-rewrite yet: writes a volume through its id"),
    "tile_view": (31, 11, "'wp.tile_view' (wp.tile_view(t, offset=(0,))) is not supported by warp-rewrite yet: a view "
                  "aliases its tile"),
    "raw_array": (39, 11, "'wp.array' (wp.array(ptr=address, shape=(4,), dtype=F)) is not supported by warp-rewrite "
                  "yet: an array made from a raw address"),
    "out_argument_carried": (78, 9, "'angle', which this loop carries, is written in place by "
                             "wp.quat_to_axis_angle(): Warp's adjoint of that write passes the gradient on to the "
                             "value 'angle' held before the call, which the replay restores from another trip"),
    "reads_written_array": (48, 27, "'wp.lower_bound' reads 'out', which this launch also writes"),
    "loop_variable_written": (62, 5, "the loop variable 'j' is reassigned in the loop"),
    "address_taken": (55, 15, "'wp.address_of' (wp.address_of(out[i])) is not supported by warp-rewrite yet: takes "
                      "the address of a local or an element"),
}  # fmt: skip


def _builtin_message(name: str) -> str:
    line, column, message = BUILTIN_REFUSALS[name]
    return f"{builtin_refused.__file__}:{line}:{column}: kernel '{name}': {message}"


@pytest.mark.parametrize("name", sorted(BUILTIN_REFUSALS))
def test_a_builtin_the_rewrite_cannot_replay_is_refused_through_the_api(name):
    with pytest.raises(RewriteError) as error:
        wp_rewrite(getattr(builtin_refused, name))
    assert str(error.value).startswith(_builtin_message(name)), str(error.value)


def test_a_builtin_the_rewrite_cannot_replay_is_refused_alike_through_the_command_line(tmp_path, capsys):
    assert main([builtin_refused.__file__, "-o", str(tmp_path / "out.py")]) == 1
    captured = capsys.readouterr()
    for name in BUILTIN_REFUSALS:
        assert _builtin_message(name) in captured.out + captured.err, name


UNCLASSIFIED = """import warp as wp


@wp.kernel
def newer(c: wp.array(dtype=wp.int32), x: wp.array(dtype=wp.float64), o: wp.array(dtype=wp.float64)):
    s = wp.atomic_add(c, 0, 1)
    o[s] = wp.erf(x[0])
"""


def test_a_builtin_the_table_lacks_is_refused_naming_it(tmp_path, capsys, monkeypatch):
    """As a Warp newer than the table would have it: ``erf`` taken out of the table."""
    monkeypatch.delitem(builtins.TABLE, "erf")
    path = tmp_path / "newer.py"
    path.write_text(UNCLASSIFIED)
    spec = importlib.util.spec_from_file_location("newer", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    expected = (
        f"newer.py:7:12: kernel 'newer': 'wp.erf' (wp.erf(x[0])) is not in the rewrite's table of Warp's builtins "
        f"(passes/builtins.py), so it cannot tell what the call does to memory: {UNSUPPORTED}. "
        "Compute it in a kernel that consumes no atomic's return, and report it to warp-rewrite"
    )
    with pytest.raises(RewriteError) as error:
        wp_rewrite(module.newer)
    assert expected in str(error.value)
    assert main([str(path), "-o", str(tmp_path / "out.py")]) == 1
    assert expected in capsys.readouterr().err


@pytest.mark.parametrize(
    ("name", "arrays"),
    [
        ("crowding", {"counts"}),
        ("shade_by_coverage", {"coverage"}),
        ("histogram_in_helper", {"histogram"}),
        ("reads_what_it_stored", {"out"}),
        ("sine_squared", {"out"}),
    ],
)
def test_a_kernel_reading_an_array_its_launch_updates_needs_a_rewrite(name, arrays):
    """It uses no atomic's return and holds no loop, but Warp's backward replays the read against the final sum, or
    against the launch's last store where the value read is used other than linearly."""
    fence = Fence(LiveFrontend(getattr(updated_reads, name), set()))
    assert fence.reads_written == arrays and fence.needs_rewrite and not fence.consumes_returns


def test_a_read_used_only_linearly_or_of_another_array_is_no_such_hazard():
    """A stored value read and only added to needs no value in Warp's adjoint; an update of one array beside reads of
    others is no hazard either; and a kernel without a backward pass needs no rewrite, whatever it reads."""
    for kernel in (updated_reads.adds_to_what_it_stored, updated_reads.updates_another):
        fence = Fence(LiveFrontend(kernel, set()))
        assert fence.reads_written == set() and not fence.needs_rewrite
    assert not Fence(LiveFrontend(updated_reads.no_backward, set())).needs_rewrite
