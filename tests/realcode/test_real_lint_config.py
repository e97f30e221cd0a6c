"""Emitted Newton files pass Newton's own ruff configuration: in a copy of the installed package with Newton's ruff
settings in its ``pyproject.toml`` (those of Newton's repository, which the wheel does not ship), every file that
``--check`` flags goes through the command line; for each file it rewrites, ``ruff check`` finds nothing the
original has not, and ``ruff format --check`` passes on the emitted file as on the original."""

from __future__ import annotations

import contextlib
import io
import shutil
import subprocess
import sys

import pytest
from trees import NEWTON, check, require

from warp_rewrite.cli.main import FINDINGS, OK, main

# Newton's [tool.ruff] settings (pyproject.toml of github.com/newton-physics/newton) that the emitted lines meet.
NEWTON_RUFF = """[tool.ruff]
line-length = 120
indent-width = 4

[tool.ruff.lint]
select = ["E", "I", "F", "W", "B", "C4", "NPY", "PLC", "PLE", "PLW", "UP", "RUF"]
ignore = ["E501", "E741", "UP018", "RUF046", "F811", "TC001", "TC002", "TC003", "F821"]

[tool.ruff.format]
quote-style = "double"
indent-style = "space"
skip-magic-trailing-comma = false
line-ending = "auto"
docstring-code-format = true
"""
FILES = [  # every file of Newton that the command line rewrites (test_the_files_are_those_rewritten)
    "newton/_src/controllers/impl/differential_ik/_common.py",
    "newton/_src/geometry/edge_redundancy.py",
    "newton/_src/geometry/kernels.py",
    "newton/_src/geometry/raycast.py",
    "newton/_src/geometry/remesh.py",
    "newton/_src/geometry/sdf_texture.py",
    "newton/_src/geometry/soft_contacts_heightfield.py",
    "newton/_src/geometry/soft_contacts_sdf.py",
    "newton/_src/sim/articulation.py",
    "newton/_src/sim/ik/ik_common.py",
    "newton/_src/sim/ik/ik_lm_optimizer.py",
    "newton/_src/solvers/featherstone/kernels.py",
    "newton/_src/solvers/implicit_mpm/implicit_mpm_model.py",
    "newton/_src/solvers/implicit_mpm/implicit_mpm_solver_kernels.py",
    "newton/_src/solvers/implicit_mpm/rasterized_collisions.py",
    "newton/_src/solvers/implicit_mpm/render_grains.py",
    "newton/_src/solvers/implicit_mpm/solve_rheology.py",
    "newton/_src/solvers/kamino/examples/reset/example_reset_dr_legs.py",
    "newton/_src/solvers/mujoco/kernels.py",
    "newton/_src/solvers/mujoco/speculative.py",
    "newton/_src/solvers/semi_implicit/kernels_contact.py",
    "newton/_src/solvers/style3d/cloth.py",
    "newton/_src/solvers/style3d/kernels.py",
    "newton/_src/solvers/tendon_kernels.py",
    "newton/_src/solvers/xpbd/kernels.py",
    "newton/_src/solvers/xpbd/restitution_kernels.py",
    "newton/_src/solvers/xpbd/tendon_kernels.py",
    "newton/_src/utils/mesh.py",
    "newton/examples/basic/example_basic_conveyor_forces.py",
    "newton/examples/cable/example_cable_bundle_hysteresis.py",
    "newton/examples/cable/example_cable_twist.py",
    "newton/examples/cloth/example_cloth_rollers.py",
    "newton/examples/cloth/example_cloth_twist.py",
    "newton/examples/contacts/example_contacts_rj45_plug.py",
    "newton/examples/diffsim/example_diffsim_drone.py",
    "newton/examples/diffsim/example_diffsim_soft_body.py",
    "newton/examples/mpm/example_mpm_pinch_carry.py",
    "newton/examples/mpm/example_mpm_water_dam_break.py",
    "newton/examples/robot/example_robot_allegro_hand.py",
    "newton/examples/robot/example_robot_asroballet.py",
    "newton/examples/robot/example_robot_ur10.py",
    "newton/examples/sensors/example_sensor_imu.py",
    "newton/examples/surface_gripper/example_surface_gripper.py",
    "newton/examples/surface_gripper/robot_playback.py",
    "newton/examples/surface_gripper/surface_gripper.py",
    "newton/examples/tendon/example_tendon_mujoco_switch.py",
    "newton/examples/vbd/example_cable_torsion_material_mapping.py",
    "newton/examples/vbd/example_cable_twist_transfer.py",
    "newton/tests/steel/_compliance_reference.py",
    "newton/tests/steel/test_articulation.py",
    "newton/tests/steel/test_kernels.py",
    "newton/tests/test_collision_cloth.py",
    "newton/tests/test_collision_pipeline.py",
    "newton/tests/test_collision_schedule.py",
    "newton/tests/test_contact_reduction_global.py",
    "newton/tests/test_contact_reduction_overflow.py",
    "newton/tests/test_convex_support.py",
    "newton/tests/test_gjk.py",
    "newton/tests/test_hashtable.py",
    "newton/tests/test_hydroelastic.py",
    "newton/tests/test_implicit_mpm.py",
    "newton/tests/test_remesh.py",
    "newton/tests/test_solver_vbd.py",
    "newton/tests/test_speculative_contacts.py",
]


def ruff(*argv: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", *argv], cwd=cwd, capture_output=True, text=True, check=False)


def findings(file: str, cwd) -> list[str]:
    """What ``ruff check`` reports in ``file``, without line numbers (the emitted file has more lines)."""
    out = ruff("check", "--output-format", "concise", "--no-cache", file, cwd=cwd).stdout
    return sorted(line.split(" ", 1)[1] for line in out.splitlines() if line.startswith(file))


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    require(NEWTON)
    root = tmp_path_factory.mktemp("newton_lint")
    shutil.copytree(NEWTON.folder, root / "newton", ignore=shutil.ignore_patterns("__pycache__", "bin", "*.so"))
    (root / "pyproject.toml").write_text(NEWTON_RUFF)
    return root


@pytest.fixture(scope="module")
def rewritten(project) -> list[str]:
    """Each flagged file through the command line, its original kept beside it as ``FILE.original.py``; the files
    it changed."""
    changed = []
    for file in check(NEWTON).files:
        original = project / f"{file}.original.py"
        shutil.copy(project / file, original)
        with contextlib.redirect_stderr(io.StringIO()):
            assert main([str(original), "-o", str(project / file), "-q"]) in (OK, FINDINGS)  # (FINDINGS: refusals)
        if (project / file).read_bytes() != original.read_bytes():
            changed.append(file)
    return changed


def test_the_files_are_those_rewritten(rewritten):
    assert rewritten == FILES


@pytest.mark.parametrize("file", FILES)
def test_emitted_newton_files_pass_newtons_ruff_config(project, rewritten, file):
    assert "wp_rewrite_runtime" in (project / file).read_text()  # rewritten
    assert findings(file, project) == findings(f"{file}.original.py", project)
    assert ruff("format", "--check", "--no-cache", f"{file}.original.py", cwd=project).returncode == 0
    formatted = ruff("format", "--check", "--diff", "--no-cache", file, cwd=project)
    assert formatted.returncode == 0, formatted.stdout
