"""Run by ``through_cli.load_emitted`` with the copy of the package first on ``sys.path``:
``python load_emitted.py ROOT TREE MODULE...`` imports each emitted module, compiles its Warp module on the CPU,
calls the factories defined in it (``factories.py``) and compiles what they made. One JSON line per module:
``{"module", "ok", "error", "seconds"}``."""

import json
import sys
import time
import traceback
from pathlib import Path

import warp as wp

wp.config.log_level = 40  # no banner, no per-module lines: stdout carries the results
wp.init()

import factories  # noqa: E402
from through_api import import_quietly  # noqa: E402


def load(module_name: str, root: Path, calls: list[factories.FactoryCall]) -> None:
    module = import_quietly(module_name)
    if not Path(module.__file__).is_relative_to(root):
        raise ImportError(f"{module_name} was imported from {module.__file__}, not from the copy under {root}")
    cpu = wp.get_device("cpu")
    wp.get_module(module_name).load(cpu)
    for _, kernel in factories.made_by([call for call in calls if call.module == module_name]):
        kernel.module.load(cpu)


def main() -> None:
    root, tree, modules = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
    calls = factories.calls_for(tree)
    for module in modules:
        start = time.perf_counter()
        try:
            load(module, root, calls)
            result = {"ok": True, "error": ""}
        except Exception:
            result = {"ok": False, "error": traceback.format_exc(limit=-4)}
        result.update(module=module, seconds=round(time.perf_counter() - start, 1))
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
