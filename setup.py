# SPDX-License-Identifier: Apache-2.0
"""The CMake step of the wheel build (pyproject.toml holds the metadata).

build_py configures a CMake build of its own (build-wheel/cmake: the library,
tool, NCCL plugin and the Python accelerator, no tests), builds it, and puts
into the package:

    gpuwire/libgpuwire.so.0            the library the package loads
    gpuwire/_gwfast.abi3.so            the C accelerator (required here)
    gpuwire/libnccl-net-gpuwire.so     the NCCL net plugin (gpuwire.nccl_plugin_path(), python -m gpuwire.nccl_plugin)
    gpuwire/bin/gpuwire                the tool, run by the `gpuwire` console script

The wheel is tagged cp311-abi3-<platform>: the accelerator uses the stable ABI
and the rest does not depend on Python's version.
"""
import os
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

try:
    from wheel.bdist_wheel import bdist_wheel
except ImportError:  # no wheel package: pip install . still works through setuptools
    bdist_wheel = None

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD_BASE = "build-wheel"


def run(cmd, log):
    with open(log, "a") as f:
        f.write("$ %s\n" % " ".join(cmd))
        f.flush()
        rc = subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=HERE)
    if rc != 0:
        with open(log) as f:
            tail = f.read()[-6000:]
        sys.stderr.write(tail)
        raise SystemExit("gpuwire: `%s` failed (exit %d); the full log is %s" % (" ".join(cmd), rc, log))


class CMakeBuildPy(build_py):
    def run(self):
        super().run()
        bdir = os.path.join(HERE, BUILD_BASE, "cmake")
        os.makedirs(bdir, exist_ok=True)
        log = os.path.join(bdir, "wheel-build.log")
        open(log, "w").close()
        cmake = shutil.which("cmake")
        if not cmake:
            raise SystemExit("gpuwire: cmake >= 3.18 is needed to build the wheel (apt-get install cmake, "
                             "or pip install cmake)")
        run([cmake, "-S", HERE, "-B", bdir, "-DCMAKE_BUILD_TYPE=RelWithDebInfo", "-DGPUWIRE_BUILD_TESTS=OFF",
             "-DGW_PYTHON=" + sys.executable, "-DGW_PYTHON_INSTALL_DIR="], log)
        jobs = str(os.cpu_count() or 2)
        run([cmake, "--build", bdir, "-j", jobs, "--target", "gpuwire", "gpuwire_tool", "nccl-net-gpuwire"], log)
        fast = os.path.join(bdir, "python", "_gwfast.abi3.so")
        subprocess.call([cmake, "--build", bdir, "--target", "gw_pyfast"], stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL, cwd=HERE)
        if not os.path.exists(fast):
            raise SystemExit("gpuwire: the C accelerator could not be built: Python's headers for %s are "
                             "missing (apt-get install python3-dev); see %s" % (sys.executable, log))
        pkg = os.path.join(self.build_lib, "gpuwire")
        os.makedirs(os.path.join(pkg, "bin"), exist_ok=True)
        for src, dst in ((os.path.join(bdir, "libgpuwire.so.0"), "libgpuwire.so.0"),
                         (fast, "_gwfast.abi3.so"),
                         (os.path.join(bdir, "plugin", "nccl", "libnccl-net-gpuwire.so"),
                          "libnccl-net-gpuwire.so"),
                         (os.path.join(bdir, "gpuwire"), os.path.join("bin", "gpuwire"))):
            shutil.copy2(os.path.realpath(src), os.path.join(pkg, dst))
        shutil.copy2(os.path.join(HERE, "LICENSE"), os.path.join(pkg, "LICENSE"))


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True


cmdclass = {"build_py": CMakeBuildPy}
if bdist_wheel is not None:
    class AbiWheel(bdist_wheel):
        def get_tag(self):
            _, _, plat = super().get_tag()
            return "cp311", "abi3", plat

    cmdclass["bdist_wheel"] = AbiWheel

setup(cmdclass=cmdclass, distclass=BinaryDistribution,
      options={"build": {"build_base": BUILD_BASE}, "egg_info": {"egg_base": BUILD_BASE}})
