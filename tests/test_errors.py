"""What the rewrite refuses, and the exact messages it refuses with (file:line:col, construct, advice)."""

import re

import pytest
import warp as wp

from rewrite import RewriteError, wp_rewrite


def where(marker: str, token: str = "wp.atomic") -> str:
    """``file:line:col`` of ``token`` on the line of this file that carries ``# marker``."""
    with open(__file__) as source:
        for number, line in enumerate(source, start=1):
            if line.rstrip().endswith(f"# {marker}"):
                return f"{__file__}:{number}:{line.index(token) + 1}"
    raise AssertionError(marker)


@wp.func
def take_slot(count: wp.array[int]) -> int:
    return wp.atomic_add(count, 0, 1)  # helper-atomic


@wp.func
def write_next(count: wp.array[int], out: wp.array[float], value: float):
    out[take_slot(count)] = value


@wp.kernel
def calls_consuming_helper(count: wp.array[int], out: wp.array[float]):
    tid = wp.tid()
    write_next(count, out, float(tid))  # helper-call


@wp.kernel
def picks_target_at_run_time(a: wp.array[int], b: wp.array[int], flag: int, out: wp.array[float]):
    counter = a
    if flag > 0:
        counter = b
    slot = wp.atomic_add(counter, 0, 1)  # ambiguous-target
    out[slot] = 1.0


@wp.kernel
def keyword_value(count: wp.array[int], out: wp.array[float]):
    slot = wp.atomic_add(count, 0, value=1)  # keyword
    out[slot] = 1.0


def refusal(kernel: wp.Kernel) -> str:
    with pytest.raises(RewriteError) as error:
        wp_rewrite(kernel)
    return str(error.value)


def test_helper_that_consumes_an_atomic_names_both_places():
    message = refusal(calls_consuming_helper)
    assert message == (
        f"{where('helper-call', 'write_next')}: kernel 'calls_consuming_helper': helper 'write_next' uses the value "
        f"returned by wp.atomic_add() (at {where('helper-atomic')}); helpers that consume atomic returns are not "
        "supported yet. Inline the helper into the kernel"
    )


def test_target_chosen_at_run_time():
    assert refusal(picks_target_at_run_time) == (
        f"{where('ambiguous-target', 'counter')}: kernel 'picks_target_at_run_time': the target of wp.atomic_add() is "
        "not a kernel argument or a struct field of one. Pass the target array to the kernel as an argument and "
        "apply the atomic to it directly"
    )


def test_keyword_arguments():
    assert refusal(keyword_value) == (
        f"{where('keyword')}: kernel 'keyword_value': wp.atomic_add() called with keyword arguments. "
        "Pass its arguments by position"
    )


def test_error_carries_its_parts():
    with pytest.raises(RewriteError) as error:
        wp_rewrite(keyword_value)
    assert error.value.kernel == "keyword_value"
    assert re.fullmatch(r".*test_errors\.py:\d+:\d+", error.value.location)
    assert error.value.advice == "Pass its arguments by position"
