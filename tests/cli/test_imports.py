"""A helper copied into the rewritten module keeps the names it uses where the kernel's file reaches the same object
by another spelling: ``from pkg.contact_data import ContactData`` in the kernel's file and
``from .contact_data import ContactData`` in the helper's are one class. Gradients are checked against finite
differences of the original."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import warp as wp

from tests.support.emitted import import_file
from tests.support.harness import Case, check, f64, i32, original_or
from warp_rewrite.cli.main import main
from warp_rewrite.cli.project import Project

N = 6
X = np.array([0.7, -1.3, 1.9, 0.4, -0.6, 1.1])


def compaction_args() -> list:
    return [f64(X, True), i32([0]), wp.zeros(N, dtype=wp.float64, requires_grad=True)]


PACKAGE = {
    "__init__.py": "",
    "contact_data.py": "import warp as wp\n\n\n@wp.struct\nclass ContactData:\n    value: wp.float64\n",
    "writers.py": """import warp as wp

from .contact_data import ContactData


@wp.func
def write_contact(count: wp.array[wp.int32], out: wp.array[wp.float64], value: wp.float64) -> wp.int32:
    contact = ContactData()
    contact.value = value
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = contact.value * wp.float64(2.0)
    return slot
""",
}
SIM = """import warp as wp

from contactpkg.contact_data import ContactData
from contactpkg.writers import write_contact


@wp.kernel
def contacts(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    write_contact(count, out, x[tid] * x[tid])


def empty_contact() -> ContactData:
    return ContactData()


def step(x, count, out):
    wp.launch(contacts, x.shape[0], inputs=[x, count, out])
"""


@pytest.fixture(scope="module")
def modules(tmp_path_factory):
    folder = tmp_path_factory.mktemp("spellings")
    (folder / "contactpkg").mkdir()
    for name, text in PACKAGE.items():
        (folder / "contactpkg" / name).write_text(text)
    (folder / "contacts_sim.py").write_text(SIM)
    (folder / "contacts_original.py").write_text(SIM)
    status = main([str(folder / "contacts_sim.py"), "--in-place", "-q"])
    assert status == 0
    return import_file(folder / "contacts_sim.py", "contacts_sim"), import_file(
        folder / "contacts_original.py", "contacts_original"
    )


def test_one_class_reached_by_two_spellings_is_one_binding(modules):
    emitted, original = modules
    text = Path(emitted.__file__).read_text()
    assert "write_contact_record = write_contact_phases(" in text and "contact = ContactData()" in text
    assert text.count("import ContactData") == 1  # the file's own import serves the copied helper

    program = original_or(original.contacts, N, lambda args: emitted.step(*args))
    check(Case(None, N, compaction_args, [2], [0], program=program))


INSTALLED = {
    "__init__.py": "import sys\n\nsys.modules.setdefault('installed_pkg_was_imported', sys)\n",
    "sub/__init__.py": "",
    "sub/writers.py": """import warp as wp

SCALE = wp.constant(wp.float64(3.0))


@wp.func
def write_slot(count: wp.array[wp.int32], out: wp.array[wp.float64], value: wp.float64):
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = value * SCALE
""",
}
USER = """import warp as wp
from installed_pkg.sub.writers import write_slot


@wp.kernel
def emit_squares(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    write_slot(count, out, x[tid] * x[tid])
"""


def test_a_helper_of_an_installed_package_is_followed_without_importing_it(tmp_path, monkeypatch, capsys):
    """Found on ``sys.path`` (here a folder outside the project, as site-packages or PYTHONPATH would be) by Python's
    own finders, package by package: the package's ``__init__`` never runs while wp-rewrite reads it."""
    import sys

    site, project = tmp_path / "site", tmp_path / "project"
    for name, text in INSTALLED.items():
        (site / "installed_pkg" / name).parent.mkdir(parents=True, exist_ok=True)
        (site / "installed_pkg" / name).write_text(text)
    project.mkdir()
    (project / "user_sim.py").write_text(USER)
    monkeypatch.syspath_prepend(str(site))
    assert main([str(project / "user_sim.py"), "--check"]) == 1
    assert "WR003 kernel 'emit_squares' calls helper 'write_slot'" in capsys.readouterr().out
    assert main([str(project / "user_sim.py"), "-o", str(project / "user_sim_out.py"), "-q"]) == 0
    assert "installed_pkg" not in sys.modules and "installed_pkg_was_imported" not in sys.modules
    text = (project / "user_sim_out.py").read_text()
    assert "from installed_pkg.sub.writers import SCALE, write_slot\n" in text  # the kernel's file's own spelling
    emitted = import_file(project / "user_sim_out.py", "user_sim_out")

    program = original_or(
        emitted.emit_squares.kernel, N, lambda args: wp.launch(emitted.emit_squares, N, inputs=args, device="cpu")
    )
    check(Case(None, N, compaction_args, [2], [0], program=program))


def test_a_path_is_resolved_as_path_resolve_resolves_it_through_links_and_dots(tmp_path, monkeypatch):
    (tmp_path / "real" / "pkg").mkdir(parents=True)
    (tmp_path / "real" / "pkg" / "mod.py").write_text("x = 1\n")
    (tmp_path / "linked").symlink_to(tmp_path / "real")
    (tmp_path / "real" / "pkg" / "alias.py").symlink_to("../pkg/mod.py")
    monkeypatch.chdir(tmp_path)
    project = Project()
    for path in [
        Path("linked/pkg/mod.py"),
        tmp_path / "linked" / "pkg" / "alias.py",
        Path("real/pkg/../pkg/mod.py"),
        Path("mod.py"),
        Path("missing/mod.py"),
    ]:
        assert project.real(path) == path.resolve()
