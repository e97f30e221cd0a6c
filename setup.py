"""The build, as ``pyproject.toml`` configures it, plus one file: ``warp_rewrite_launches.pth`` at the root of the
wheel, so that it lands in ``site-packages``, where Python runs its one line at every start. The line imports
nothing unless ``WP_REWRITE_LAUNCHES`` is set; then ``warp_rewrite`` turns the launch hook on as soon as the
program imports Warp (``warp_rewrite.switch``). A ``.pth`` file is the one way Python offers to run code in a
program that imports nothing of the package (setuptools has no option for it: hence this command).
"""

import os

from setuptools import setup
from setuptools.command.build_py import build_py

PTH = "warp_rewrite_launches.pth"
LINE = 'import os; os.environ.get("WP_REWRITE_LAUNCHES", "").strip() and __import__("warp_rewrite")\n'


class BuildPyWithPth(build_py):
    """``build_py``, writing the ``.pth`` file where the wheel's root is: the build folder, or, for an editable
    install (whose wheel holds no built files), the folder the wheel is assembled in (the install command's)."""

    def run(self):
        super().run()
        root = self.get_finalized_command("install").install_lib if self.editable_mode else self.build_lib
        os.makedirs(root, exist_ok=True)
        with open(os.path.join(root, PTH), "w", encoding="utf-8") as file:
            file.write(LINE)

    def get_outputs(self, include_bytecode=True):
        outputs = super().get_outputs(include_bytecode)
        return outputs if self.editable_mode else [*outputs, os.path.join(self.build_lib, PTH)]


setup(cmdclass={"build_py": BuildPyWithPth})
